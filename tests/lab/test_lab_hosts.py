"""The lab gives real hosts: SSH with the lab's key and strict host keys, a working inner Docker that
pulls from the lab registry and runs privileged containers, survival of a restart, and a clean `down`."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import docker
import paramiko
import pytest
from click.testing import CliRunner
from ruamel.yaml import YAML

from rke_py.cli import cli
from rke_py.lab import hosts, images, registry
from rke_py.lab.state import LABEL, Lab, LabHost
from tests.lab.conftest import owned_lab_name

pytestmark = pytest.mark.lab


def connect(lab: Lab, host: LabHost, timeout: float = 10) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(str(lab.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        host.address,
        username="root",
        key_filename=str(lab.key_path),
        look_for_keys=False,
        allow_agent=False,
        timeout=timeout,
    )
    return client


def run(client: paramiko.SSHClient, command: str) -> tuple[int, str]:
    _, stdout, stderr = client.exec_command(command, timeout=120)
    code = stdout.channel.recv_exit_status()
    return code, stdout.read().decode() + stderr.read().decode()


@pytest.fixture(scope="module")
def cluster_yml(lab: Lab) -> dict:
    return YAML(typ="safe").load(lab.cluster_yml.read_text())


@pytest.fixture(scope="module")
def first(lab: Lab) -> Iterator[paramiko.SSHClient]:
    client = connect(lab, lab.hosts[0])
    yield client
    client.close()


def registry_ref(cluster_yml: dict, key: str) -> str:
    return f"{cluster_yml['private_registries'][0]['url']}/{cluster_yml['system_images'][key]}"


def test_every_host_accepts_the_lab_key_and_matches_known_hosts(lab: Lab) -> None:
    assert len(lab.hosts) == 3
    assert stat.S_IMODE(lab.key_path.stat().st_mode) == 0o600
    for host in lab.hosts:
        client = connect(lab, host)
        try:
            assert run(client, "hostname") == (0, f"{host.name}\n")
        finally:
            client.close()


def test_a_host_key_not_in_known_hosts_is_rejected(lab: Lab, tmp_path) -> None:
    other = tmp_path / "known_hosts"
    other.write_text(lab.known_hosts.read_text().replace(lab.hosts[0].address + " ", "192.0.2.1 "))
    client = paramiko.SSHClient()
    client.load_host_keys(str(other))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        client.connect(
            lab.hosts[0].address,
            username="root",
            key_filename=str(lab.key_path),
            look_for_keys=False,
            allow_agent=False,
        )


def test_cluster_yml_describes_an_air_gapped_lab_cluster(lab: Lab, cluster_yml: dict) -> None:
    assert [n["address"] for n in cluster_yml["nodes"]] == [h.address for h in lab.hosts]
    assert [n["role"] for n in cluster_yml["nodes"]] == [["etcd", "controlplane", "worker"]] * 3
    assert {n["user"] for n in cluster_yml["nodes"]} == {"root"}
    assert cluster_yml["private_registries"] == [{"url": lab.registry, "is_default": True}]
    system_images = cluster_yml["system_images"]
    assert system_images["etcd"].startswith("rke-py-lab/etcd:")
    assert system_images["kubernetes"].startswith("rke-py-lab/hyperkube:")
    rke_tools = {
        system_images[k] for k in ("alpine", "nginx_proxy", "cert_downloader", "kubernetes_services_sidecar")
    }
    assert len(rke_tools) == 1 and rke_tools.pop().startswith("rke-py-lab/rke-tools:")


def test_inner_docker_answers_over_ssh(first: paramiko.SSHClient) -> None:
    code, out = run(first, "docker info --format '{{.ServerVersion}} {{.Driver}}'")
    assert code == 0, out
    assert out.startswith("20.10.") and out.split()[1] == "overlay2"


def test_cluster_images_pull_from_the_lab_registry(first: paramiko.SSHClient, cluster_yml: dict) -> None:
    for key in ("etcd", "kubernetes", "nginx_proxy", "pod_infra_container"):
        code, out = run(first, f"docker pull -q {registry_ref(cluster_yml, key)}")
        assert code == 0, out


def test_privileged_container_runs_inside_a_host(first: paramiko.SSHClient, cluster_yml: dict) -> None:
    etcd = registry_ref(cluster_yml, "etcd")
    code, out = run(first, f"docker run --rm --privileged --net host --pid host {etcd} etcd --version")
    assert code == 0, out
    assert "etcd Version: 3.5" in out


def test_rke_tools_nginx_loads_the_stream_module(first: paramiko.SSHClient, cluster_yml: dict) -> None:
    conf = (
        "include /etc/nginx/modules-enabled/*.conf; events {} "
        "stream { server { listen 127.0.0.1:16443; proxy_pass 127.0.0.1:6443; } }"
    )
    command = (
        f"mkdir -p /tmp/ngx && echo '{conf}' > /tmp/ngx/nginx.conf && docker run --rm --net host "
        f"-v /tmp/ngx:/etc/nginx/rke-py:ro --entrypoint nginx {registry_ref(cluster_yml, 'nginx_proxy')} "
        f"-c /etc/nginx/rke-py/nginx.conf -t"
    )
    code, out = run(first, command)
    assert code == 0, out
    assert "test is successful" in out


def test_hosts_resolve_lab_names_through_a_name_server_pods_can_reach(
    lab: Lab, first: paramiko.SSHClient
) -> None:
    """What a pod with dnsPolicy Default (a DNS add-on) gets: a name server on the node's own address, not
    loopback, that answers the lab's host names and sends no query out of the lab."""
    code, out = run(first, "cat /etc/resolv.conf")
    assert (code, out) == (0, f"nameserver {lab.hosts[0].address}\n")
    other = lab.hosts[1]
    code, out = run(first, f"nslookup {other.name}")
    assert code == 0, out
    assert f"Address: {other.address}" in out
    code, out = run(first, "nslookup example.com")
    assert code != 0 and "can't find example.com" in out, out


