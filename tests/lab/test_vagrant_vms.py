"""The Vagrant lab on real virtual machines, as a user runs it: `vagrant up` of vagrant/Vagrantfile with a
box from vagrant/build-box (libvirt; KVM where it runs the guest, QEMU's software emulation otherwise),
`rke-py config --from-vagrant vagrant/`, `rke-py up` pulling the lab's images from a registry the machines
reach on their private network, `rke-py status`, a pod on a machine (real Kubernetes only), `rke-py remove`
leaving no cluster container on the machines, and `vagrant destroy -f`.

On demand (minutes, not CI's budget): RKE_PY_VAGRANT_BOX names the box file. Everything the run starts —
the libvirt daemons if none ran, the machines, libvirt's networks, storage pool and iptables chains, the
registry the machines pull from — is gone afterwards, also when a step fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from ruamel.yaml import YAML

from rke_py.lab import images, registry
from rke_py.lab.clusteryml import SYSTEM_IMAGES
from tests.lab.conftest import kube_binaries

pytestmark = [pytest.mark.lab, pytest.mark.vagrant_vms]

REPO = Path(__file__).parents[2]
LIBVIRT = "qemu:///system"
HOST_ADDRESS = "192.168.56.1"  # the hypervisor host on the Vagrantfile's private network
REGISTRY = f"{HOST_ADDRESS}:{registry.PORT}"
ROLES = {"node-1": ["etcd", "controlplane", "worker"], "node-2": ["worker"], "node-3": ["worker"]}
VM_REGISTRY = "rke-py-vagrant-registry"
# A machine under software emulation does not renew a lease within Kubernetes' 10 s deadline: its controller
# manager and scheduler lose their leases, exit and start over, and the namespaces wait for minutes. While
# the workers join, the controlplane machine's load reaches 14 on 2 CPUs and its apiserver stalls past 45 s
# (both restarted with a 45 s deadline). RKE's extra_args give them more time, as an operator of slow hosts
# would; on a 2-core machine not enough (vagrant/README.md).
SLOW_LEADER_ELECTION = {
    "leader-elect-lease-duration": "120s",
    "leader-elect-renew-deadline": "100s",
    "leader-elect-retry-period": "20s",
}
# `up` waits for the cluster to settle (every namespace's ServiceAccount, a first pod admitted) as long as
# --api-timeout. On an emulated machine the apiserver can stall past the renew deadline while the workers
# join; the controller manager then starts over, waits out its old lease and starts its controllers one by
# one, minutes more than the 180 s default allows.
API_TIMEOUT = "600"
LIBVIRT_PACKAGES = ("vagrant-libvirt", "libvirt-daemon-system", "libvirt-clients", "qemu-system-x86")
LIBVIRT_CHAINS = {  # what libvirt's network driver adds to the host's iptables and leaves when it stops
    "filter": ["LIBVIRT_INP", "LIBVIRT_OUT", "LIBVIRT_FWO", "LIBVIRT_FWI", "LIBVIRT_FWX"],
    "nat": ["LIBVIRT_PRT"],
    "mangle": ["LIBVIRT_PRT"],
}
HOOKS = {"LIBVIRT_INP": "INPUT", "LIBVIRT_OUT": "OUTPUT", "LIBVIRT_PRT": "POSTROUTING"} | {
    c: "FORWARD" for c in ("LIBVIRT_FWO", "LIBVIRT_FWI", "LIBVIRT_FWX")
}


def run(*args: str, timeout: float = 1800, check: bool = True, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(args)}: exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def virsh(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    return run("virsh", "-c", LIBVIRT, *args, timeout=120, check=check)


def names(kind: str) -> set[str]:
    """Names of libvirt's domains, networks or pools (`kind`: list, net-list, pool-list)."""
    return set(virsh(kind, "--all", "--name").stdout.split())


def pool_volumes(pool: str) -> set[str]:
    virsh("pool-refresh", pool)
    table = virsh("vol-list", pool).stdout.splitlines()[2:]  # a header and a rule, then `name path`
    return {line.split()[0] for line in table if line.strip()}


def install_missing() -> None:
    """What the path needs beyond scripts/bootstrap's packages, installed from Debian as bootstrap does."""
    missing = [
        package
        for package in LIBVIRT_PACKAGES
        if run("dpkg-query", "-W", "-f=${Status}", package, check=False).stdout != "install ok installed"
    ]
    if missing:
        apt = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        run("apt-get", "update", "-qq", env=apt)
        run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, env=apt)


