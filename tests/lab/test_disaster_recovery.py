"""Disaster recovery as an RKE user does it, on a 3-node lab (every node etcd, controlplane and worker) with
an S3 server (moto, HTTPS, a CA of the lab's own): save, list, refuse a bad snapshot, restore, restore from
S3 onto wiped hosts with no local state, get the state file back, recurring snapshots with pruning. The
tests run in order on one cluster. No secret may show up in arguments, logs or JSON on the way."""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import pytest

from rke_py.lab import s3 as lab_s3
from tests.lab.e2e import (
    cluster_args,
    containers_on,
    edit_cluster_yml,
    host_exec,
    kubectl,
    own_lab,
    rke_py,
    s3_args,
    s3_keys,
    up,
)

pytestmark = pytest.mark.lab
SNAPSHOTS = "/opt/rke/etcd-snapshots"
OUTPUTS: list[str] = []  # everything rke-py printed, for the secret check at the end


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "dr", 3, s3=True) as made:
        (made.dir / "s3-ca.pem").write_text(made.s3_ca)
        yield made


def run(lab, *args: str, s3: bool = False):
    done = rke_py(
        *args, *cluster_args(lab, "--output", "json"), *(s3_args(lab) if s3 else []), env=s3_keys(lab)
    )
    OUTPUTS.extend([done.stdout, done.stderr])
    return done


def configmaps(lab) -> set[str]:
    return set(kubectl(lab, "get", "configmaps", "-o", "name").split())


def test_save_keeps_the_same_snapshot_on_every_etcd_host_and_in_s3(lab):
    built = up(lab)
    assert built.code == 0, built.stderr
    kubectl(lab, "create", "configmap", "before-snapshot", "--from-literal=kept=yes")
    saved = run(lab, "etcd", "snapshot-save", "--name", "one", s3=True)
    assert saved.code == 0, saved.stderr
    doc = saved.json()
    assert sorted(doc["hosts"]) == sorted(h.address for h in lab.hosts)
    assert doc["s3"] == f"s3://{lab.s3_bucket}/manual/one.zip"
    digests = {host_exec(lab, i, f"sha256sum {SNAPSHOTS}/one.zip").split()[0] for i in range(3)}
    assert len(digests) == 1  # the same bytes everywhere: a restore never finds members differing
    stored = lab_s3.client_for(lab).get_object(Bucket=lab.s3_bucket, Key="manual/one.zip")["Body"].read()
    assert hashlib.sha256(stored).hexdigest() in digests
    assert host_exec(lab, 0, f"stat -c %a {SNAPSHOTS}/one.zip").strip() == "600"
    listed = run(lab, "etcd", "snapshot-list", s3=True)
    assert listed.code == 0, listed.stderr
    where = {row["where"] for row in listed.json()["snapshots"] if row["name"] == "one"}
    assert where == {*(h.address for h in lab.hosts), f"s3://{lab.s3_bucket}/manual/"}


def test_a_missing_or_damaged_snapshot_is_refused_before_anything_stops(lab):
    before = containers_on(lab, 0)
    missing = run(lab, "etcd", "snapshot-restore", "--name", "nope", "--force")
    assert missing.code == 2
    assert "snapshot nope is on no etcd host" in missing.stderr
    assert run(lab, "etcd", "snapshot-save", "--name", "two").code == 0
    # bytes inside the first host's copy changed: the zip's checksums no longer match
    host_exec(lab, 0, f"printf XXXXXXXX | dd of={SNAPSHOTS}/two.zip bs=1 seek=2000 conv=notrunc 2>/dev/null")
    damaged = run(lab, "etcd", "snapshot-restore", "--name", "two", "--force")
    assert damaged.code == 2
    assert re.search(r"two\.zip: (damaged|not a readable snapshot archive)", damaged.stderr), damaged.stderr
    assert containers_on(lab, 0) == before  # nothing was stopped or replaced


def test_restore_brings_back_what_the_snapshot_held(lab):
    kubectl(lab, "create", "configmap", "after-snapshot", "--from-literal=gone=soon")
    kubectl(lab, "delete", "configmap", "before-snapshot")
    restored = run(lab, "etcd", "snapshot-restore", "--name", "one", "--force")
    assert restored.code == 0, restored.stderr
    doc = restored.json()
    assert doc["ok"] is True  # verify passed: etcd, apiservers, leases, every node Ready
    assert sorted(doc["replaced"]) == sorted(h.address for h in lab.hosts)
    names = configmaps(lab)
    assert "configmap/before-snapshot" in names and "configmap/after-snapshot" not in names
    assert "member" in host_exec(lab, 1, "ls /var/lib/etcd.before-restore")  # the old data, kept aside


def test_restore_from_s3_onto_wiped_etcd_hosts_without_the_local_state(lab):
    """As after losing every etcd host and the machine that ran rke-py: only cluster.yml and S3 remain."""
    for i in range(3):
        wipe = "docker rm -f $(docker ps -aq) >/dev/null 2>&1; rm -rf /var/lib/etcd* /etc/kubernetes /opt/rke"
        host_exec(lab, i, wipe)
    state = Path(lab.cluster_yml).with_suffix(".rkestate")
    state.unlink()
    restored = run(lab, "etcd", "snapshot-restore", "--name", "one", "--force", s3=True)
    assert restored.code == 0, restored.stderr
    assert restored.json()["source"] == f"s3://{lab.s3_bucket}/manual/one.zip"
    assert restored.json()["ok"] is True
    assert "configmap/before-snapshot" in configmaps(lab)
    assert state.exists() and state.stat().st_mode & 0o777 == 0o600


