"""Snapshot archives as RKE writes and reads them, names as the CLI takes them, and snapshots in a bucket of
a real S3 API (moto's server, over HTTPS with a CA of the test's own)."""

from __future__ import annotations

import hashlib
import io
import ipaddress
import shlex
import shutil
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import boto3
import pytest

from rke_py.cli.cmd_etcd import s3_target
from rke_py.config import load_text
from rke_py.deploy.snapshot import Restored, _state_for
from rke_py.errors import UsageError
from rke_py.pki.certs import make_ca, make_signed
from rke_py.plan.encryption import key_file, new_key
from rke_py.snapshots import s3
from rke_py.snapshots.archive import Snapshot, SnapshotError, check_name, default_name, pack, unpack
from rke_py.snapshots.onhost import set_aside
from rke_py.state import (
    ClusterState,
    State,
    StateError,
    read_state,
    state_from_json,
    state_to_json,
    write_state,
)
from tests.unit.test_deploy_fake import Cluster


def etcd_db(body: bytes = b"bbolt pages") -> bytes:
    """A file shaped as `etcdctl snapshot save` writes it: pages, then the sha256 of them."""
    pages = body.ljust(4096, b"\0")
    return pages + hashlib.sha256(pages).digest()


def test_an_archive_holds_rkes_entries_and_reads_back():
    data = pack(Snapshot("one", etcd_db(), '{"desiredState": {}}'))
    names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    assert names == ["/backup/one", "/etc/kubernetes/one.rkestate"]  # rke-tools' paths, leading slash
    back = unpack("one", data, "here")
    assert (back.db, back.state) == (etcd_db(), '{"desiredState": {}}')
    assert pack(back) == data  # the same bytes for the same snapshot: copies compare equal


def test_an_archive_rke_tools_wrote_without_the_state_reads_too():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("backup/2024-01-01T00:00:00Z_etcd", etcd_db())
    assert unpack("2024-01-01T00:00:00Z_etcd", out.getvalue(), "here").state is None


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d[:100], "here: not a readable snapshot archive"),
        (lambda d: d[:50] + bytes(b ^ 0xFF for b in d[50:60]) + d[60:], "here: (damaged|not a readable)"),
        (lambda d: b"", "here: not a readable snapshot archive"),
    ],
    ids=["truncated", "bytes-changed", "empty"],
)
def test_a_damaged_archive_is_refused(damage, message):
    data = pack(Snapshot("one", etcd_db(), None))
    with pytest.raises(SnapshotError, match=message):
        unpack("one", damage(data), "here")


def test_a_snapshot_whose_hash_does_not_match_is_refused_even_in_a_good_zip():
    bad = bytearray(etcd_db())
    bad[10] ^= 0xFF
    with pytest.raises(SnapshotError, match="does not match the sha256 it was saved with"):
        unpack("one", pack(Snapshot("one", bytes(bad), None)), "here")
    with pytest.raises(SnapshotError, match="not an etcd snapshot"):
        unpack("one", pack(Snapshot("one", b"just text", None)), "here")


def test_an_archive_of_another_snapshot_is_refused():
    with pytest.raises(SnapshotError, match="holds no snapshot named two"):
        unpack("two", pack(Snapshot("one", etcd_db(), None)), "here")


def test_names_as_the_cli_takes_them():
    assert check_name("one.zip") == "one"  # RKE failed on the .zip name (its issue #2408); rke-py drops it
    assert check_name("2024-01-01T00:00:00Z_etcd") == "2024-01-01T00:00:00Z_etcd"
    for bad in ("../one", "a/b", "one;rm", "-one", "", "a b"):
        with pytest.raises(SnapshotError, match="is not a snapshot name"):
            check_name(bad)
    assert default_name(datetime(2026, 1, 2, 3, 4, 5, 678, UTC)) == "rke_etcd_snapshot_2026-01-02T03:04:05Z"