@pytest.fixture(scope="module")
def libvirtd() -> Iterator[None]:
    """libvirt's daemons (started here when none answers, and stopped afterwards with the iptables chains
    its network driver leaves behind); what libvirt held before the run is left as it was."""
    install_missing()
    started: list[int] = []
    if virsh("version").returncode != 0:
        for daemon in ("virtlogd", "libvirtd"):
            pidfile = f"/run/rke-py-test-{daemon}.pid"
            run(daemon, "--daemon", "--pid-file", pidfile)
            started.append(int(Path(pidfile).read_text()))
        deadline = time.monotonic() + 30
        while virsh("version").returncode != 0 and time.monotonic() < deadline:
            time.sleep(0.5)
    before = {kind: names(kind) for kind in ("list", "net-list", "pool-list")}
    volumes = {pool: pool_volumes(pool) for pool in before["pool-list"]}
    try:
        yield
    finally:
        for domain in names("list") - before["list"]:
            virsh("destroy", domain)
            virsh("undefine", domain, "--remove-all-storage")
        for net in names("net-list") - before["net-list"]:
            virsh("net-destroy", net)
            virsh("net-undefine", net)
        for pool in names("pool-list"):
            for volume in pool_volumes(pool) - volumes.get(pool, set()):  # the box's, the machines' disks
                virsh("vol-delete", volume, "--pool", pool)
            if pool not in volumes:
                virsh("pool-destroy", pool)
                virsh("pool-undefine", pool)
        for pid in reversed(started):
            os.kill(pid, 15)
        if started:
            _remove_libvirt_chains()


def _remove_libvirt_chains() -> None:
    for table, chains in LIBVIRT_CHAINS.items():
        for chain in chains:
            if run("iptables", "-t", table, "-n", "-L", chain, check=False).returncode != 0:
                continue
            run("iptables", "-t", table, "-D", HOOKS[chain], "-j", chain, check=False)
            run("iptables", "-t", table, "-F", chain, check=False)
            run("iptables", "-t", table, "-X", chain, check=False)