def test_status_reports_every_host_up(lab: Lab) -> None:
    result = CliRunner().invoke(
        cli, ["lab", "status", "--name", lab.name, "--dir", str(lab.dir), "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["registry"]["up"] is True
    assert [(h["address"], h["state"], h["sshd"], h["dockerd"]) for h in report["hosts"]] == [
        (h.address, "running", True, True) for h in lab.hosts
    ]


def test_cached_images_are_not_rebuilt(lab: Lab) -> None:
    built: list[str] = []
    image = images.ensure_image(docker.from_env(), "pause", progress=built.append)
    assert built == []
    assert image.ref == lab.images["pause"]


def test_host_comes_back_after_docker_restart(lab: Lab, cluster_yml: dict) -> None:
    host = lab.hosts[-1]
    client = connect(lab, host)
    pause = registry_ref(cluster_yml, "pod_infra_container")
    code, out = run(client, f"docker run -d --name keep --restart always --net none {pause}")
    assert code == 0, out
    client.close()

    docker.from_env().containers.get(host.name).restart()

    deadline = time.monotonic() + 60
    while True:
        try:
            client = connect(lab, host, timeout=2)
            code, out = run(client, "docker inspect -f '{{.State.Running}}' keep")
            client.close()
            if code == 0 and out.strip() == "true":
                break
        except (OSError, paramiko.SSHException):
            pass
        assert time.monotonic() < deadline, f"{host.name} did not come back: {out}"
        time.sleep(0.5)


def test_lab_down_leaves_nothing_behind(new_lab_name: str, tmp_path) -> None:
    name = new_lab_name
    directory = tmp_path / "lab"
    runner = CliRunner()
    result = runner.invoke(cli, ["lab", "up", "--name", name, "--nodes", "1", "--dir", str(directory)])
    assert result.exit_code == 0, result.output
    assert (directory / "cluster.yml").is_file()

    result = runner.invoke(cli, ["lab", "down", "--name", name, "--dir", str(directory)])
    assert result.exit_code == 0, result.output
    client = docker.from_env()
    ours = {"label": f"{LABEL}={name}"}
    assert client.containers.list(all=True, filters=ours) == []
    assert client.volumes.list(filters=ours) == []
    assert client.networks.list(filters=ours) == []
    assert not directory.exists()


def test_lab_down_in_a_directory_it_did_not_make_keeps_only_what_was_there(
    new_lab_name: str, tmp_path
) -> None:
    """The cluster's state and kubeconfig go with its hosts: left behind, the next lab in that directory
    would start from a state whose pinned host keys and certificates belong to hosts that are gone."""
    directory = tmp_path / "mine"
    directory.mkdir()
    (directory / "notes.txt").write_text("the user's own\n")
    runner = CliRunner()
    lab_dir = ["--name", new_lab_name, "--dir", str(directory)]
    result = runner.invoke(cli, ["lab", "up", "--nodes", "1", *lab_dir])
    assert result.exit_code == 0, result.output
    for written in ("cluster.rkestate", "kube_config_cluster.yml"):  # as `rke-py up` leaves them
        (directory / written).write_text("{}\n")

    result = runner.invoke(cli, ["lab", "down", *lab_dir])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in directory.iterdir()) == ["notes.txt"]


def test_a_host_made_anew_keeps_its_ssh_host_keys(new_lab_name: str, tmp_path) -> None:
    """The cluster state pins every host's key: a lab host whose container was lost and is made again by
    `lab up` must show the same keys, or the next `rke-py up` refuses it as a changed host."""
    directory = tmp_path / "lab"
    runner = CliRunner()
    lab_dir = ["--name", new_lab_name, "--dir", str(directory)]
    try:
        result = runner.invoke(cli, ["lab", "up", "--nodes", "1", *lab_dir])
        assert result.exit_code == 0, result.output
        lab = Lab.load(directory)
        before = lab.known_hosts.read_text()
        client = docker.from_env()
        old = client.containers.get(lab.hosts[0].name)
        old.remove(force=True)

        result = runner.invoke(cli, ["lab", "up", "--nodes", "1", *lab_dir])
        assert result.exit_code == 0, result.output
        assert client.containers.get(lab.hosts[0].name).id != old.id
        assert lab.known_hosts.read_text() == before
        assert oct(lab.host_keys(lab.hosts[0]).stat().st_mode & 0o777) == "0o600"
    finally:
        runner.invoke(cli, ["lab", "down", *lab_dir])


def test_lab_down_disconnects_what_is_left_on_its_network_and_removes_it(new_lab_name: str, tmp_path) -> None:
    """Docker lets go of a removed host's endpoint a moment late; `down` found its network "has active
    endpoints" and failed there, leaving volumes and state behind. A container still attached stands for
    that here: `down` disconnects it and removes everything."""
    directory = tmp_path / "lab"
    runner = CliRunner()
    lab_dir = ["--name", new_lab_name, "--dir", str(directory)]
    result = runner.invoke(cli, ["lab", "up", "--nodes", "1", *lab_dir])
    assert result.exit_code == 0, result.output
    client = docker.from_env()
    ours = {"label": f"{LABEL}={new_lab_name}"}
    (network,) = client.networks.list(filters=ours)
    pause = Lab.load(directory).images["pause"]
    stray = client.containers.run(pause, detach=True, network=network.name, name=f"{new_lab_name}-stray")
    try:
        result = runner.invoke(cli, ["lab", "down", *lab_dir])
        assert result.exit_code == 0, result.output
        assert client.networks.list(filters=ours) == []
        assert client.volumes.list(filters=ours) == []
        assert not directory.exists()
        stray.reload()
        assert stray.attrs["NetworkSettings"]["Networks"] == {}
    finally:
        stray.remove(force=True)


def blocked_on_lock(pid: int) -> bool:
    """Whether process `pid` waits for a file lock (a `->` line of /proc/locks)."""
    with open("/proc/locks") as locks:
        return any(f[1:2] == ["->"] and f[5:6] == [str(pid)] for f in map(str.split, locks))


def test_lab_down_waits_while_another_lab_up_gets_the_registry(lab: Lab, new_lab_name: str, tmp_path) -> None:
    """A `lab up` between starting the shared registry and making its network must not lose the registry
    to another lab's `down`, which removes it when no lab network is left."""
    nowhere = str(tmp_path / "none")
    down = [sys.executable, "-m", "rke_py", "lab", "down", "--name", new_lab_name, "--dir", nowhere]
    with registry.in_use():  # as `lab up` holds it there
        waiting = subprocess.Popen(down, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while not blocked_on_lock(waiting.pid):
            assert waiting.poll() is None, f"lab down did not wait: {waiting.communicate()[0]}"
            assert time.monotonic() < deadline, "lab down neither waited nor ended"
            time.sleep(0.05)
    out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, out
    assert registry.find(docker.from_env()) is not None  # the lab of this module still uses it


def test_two_lab_ups_at_once_whose_names_pick_the_same_subnet_both_come_up(tmp_path) -> None:
    """Two pipelines on one machine: each `lab up` found the /24 its name picks free and one failed on
    Docker's "Pool overlaps" as the other made its network first. Two names that pick the same /24, up
    at once: both come up, on different subnets."""
    wanted = hosts.choose_subnet(docker.from_env(), owned_lab_name("c0"))
    twin = next(
        f"c{i}"
        for i in range(1, 10_000)
        if hosts.choose_subnet(docker.from_env(), owned_lab_name(f"c{i}")) == wanted
    )
    labs = [(owned_lab_name(suffix), tmp_path / suffix) for suffix in ("c0", twin)]
    ups = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rke_py",
                "lab",
                "up",
                "--name",
                name,
                "--nodes",
                "1",
                "--dir",
                str(where),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, where in labs
    ]
    try:
        outputs = [up.communicate(timeout=300)[0] for up in ups]
        assert [up.returncode for up in ups] == [0, 0], outputs
        subnets = {Lab.load(where).subnet for _, where in labs}
        assert len(subnets) == 2 and str(wanted) in subnets, subnets
    finally:
        for name, where in labs:
            hosts.down(name, str(where))


def test_two_lab_ups_pushing_the_same_new_image_at_once_both_succeed(lab: Lab) -> None:
    """Two `lab up`s that both found an image missing from the shared registry (the suite's first two
    labs, once a stand-in image had changed) pushed it at once, and one failed with "No such image"
    (`registry._pushing`). The same two pushes, as two threads started together, under a new name."""
    client = docker.from_env()
    container = registry.find(client)
    assert container is not None
    image = images.ensure_image(client, "pause")
    name = f"rke-py-test/pushed-twice:{time.time_ns()}"
    start = threading.Barrier(2)

    def publish() -> None:
        start.wait()
        registry.publish(client, container, {name: image}, lambda _: None)

    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(publish) for _ in range(2)]
    for future in done:
        future.result()  # raises what the push raised
    port = registry.local_port(container)
    served = registry._manifest(port, *name.rsplit(":", 1))
    assert served == registry._manifest(port, image.path, image.tag)  # (200, the image's own digest)