# --- S3 ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[s3.S3Target]:
    """moto's S3 server on loopback over HTTPS, with one bucket."""
    tmp = tmp_path_factory.mktemp("s3")
    ca = make_ca("test-ca")
    cert = make_signed("s3", ca, "s3", server=True, ips=[ipaddress.ip_address("127.0.0.1")])
    (tmp / "cert.pem").write_text(cert.cert_pem)
    (tmp / "key.pem").write_text(cert.key_pem)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    argv += ["-c", str(tmp / "cert.pem"), "-k", str(tmp / "key.pem")]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = s3.S3Target(f"127.0.0.1:{port}", "snapshots", "", "", "AKID", "secret", ca.cert_pem)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        (tmp / "ca.pem").write_text(ca.cert_pem)
        client = boto3.client(
            "s3",
            endpoint_url=f"https://{target.endpoint}",
            region_name="us-east-1",
            aws_access_key_id="AKID",
            aws_secret_access_key="secret",
            verify=str(tmp / "ca.pem"),
        )
        client.create_bucket(Bucket="snapshots")
        yield target
    finally:
        process.terminate()
        process.wait()


def test_snapshots_go_to_a_folder_and_list_with_their_size(server):
    target = s3.S3Target(
        server.endpoint, server.bucket, "", "clusters/prod", "AKID", "secret", server.custom_ca
    )
    data = pack(Snapshot("one", etcd_db(), None))
    s3.upload(target, "one", data)
    s3.upload(server, "elsewhere", data)  # the bucket's top: not in the folder's listing
    assert s3.download(target, "one") == data
    [stored] = s3.listing(target)
    assert (stored.name, stored.size) == ("one", len(data))
    assert "elsewhere" in {x.name for x in s3.listing(server)}
    assert target.where == "s3://snapshots/clusters/prod/"


def test_a_missing_snapshot_is_a_snapshot_error_and_a_wrong_ca_an_s3_error(server):
    with pytest.raises(SnapshotError, match="no such snapshot"):
        s3.download(server, "never-saved")
    other = make_ca("other-ca")
    untrusted = s3.S3Target(server.endpoint, server.bucket, custom_ca=other.cert_pem)
    with pytest.raises(s3.S3Error, match="s3://snapshots/: list snapshots"):
        s3.listing(untrusted)


def test_the_secret_key_is_not_in_the_targets_text(server):
    assert "secret" not in repr(server)


def test_s3_flags_replace_the_cluster_yml_settings_one_by_one():
    config = load_text(
        "nodes: [{address: 10.0.0.1, user: root, role: [etcd, controlplane, worker]}]\n"
        "services: {etcd: {backup_config: {s3backupconfig: {bucket_name: from-file, folder: f,"
        " endpoint: minio.example.com:9000}}}}\n"
    ).config

    class Desired:  # what s3_target reads of a Desired
        pass

    desired = Desired()
    desired.config = config  # type: ignore[attr-defined]
    flags = dict.fromkeys(("access_key", "secret_key", "bucket_name", "region", "endpoint", "folder"))
    target = s3_target(desired, True, **{**flags, "bucket_name": "from-flag", "s3_endpoint_ca": None})
    assert (target.bucket, target.folder, target.endpoint) == ("from-flag", "f", "minio.example.com:9000")
    assert s3_target(desired, False, **{**flags, "secret_key": "from-env", "s3_endpoint_ca": None}) is None
    with pytest.raises(UsageError, match="S3 options need --s3"):
        s3_target(desired, False, **{**flags, "bucket_name": "b", "s3_endpoint_ca": None})
    with pytest.raises(UsageError, match='--endpoint "https://x" has a URL scheme'):
        s3_target(desired, True, **{**flags, "endpoint": "https://x", "s3_endpoint_ca": None})