def libvirt_driver(box: Path, tmp: Path) -> str:
    """kvm when KVM boots the box's kernel (its first line on the serial console within a minute), else
    qemu: a /dev/kvm may exist that cannot run a stock guest kernel."""
    if os.environ.get("RKE_PY_LIBVIRT_DRIVER"):
        return os.environ["RKE_PY_LIBVIRT_DRIVER"]
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "qemu"
    with tarfile.open(box) as tar:
        tar.extract("box.img", tmp, filter="data")
    console = tmp / "console.log"
    probe = subprocess.Popen(
        ["qemu-system-x86_64", "-accel", "kvm", "-cpu", "host", "-m", "512", "-display", "none", "-snapshot",
         "-drive", f"file={tmp / 'box.img'},if=virtio", "-serial", f"file:{console}", "-no-reboot"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and probe.poll() is None:
            if console.exists() and "Linux version" in console.read_text(errors="replace"):
                return "kvm"
            time.sleep(1)
        return "qemu"
    finally:
        probe.kill()
        probe.wait()
        (tmp / "box.img").unlink()


@pytest.fixture(scope="module")
def lab_images() -> Iterator[dict[str, images.LabImage]]:
    """The lab's cluster images in the shared lab registry, and a second registry on the same storage that
    the machines reach at HOST_ADDRESS (it listens on the host's address on their private network)."""
    client = docker.from_env()
    built = images.ensure_images(client, (*images.CLUSTER_IMAGES, "registry"), binaries=kube_binaries())
    with registry.in_use():
        shared = registry.ensure(client, built["registry"])
        registry.push(client, shared, [built[n] for n in images.CLUSTER_IMAGES], lambda _: None)
    yield built
    for container in client.containers.list(all=True, filters={"name": VM_REGISTRY}):
        container.remove(force=True)


def serve_to_machines(image: images.LabImage) -> None:
    """Start the machines' registry; HOST_ADDRESS exists once `vagrant up` made the private network."""
    docker.from_env().containers.run(
        image.ref,
        name=VM_REGISTRY,
        detach=True,
        network_mode="host",
        environment={"REGISTRY_HTTP_ADDR": REGISTRY},
        volumes={registry.VOLUME: {"bind": "/var/lib/docker-registry", "mode": "ro"}},
    )


@pytest.fixture(scope="module")
def machines(libvirtd, lab_images, tmp_path_factory) -> Iterator[dict[str, object]]:
    """Three machines from the box, up and provisioned; destroyed afterwards."""
    box = Path(os.environ["RKE_PY_VAGRANT_BOX"])
    tmp = tmp_path_factory.mktemp("vagrant")
    project = tmp / "vagrant"
    project.mkdir()
    shutil.copy(REPO / "vagrant" / "Vagrantfile", project / "Vagrantfile")
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp / "id_ed25519"))
    env = {
        **os.environ,
        "VAGRANT_HOME": str(tmp / "vagrant.d"),  # the box added here goes with the run
        "VAGRANT_DEFAULT_PROVIDER": "libvirt",
        "RKE_PY_BOX_FILE": str(box),
        "RKE_PY_LIBVIRT_DRIVER": libvirt_driver(box, tmp),
        "RKE_PY_INSECURE_REGISTRY": REGISTRY,
        "RKE_PY_POD_NETWORK": "bridge",  # kubelet reports Ready only with a CNI config
        "RKE_PY_SSH_PUBKEY": str(tmp / "id_ed25519.pub"),
        "RKE_PY_NODES": "3",
        # the controlplane machine 2 emulated CPUs, each worker 1: under software emulation every emulated
        # CPU is a busy host thread, and 6 of them on a 2-core machine starved the controlplane's apiserver
        "RKE_PY_CPUS": "2,1",
    }
    env.pop("VAGRANT_CWD", None)
    times: dict[str, float] = {}
    try:
        start = time.monotonic()
        # vagrant-libvirt 0.11 starting machines in parallel left them all shut off here
        run("vagrant", "up", "--provider=libvirt", "--no-parallel", cwd=project, env=env)
        times["vagrant up"] = time.monotonic() - start
        serve_to_machines(lab_images["registry"])
        yield {"project": project, "env": env, "key": tmp / "id_ed25519", "times": times}
    finally:
        start = time.monotonic()
        run("vagrant", "destroy", "-f", cwd=project, env=env, check=False)
        times["vagrant destroy"] = time.monotonic() - start
        print("\nVagrant lab times: " + ", ".join(f"{k} {v:.0f} s" for k, v in times.items()))