def another_clusters_state(lab) -> str:
    """A state for the same cluster.yml with certificates of its own (`up --init` elsewhere): what a state
    from another cluster, or from before a CA rotation, looks like to the hosts."""
    elsewhere = Path(lab.cluster_yml).parent / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    copy = elsewhere / Path(lab.cluster_yml).name
    copy.write_text(Path(lab.cluster_yml).read_text())
    assert rke_py("up", "--init", "--config", str(copy)).code == 0
    return copy.with_suffix(".rkestate").read_text()


# how the local state is damaged: (name, its new content or None for gone, the kubeconfig lost too)
DAMAGE = [
    ("lost", lambda lab, text: None, False),
    ("lost-with-kubeconfig", lambda lab, text: None, True),
    ("emptied", lambda lab, text: "", False),
    ("truncated", lambda lab, text: text[: len(text) // 2], False),
    ("another-clusters", lambda lab, text: another_clusters_state(lab), False),
]


@pytest.mark.parametrize(
    ("damage", "kubeconfig_lost"), [(d[1], d[2]) for d in DAMAGE], ids=[d[0] for d in DAMAGE]
)
def test_a_damaged_or_lost_state_is_refused_then_fetched_from_the_cluster(lab, damage, kubeconfig_lost):
    """`up` touches nothing and points at `util get-state-file`, which writes the cluster's copy back
    (asking with a controlplane host's kube-node identity when the kubeconfig is gone too)."""
    state = Path(lab.cluster_yml).with_suffix(".rkestate")
    kubeconfig = state.with_name(f"kube_config_{Path(lab.cluster_yml).name}")
    kept, before = state.read_text(), [containers_on(lab, i) for i in range(len(lab.hosts))]
    damaged = damage(lab, kept)
    if damaged is None:
        state.unlink()
    else:
        state.write_text(damaged)
    if kubeconfig_lost:
        kubeconfig.unlink()
    refused = up(lab)
    assert refused.code in (2, 4), refused.stderr[-3000:]
    assert "rke-py util get-state-file" in refused.stderr and "Traceback" not in refused.stderr
    assert [containers_on(lab, i) for i in range(len(lab.hosts))] == before
    got = run(lab, "util", "get-state-file")
    assert got.code == 0, got.stderr
    assert state.read_text() == kept
    assert ("kube-node" if kubeconfig_lost else "admin") in got.json()["read_with"]
    noop = up(lab, "--no-verify")
    assert noop.code == 0 and noop.json()["changed"] == 0, noop.stderr
    assert kubeconfig.exists()


def test_recurring_snapshots_are_taken_uploaded_and_pruned(lab):
    def recurring(retention: int):
        def change(d):
            etcd = d.setdefault("services", {}).setdefault("etcd", {})
            etcd["extra_env"] = ["RKE_PY_LAB_SECONDS_PER_HOUR=3"]  # the stand-in's hour: 3 s
            etcd["backup_config"] = {
                "interval_hours": 1,
                "retention": retention,
                "s3backupconfig": {
                    "endpoint": lab.s3_endpoint,
                    "bucket_name": lab.s3_bucket,
                    "folder": "recurring",
                    "access_key": lab.s3_access_key,
                    "secret_key": lab.s3_secret_key,
                    "custom_ca": lab.s3_ca,
                },
            }

        return change

    edit_cluster_yml(lab, recurring(3))
    assert up(lab, "--no-verify").code == 0  # extra_env reaches etcd too: both are replaced
    edit_cluster_yml(lab, recurring(2))
    changed = up(lab)
    assert changed.code == 0, changed.stderr
    replaced = {(a["kind"], a["target"]) for h in changed.json()["hosts"] for a in h["actions"]}
    assert replaced == {("replace", "etcd-rolling-snapshots")}  # a backup setting changes only that
    time.sleep(14)
    local = sorted(host_exec(lab, 0, f"cd {SNAPSHOTS} && ls *_etcd.zip").split())
    assert 2 <= len(local) <= 3, local  # one every 3 s, nothing older than 6 s kept
    logs = host_exec(lab, 0, "docker logs etcd-rolling-snapshots 2>&1")
    assert "deleted" in logs and "uploaded recurring/" in logs, logs
    objects = lab_s3.client_for(lab).list_objects_v2(Bucket=lab.s3_bucket, Prefix="recurring/")
    uploaded = [o["Key"] for o in objects.get("Contents", [])]
    assert 2 <= len(uploaded) <= 8, uploaded  # three hosts upload; each prunes what is older than 6 s
    listed = run(lab, "etcd", "snapshot-list").json()["snapshots"]  # pruning goes on meanwhile
    assert {row["where"] for row in listed if row["name"].endswith("_etcd")} == {h.address for h in lab.hosts}


def test_no_secret_shows_in_arguments_logs_or_output(lab):
    secret = lab.s3_secret_key
    assert OUTPUTS and not any(secret in text for text in OUTPUTS)
    log = Path(lab.cluster_yml).with_suffix(".rke-py.log").read_text()
    assert "snapshot-restore" in log and secret not in log
    for i in range(3):
        assert secret not in host_exec(lab, i, "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '")
    plan = rke_py("plan", *cluster_args(lab, "--output", "json"))
    assert plan.code == 0 and secret not in plan.stdout + plan.stderr