def test_a_restore_keeps_the_encryption_keys_the_snapshots_secrets_are_stored_under():
    """The cluster running now may have rotated its key since: the snapshot's own config must be deployed,
    and as the one its Secrets are written under (no rewrite), while the rest of what ran is forgotten."""
    old = key_file([new_key()])
    taken = ClusterState(
        desired=State({"kubernetesVersion": "v1.28.7-rancher1-1"}, {}, old),
        current=State({"kubernetesVersion": "v1.28.7-rancher1-1"}, {}, old),
    )
    state = _state_for(Snapshot("one", etcd_db(), state_to_json(taken)), None, Restored("one", "", ""))  # type: ignore[arg-type]
    assert (state.desired.encryption_config, state.current.encryption_config) == (old, old)
    assert state.current.rke_config == {} and state.desired.rke_config == taken.current.rke_config
    assert state_from_json(state_to_json(state)).current.encryption_config == old  # and it is written so
    assert state_from_json(state_to_json(state)).restored_snapshot == "one"


def test_the_up_after_a_restore_restarts_the_addons_pods_even_if_a_killed_run_began_it(tmp_path):
    """RKE's RestartClusterPods: pods that watched the API before the restore hold a view of data that is
    gone (found by conformance: cluster DNS never learnt a Service made after a restore). The state names
    the snapshot until they are restarted, so a run killed before that still does it."""
    cluster = Cluster(tmp_path)
    cluster.up()
    path = tmp_path / "cluster.rkestate"
    state = read_state(path)
    assert state is not None and state.restored_snapshot == ""
    state.restored_snapshot = "one"
    write_state(path, state)
    planned = [x.describe() for x in cluster.plan().cluster_actions if x.kind == "restart-pods"]
    why = "they watched the API before snapshot one was restored"
    assert f"restart-pods pods of deployment/kube-system/coredns ({why})" in planned
    done = cluster.up()
    assert [x.describe() for x in done.cluster_actions if x.kind == "restart-pods"] == planned
    after = read_state(path)
    assert after is not None and after.restored_snapshot == ""
    assert not [x for x in cluster.up().cluster_actions if x.kind == "restart-pods"]


def set_aside_in(parent: Path, fresh: bool) -> None:
    script = set_aside(fresh).replace("cd /parent", f"cd {shlex.quote(str(parent))}")
    subprocess.run(["sh", "-c", script], check=True)


def test_a_restore_run_again_after_a_cut_keeps_the_data_from_before_the_first_attempt(tmp_path: Path):
    data = tmp_path / "etcd"
    data.mkdir()
    (data / "member").write_text("before")
    set_aside_in(tmp_path, fresh=True)
    (data / "member").write_text("restored, then the run was cut off")
    set_aside_in(tmp_path, fresh=False)
    assert (tmp_path / "etcd.before-restore" / "member").read_text() == "before"
    assert list(data.iterdir()) == []
    # cut between marking and moving: the data there is still the one from before, and is moved aside
    shutil.rmtree(tmp_path / "etcd.before-restore")
    (data / "member").write_text("before")
    set_aside_in(tmp_path, fresh=False)
    assert (tmp_path / "etcd.before-restore" / "member").read_text() == "before"
    # that restore finished: a later one keeps what runs by then
    (data / "member").write_text("restored")
    set_aside_in(tmp_path, fresh=True)
    assert (tmp_path / "etcd.before-restore" / "member").read_text() == "restored"


def test_up_after_a_restore_cut_off_among_the_members_says_to_run_the_restore_again(tmp_path: Path):
    cluster = Cluster(tmp_path)
    cluster.up()
    path = tmp_path / "cluster.rkestate"
    state = read_state(path)
    assert state is not None
    state.restored_snapshot, state.restoring = "nightly", True
    write_state(path, state)
    assert read_state(path) == state
    for command in (cluster.up, cluster.plan):
        with pytest.raises(StateError) as refused:
            command()
        assert str(refused.value) == (
            "cluster.rkestate: the restore of snapshot nightly was cut off before every etcd member had its "
            "data: run `rke-py etcd snapshot-restore --name nightly` again (with the same --s3 options if "
            "it came from S3)"
        )