def rke_py(*args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    return run("python3", "-m", "rke_py", *args, timeout=timeout, check=False, cwd=REPO)


def cluster_yml(machines: dict[str, object], lab_images: dict[str, images.LabImage]) -> Path:
    """`config --from-vagrant`, then what an air-gapped user edits: roles, images, the registry."""
    project = machines["project"]
    assert isinstance(project, Path)
    path = project / "cluster.yml"
    result = rke_py("config", "--from-vagrant", str(project), "--name", str(path))
    assert result.returncode == 0, result.stderr
    yaml = YAML()
    document = yaml.load(path)
    assert [n["address"] for n in document["nodes"]] == ["192.168.56.11", "192.168.56.12", "192.168.56.13"]
    assert all(n["internal_address"] == n["address"] and n["user"] == "vagrant" for n in document["nodes"])
    for node in document["nodes"]:
        assert Path(node["ssh_key_path"]).name == "private_key"  # the key Vagrant made for that machine
        node["role"] = ROLES[node["hostname_override"]]
    document["network"] = {"plugin": "none"}
    document["ingress"] = {"provider": "none"}
    document["monitoring"] = {"provider": "none"}
    document["dns"] = {"provider": "none"}
    services = document.setdefault("services", {})
    for service in ("kube-controller", "scheduler"):
        services.setdefault(service, {}).setdefault("extra_args", {}).update(SLOW_LEADER_ELECTION)
    document["private_registries"] = [{"url": REGISTRY, "is_default": True}]
    document["system_images"] = {key: lab_images[name].ref for key, name in SYSTEM_IMAGES.items()}
    yaml.dump(document, path)
    return path


@pytest.fixture(scope="module")
def cluster(machines, lab_images) -> Iterator[Path]:
    path = cluster_yml(machines, lab_images)
    times = machines["times"]
    assert isinstance(times, dict)
    start = time.monotonic()
    result = rke_py("up", "--config", str(path), "--api-timeout", API_TIMEOUT)
    times["rke-py up"] = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + diagnostics(machines)
    yield path
    if (path.parent / "cluster.rkestate").exists():  # a test failed before the one that removes it
        rke_py("remove", "--config", str(path), "--force")


def diagnostics(machines: dict[str, object]) -> str:
    """What the control plane machine's containers did, for a failure's message: the machines are gone
    once the test ends."""
    components = "kube-controller-manager kube-scheduler kube-apiserver etcd"
    script = (
        "docker ps -a --format '{{.Names}} {{.Status}}'; uptime; "
        f"for c in {components}; do "
        "echo \"$c: $(docker inspect -f '{{.RestartCount}} restarts, up since {{.State.StartedAt}}' $c)\"; "
        "done; "
        f'for c in {components}; do echo "== $c"; docker logs --tail 12 $c 2>&1 | cut -c1-300; done'
    )
    done = run(
        "vagrant", "ssh", "node-1", "-c", script,
        cwd=machines["project"], env=machines["env"], timeout=300, check=False,
    )  # fmt: skip
    return f"\n--- node-1 ---\n{done.stdout[-16000:]}{done.stderr[-2000:]}"


def kubectl(cluster: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run("kubectl", "--kubeconfig", str(cluster.parent / "kube_config_cluster.yml"), *args, timeout=300)


def test_status_is_green_and_every_machine_is_a_ready_node(cluster: Path):
    # as `up` and `remove`: right after `up`, the controlplane machine's apiserver stalled past a probe's 5 s
    result = rke_py("status", "--config", str(cluster), "--output", "json", "--api-timeout", API_TIMEOUT)
    assert result.returncode == 0, result.stdout + result.stderr
    checks = json.loads(result.stdout)["checks"]
    assert checks and all(check["ok"] for check in checks), [c for c in checks if not c["ok"]]
    nodes = json.loads(kubectl(cluster, "get", "nodes", "-o", "json").stdout)["items"]
    ready = {
        n["metadata"]["name"]: any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
        )
        for n in nodes
    }
    assert ready == {"node-1": True, "node-2": True, "node-3": True}


def test_workers_reach_the_apiserver_through_their_proxy(cluster: Path, machines):
    # node-2 and node-3 have no apiserver: their kubelet talks to 127.0.0.1:6443, nginx-proxy's port.
    for name in ("node-2", "node-3"):
        result = run(
            "vagrant", "ssh", name, "-c", "docker ps --format '{{.Names}}'",
            cwd=machines["project"], env=machines["env"], timeout=300,
        )  # fmt: skip
        running = set(result.stdout.split())
        assert {"nginx-proxy", "kubelet", "kube-proxy"} <= running
        assert "kube-apiserver" not in running


@pytest.mark.real_kubernetes
def test_a_pod_runs_on_a_machine(cluster: Path, lab_images):
    pause = f"{REGISTRY}/{lab_images['pause'].ref}"
    kubectl(cluster, "run", "on-a-vm", f"--image={pause}", "--restart=Never")
    kubectl(cluster, "wait", "pod/on-a-vm", "--for=condition=Ready", "--timeout=240s")
    pod = json.loads(kubectl(cluster, "get", "pod", "on-a-vm", "-o", "json").stdout)
    assert pod["spec"]["nodeName"] in ROLES
    assert pod["status"]["phase"] == "Running"


def test_remove_takes_the_cluster_off_every_machine(cluster: Path, machines):
    """Last: `remove` on the slow machines, as patient as `up` (a Docker that takes longer than one request to
    start a container is asked again), leaves no container of the cluster behind."""
    times = machines["times"]
    assert isinstance(times, dict)
    start = time.monotonic()
    result = rke_py("remove", "--config", str(cluster), "--force", "--api-timeout", API_TIMEOUT)
    times["rke-py remove"] = time.monotonic() - start
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for name in ROLES:
        left = run(
            "vagrant", "ssh", name, "-c", "docker ps -a --format '{{.Names}}'",
            cwd=machines["project"], env=machines["env"], timeout=300,
        )  # fmt: skip
        assert not set(left.stdout.split()) & {
            "etcd",
            "kube-apiserver",
            "kubelet",
            "kube-proxy",
            "nginx-proxy",
        }
