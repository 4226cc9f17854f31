"""Five lab hosts (3 etcd+controlplane, 2 workers): the HA cluster a user builds, changed step by step.

The tests run in file order against one cluster, each starting from the state the previous one left,
as a user's successive `rke-py up` runs would.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from pathlib import Path

import docker
import paramiko
import pytest
from cryptography import x509

from rke_py.plan import nginx_proxy
from rke_py.plan.model import FileSpec
from rke_py.state import read_state
from tests.lab.e2e import (
    changes,
    cluster_args,
    containers_on,
    edit_cluster_yml,
    failed_answers,
    host_exec,
    kubectl,
    kubectl_run,
    own_lab,
    probe_failures,
    rke_py,
    start_probe,
    stop_probe,
    up,
)

pytestmark = pytest.mark.lab

CP = (0, 1, 2)
WORKERS = (3, 4)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "ha", 5) as made:
        edit_cluster_yml(
            made, lambda d: [n.__setitem__("role", ["etcd", "controlplane"]) for n in d["nodes"][:3]]
        )
        yield made


def all_containers(lab) -> list[dict[str, str]]:
    return [containers_on(lab, i) for i in range(len(lab.hosts))]


def test_up_builds_five_ready_nodes_with_both_leaders(lab):
    run = up(lab)
    assert run.code == 0, run.stderr
    doc = run.json()
    assert doc["ok"] is True, doc["verify"]
    nodes = kubectl(lab, "get", "nodes", "--no-headers").splitlines()
    assert len(nodes) == 5 and all(" Ready " in line for line in nodes), nodes
    leases = kubectl(lab, "-n", "kube-system", "get", "leases", "--no-headers")
    assert {line.split()[0] for line in leases.splitlines()} >= {"kube-controller-manager", "kube-scheduler"}
    status = rke_py("status", *cluster_args(lab, "--output", "json"))
    assert status.code == 0, status.stderr
    cp_addresses = {lab.hosts[i].address for i in CP}
    leaders = {x["name"]: x["holder_node"] for x in status.json()["leases"]}
    assert set(leaders) == {"kube-controller-manager", "kube-scheduler"}
    assert set(leaders.values()) <= cp_addresses
    for i in WORKERS:  # every worker reaches an apiserver through its own proxy
        assert "nginx-proxy" in containers_on(lab, i)
    proxies = [c for c in status.json()["checks"] if c["name"] == "nginx-proxy"]
    assert len(proxies) == 2 and all(c["ok"] for c in proxies)


def test_second_up_changes_nothing(lab):
    before = all_containers(lab)
    run = up(lab, "--no-verify")
    assert run.code == 0, run.stderr
    assert run.json()["changed"] == 0
    assert all_containers(lab) == before


def run_pod(lab, name: str, script: str) -> None:
    """A pod running `script` in the lab's rke-tools image on the first worker, Ready."""
    image = f"{lab.registry}/{lab.images['rke-tools']}"
    overrides = json.dumps({"spec": {"nodeName": lab.hosts[WORKERS[0]].name}})
    command = ("--command", "--", "sh", "-c", script)
    kubectl(lab, "run", name, f"--image={image}", "--restart=Never", f"--overrides={overrides}", *command)
    kubectl(lab, "wait", "--for=condition=Ready", f"pod/{name}", "--timeout=50s")


@pytest.mark.real_kubernetes
def test_a_pod_runs_its_logs_and_exec_work_and_its_service_answers_from_another_node(lab):
    serve = (
        "mkdir -p /www && echo hello-from-web > /www/index.html && echo serving && httpd -f -p 8080 -h /www"
    )
    run_pod(lab, "web", serve)
    kubectl(lab, "expose", "pod", "web", "--port=80", "--target-port=8080")
    assert kubectl(lab, "logs", "web").strip() == "serving"
    assert kubectl(lab, "exec", "web", "--", "cat", "/www/index.html").strip() == "hello-from-web"
    cluster_ip = kubectl(lab, "get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}")
    request = f"printf 'GET / HTTP/1.0\\r\\n\\r\\n' | timeout 5 nc {cluster_ip} 80"
    answer = ""
    for _ in range(20):  # kube-proxy on the other node programs the Service within seconds
        answer = host_exec(lab, WORKERS[1], request)
        if "hello-from-web" in answer:
            break
        time.sleep(1)
    assert "hello-from-web" in answer, answer  # the pod keeps running: remove must take it away


def test_an_extra_args_change_replaces_only_that_component(lab):
    before = all_containers(lab)
    edit_cluster_yml(
        lab,
        lambda d: d.setdefault("services", {}).setdefault("scheduler", {}).update({"extra_args": {"v": "3"}}),
    )
    planned = rke_py("plan", *cluster_args(lab, "--output", "json"))
    run = up(lab)
    assert run.code == 0, run.stderr
    expected = {
        h.address: [("replace", "kube-scheduler")] if i in CP else [] for i, h in enumerate(lab.hosts)
    }
    assert changes(run.json()) == expected
    assert changes(planned.json()) == expected  # plan said exactly what up then did
    after = all_containers(lab)
    for i in range(5):
        for name, cid in before[i].items():
            assert (after[i][name] == cid) == (name != "kube-scheduler"), (i, name)


def test_an_apiserver_flag_change_rolls_one_host_at_a_time_and_no_request_through_a_proxy_fails(lab):
    for i in WORKERS:
        start_probe(lab, i)
    time.sleep(1)
    edit_cluster_yml(
        lab, lambda d: d["services"].setdefault("kube-api", {}).update({"extra_args": {"v": "2"}})
    )
    planned = rke_py("plan", *cluster_args(lab, "--output", "json")).json()
    run = up(lab)
    probes = [stop_probe(lab, i) for i in WORKERS]
    assert run.code == 0, run.stderr
    batches = [
        (h["address"], a["reason"])
        for h in planned["hosts"]
        for a in h["actions"]
        if a["target"] == "kube-apiserver"
    ]
    assert batches == [(lab.hosts[i].address, f"spec changed; batch {i + 1} of 3") for i in CP]
    started = [
        host_exec(lab, i, "docker inspect -f '{{.State.StartedAt}}' kube-apiserver").strip() for i in CP
    ]
    assert started == sorted(started)  # one host after the other, in file order
    print(f"requests through the workers' proxies during the rolling change (answered, failed): {probes}")
    for answered, failed in probes:
        assert answered > 20 and not failed, probes


def test_taking_apiservers_out_of_rotation_waits_until_the_proxy_has_reloaded(lab):
    """`nginx -s reload` only signals nginx's master; its old workers take new connections, to the apiservers
    they knew, until it has started new ones (0.3 to 0.9 s on an idle lab, longer on a busy node), and rke-py
    stopped the apiserver one fixed second after the reload. Here the master is held still (SIGSTOP) as the
    reload comes: the rotation does not return before it has resumed and new workers serve."""
    host = docker.from_env().containers.get(lab.hosts[WORKERS[0]].name)
    conf = FileSpec(f"{nginx_proxy.CONF_DIR}/nginx.conf", b"")  # read where it is: on the host already
    master = host_exec(lab, WORKERS[0], "docker inspect -f '{{.State.Pid}}' nginx-proxy").strip()
    workers = [  # the pids of the proxy's serving workers, by their titles
        *("docker", "exec", "nginx-proxy", "sh", "-c"),
        """for p in /proc/[0-9]*; do
          [ "$(tr -d '\\000' < $p/cmdline)" = "nginx: worker process" ] && echo ${p#/proc/}; done""",
    ]
    before = host.exec_run(workers).output.split()
    result: list[tuple[int, float]] = []

    def rotate() -> None:
        code, _ = host.exec_run(["docker", "exec", "nginx-proxy", *nginx_proxy.reload_command(conf)])
        result.append((code, time.monotonic()))

    host_exec(lab, WORKERS[0], f"kill -STOP {master}")
    try:
        reloading = threading.Thread(target=rotate)
        reloading.start()
        time.sleep(3)
        assert not result, "the reload returned while nginx's master was stopped"
    finally:
        resumed = time.monotonic()
        host_exec(lab, WORKERS[0], f"kill -CONT {master}")
    reloading.join(timeout=30)
    assert result and result[0][0] == 0 and result[0][1] > resumed, result
    after = host.exec_run(workers).output.split()
    assert after and not set(after) & set(before), (before, after)


def test_a_node_leaving_the_controlplane_updates_every_proxy_and_nothing_else(lab):
    before = all_containers(lab)
    edit_cluster_yml(lab, lambda d: d["nodes"][2].__setitem__("role", ["etcd", "worker"]))
    run = up(lab)
    assert run.code == 0, run.stderr
    done = changes(run.json())
    for i in WORKERS:
        assert done[lab.hosts[i].address] == [
            ("write-file", "/etc/kubernetes/nginx-proxy/nginx.conf"),
            ("replace", "nginx-proxy"),
        ]
    for i in (0, 1):
        assert done[lab.hosts[i].address] == []
        assert all_containers(lab)[i] == before[i]
    third = done[lab.hosts[2].address]  # the node that changed roles: only its own planes change
    assert {t for k, t in third if k == "remove"} == {
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
    }
    assert ("create", "nginx-proxy") in third
    kept = [lab.hosts[i].address for i in (0, 1)]
    for i in (2, 3, 4):
        conf = host_exec(lab, i, "cat /etc/kubernetes/nginx-proxy/nginx.conf")
        assert [
            line.split()[1].rsplit(":", 1)[0]
            for line in conf.splitlines()
            if line.strip().startswith("server ") and ":6443" in line
        ] == kept
    assert run.json()["ok"] is True


def lease_holder(lab, name: str, via: int = 0) -> str:
    """The lease's holder, asked of lab host `via`'s apiserver (the admin kubeconfig names the first)."""
    server = f"--server=https://{lab.hosts[via].address}:6443"
    out = kubectl(lab, server, "-n", "kube-system", "get", "lease", name, "-o", "json")
    return json.loads(out)["spec"]["holderIdentity"]


def test_losing_the_leader_host_moves_the_lease_and_proxies_keep_working(lab):
    holder = lease_holder(lab, "kube-controller-manager")
    index = next(i for i in (0, 1) if holder.startswith(lab.hosts[i].name + "_"))
    host = docker.from_env().containers.get(lab.hosts[index].name)
    host.stop(timeout=1)
    try:
        stopped = time.monotonic()
        new = holder
        while new == holder and time.monotonic() - stopped < 30:
            time.sleep(1)
            new = lease_holder(lab, "kube-controller-manager", via=1 - index)
        took = time.monotonic() - stopped
        assert new != holder and took <= 25, (new, took)  # lease 15 s, retry 2 s, a poll a second
        print(f"kube-controller-manager lease moved {took:.1f}s after its holder's host stopped")
        status = rke_py("status", *cluster_args(lab, "--output", "json"))
        assert status.code == 6  # a host is down: verification fails, and says which
        doc = status.json()
        assert any(c["name"] == "host" and c["target"] == lab.hosts[index].address for c in doc["checks"])
        survivor = lab.hosts[1 - index].address
        assert {x["name"]: x["holder_node"] for x in doc["leases"]}["kube-controller-manager"] == survivor
        proxies = [c for c in doc["checks"] if c["name"] == "nginx-proxy"]
        assert len(proxies) == 3 and all(c["ok"] for c in proxies), proxies
    finally:
        host.start()
        deadline = time.monotonic() + 60
        while "ok" not in host_exec(lab, index, "docker info >/dev/null 2>&1 && echo ok"):
            assert time.monotonic() < deadline, "the lab host did not come back"
            time.sleep(1)


def _stop_host(lab, index: int):
    host = docker.from_env().containers.get(lab.hosts[index].name)
    host.stop(timeout=1)
    return host


def _start_host(lab, index: int, host) -> None:
    host.start()
    deadline = time.monotonic() + 60
    while "ok" not in host_exec(lab, index, "docker info >/dev/null 2>&1 && echo ok"):
        assert time.monotonic() < deadline, "the lab host did not come back"
        time.sleep(1)


def _proxy_flag(value: str):
    return lambda d: d["services"].setdefault("kubeproxy", {}).update({"extra_args": {"v": value}})


def test_unreachable_workers_within_max_unavailable_are_skipped_and_beyond_it_nothing_changes(lab):
    """10% of three workers rounds down to the minimum, one: one worker may be missing, two may not."""
    stopped = {4: _stop_host(lab, 4)}
    try:
        edit_cluster_yml(lab, _proxy_flag("5"))
        run = up(lab)
        assert run.code == 9, run.stderr
        assert (
            f"worker host(s) {lab.hosts[4].address} skipped because they could not be reached" in run.stderr
        )
        done = changes(run.json())
        assert lab.hosts[4].address not in done
        assert ("replace", "kube-proxy") in done[lab.hosts[3].address]
        stopped[3] = _stop_host(lab, 3)
        before = [containers_on(lab, i) for i in (0, 1, 2)]
        edit_cluster_yml(lab, _proxy_flag("6"))
        run = up(lab)
        assert run.code == 3, run.stderr
        assert "2 worker host(s) cannot be reached, more than" in run.stderr
        assert [containers_on(lab, i) for i in (0, 1, 2)] == before  # nothing changed
    finally:
        for index, host in stopped.items():
            _start_host(lab, index, host)
    run = up(lab)
    assert run.code == 0, run.stderr


def test_a_worker_change_with_drain_cordons_drains_and_uncordons_one_worker_at_a_time(lab):
    image = f"{lab.registry}/{lab.images['rke-tools']}"
    for i in WORKERS:  # a pod on each worker, managed by nothing: drained only with force
        overrides = json.dumps({"spec": {"nodeName": lab.hosts[i].name, "terminationGracePeriodSeconds": 1}})
        kubectl(
            lab,
            "run",
            f"drained-{i}",
            f"--image={image}",
            "--restart=Never",
            f"--overrides={overrides}",
            "--command",
            "--",
            "sleep",
            "3600",
        )

    def change(d):
        d["upgrade_strategy"] = {"drain": True, "node_drain_input": {"force": True, "timeout": 60}}
        _proxy_flag("7")(d)

    edit_cluster_yml(lab, change)
    planned = rke_py("plan", *cluster_args(lab, "--output", "json")).json()
    steps = [(a["kind"], a["target"]) for a in planned["cluster"] if a["phase"] == "worker"]
    names = [lab.hosts[i].name for i in WORKERS]
    run = up(lab)
    assert run.code == 0, run.stderr
    done = [
        (line.split()[3], line.split()[4])
        for line in run.stderr.splitlines()
        if " cluster: " in line and line.split()[3] in ("cordon", "drain", "uncordon")
    ]
    for name in names:  # each worker cordoned, drained, uncordoned, before the next is touched
        expected = [(k, f"node/{name}") for k in ("cordon", "drain", "uncordon")]
        assert [x for x in steps if x[1] == f"node/{name}"] == expected
        assert [x for x in done if x[1] == f"node/{name}"] == expected
    first = [x[1] for x in done]
    assert first.index(f"node/{names[0]}", 2) < first.index(f"node/{names[1]}")
    for i in WORKERS:
        assert "NotFound" in kubectl_run(lab, "get", "pod", f"drained-{i}").stderr
    nodes = json.loads(kubectl(lab, "get", "nodes", "-o", "json"))["items"]
    assert not any(n["spec"].get("unschedulable") for n in nodes)


def test_a_host_refusing_our_key_stops_the_run_before_any_change(lab, tmp_path):
    before = all_containers(lab)
    stranger = tmp_path / "id_other"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(stranger))

    def break_node_5(d):
        d["nodes"][4]["ssh_key_path"] = str(stranger)
        d["services"]["scheduler"]["extra_args"]["v"] = "4"

    edit_cluster_yml(lab, break_node_5)
    run = up(lab)
    assert run.code == 3, run.stderr
    assert f"{lab.hosts[4].address}: ssh: authentication as root failed" in run.stderr
    assert all_containers(lab) == before


def test_a_host_removed_from_cluster_yml_leaves_etcd_and_is_cleaned(lab):
    third = lab.hosts[2]

    def drop_third(d):
        d["nodes"][4].pop("ssh_key_path")  # undo the previous test's broken key and change
        d["services"]["scheduler"]["extra_args"]["v"] = "3"
        del d["nodes"][2]

    edit_cluster_yml(lab, drop_third)
    run = up(lab)
    assert run.code == 0, run.stderr
    done = changes(run.json())
    assert done[third.address] == [("remove-member", third.address), ("clean-host", third.address)]
    assert containers_on(lab, 2) == {}
    assert "No such file" in host_exec(lab, 2, "ls /etc/kubernetes 2>&1")
    members = host_exec(lab, 0, "docker exec etcd etcdctl member list")
    assert len(members.splitlines()) == 2 and third.address not in members, members
    assert third.name not in kubectl(lab, "get", "nodes")
    assert run.json()["ok"] is True


def test_an_etcd_node_added_to_the_running_cluster_joins_it(lab):
    third = lab.hosts[2]

    def add_third_back(d):
        d["nodes"].insert(
            2,
            {
                "address": third.address,
                "hostname_override": third.name,
                "user": "root",
                "role": ["etcd", "worker"],
            },
        )

    edit_cluster_yml(lab, add_third_back)
    planned = rke_py("plan", *cluster_args(lab, "--output", "json"))
    assert ("add-member", third.address) in changes(planned.json())[third.address]
    run = up(lab)
    assert run.code == 0, run.stderr
    done = changes(run.json())[third.address]
    assert done[0] == ("add-member", third.address) and ("create", "etcd") in done
    members = host_exec(lab, 0, "docker exec etcd etcdctl member list")
    assert len(members.splitlines()) == 3 and "started" in members and "unstarted" not in members, members
    etcd_checks = [c for c in run.json()["verify"]["checks"] if c["name"] == "etcd"]
    assert len(etcd_checks) == 3 and all(c["ok"] for c in etcd_checks)
    again = up(lab, "--no-verify")
    assert again.json()["changed"] == 0  # the joined member's spec is stable across runs


def serial(lab, index: int, name: str) -> str:
    """The serial number of /etc/kubernetes/ssl/<name>.pem on lab host `index`."""
    pem = host_exec(lab, index, f"cat /etc/kubernetes/ssl/{name}.pem")
    return format(x509.load_pem_x509_certificate(pem.encode()).serial_number, "x")


def served_serial(lab, index: int, port: int, tmp_path: Path) -> str:
    """The serial number of the certificate lab host `index` serves on `port` (as kube-node, which etcd
    asks for)."""
    state = read_state(Path(lab.cluster_yml).with_suffix(".rkestate"))
    assert state is not None
    node = state.current.certificates["kube-node"]
    (tmp_path / "node.pem").write_text(node.cert_pem)
    (tmp_path / "node-key.pem").write_text(node.key_pem)
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.load_cert_chain(tmp_path / "node.pem", tmp_path / "node-key.pem")
    address = (lab.hosts[index].address, port)
    with socket.create_connection(address, timeout=10) as raw, context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return format(x509.load_der_x509_certificate(der).serial_number, "x")


def kubeconfig(lab) -> Path:
    return Path(lab.cluster_yml).parent / f"kube_config_{Path(lab.cluster_yml).name}"


def ready_nodes(lab, config: Path | None = None) -> list[str]:
    args = ["--kubeconfig", str(config)] if config else []
    lines = kubectl(lab, *args, "get", "nodes", "--no-headers").splitlines()
    return [line.split()[0] for line in lines if line.split()[1] == "Ready"]


@pytest.mark.real_kubernetes
def test_a_token_and_a_pod_from_before_the_certificates_rotate(lab):
    lab.token = kubectl(lab, "-n", "kube-system", "create", "token", "default", "--duration=2h").strip()
    assert token_answers(lab)
    run_pod(lab, "witness", "echo witness > /tmp/w && echo started && sleep 3600")


def token_answers(lab) -> bool:
    """The token authenticates to an apiserver (a 403 for a forbidden list is still a known user)."""
    request = (
        "curl -s -o /dev/null -w '%{http_code}' --cacert /etc/kubernetes/ssl/kube-ca.pem "
        f"-H 'Authorization: Bearer {lab.token}' https://127.0.0.1:6443/api/v1/namespaces/kube-system/pods"
    )
    return host_exec(lab, WORKERS[0], request).strip() in ("200", "403")


def test_cert_rotate_renews_every_certificate_and_no_request_through_a_proxy_fails(lab, tmp_path):
    """etcd takes its new certificate without a restart: no member hands on its leadership, which made a
    read in flight fail with "leader changed" (HTTP 500)."""
    # a drain (on since the drain test) would evict the pod whose survival the real-only test checks
    edit_cluster_yml(lab, lambda d: d["upgrade_strategy"].update(drain=False))
    old_config = tmp_path / "kube_config_before.yml"
    old_config.write_bytes(kubeconfig(lab).read_bytes())
    before = {
        name: serial(lab, 0, name)
        for name in (
            "kube-ca",
            "kube-apiserver",
            "kube-node",
            "kube-etcd-" + lab.hosts[0].address.replace(".", "-"),
        )
    }
    # A request waits up to 5 s for its answer: with the other lab's tests beside this one on two cores, one
    # request in some hundreds now and then had no answer within 2 s (the cause is not known; the output
    # printed below is for finding it); a refused or reset request still fails at once.
    for i in WORKERS:
        start_probe(lab, i, timeout=5)
    time.sleep(1)
    started = time.time()
    run = rke_py("cert", "rotate", *cluster_args(lab, "--output", "json"))
    probes = [probe_failures(lab, i) for i in WORKERS]
    answers = "".join(failed_answers(lab, i) for i in WORKERS)
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True, run.json()["verify"]
    after = {name: serial(lab, 0, name) for name in before}
    assert after["kube-ca"] == before["kube-ca"]
    assert all(after[n] != before[n] for n in before if n != "kube-ca"), (before, after)
    assert serial(lab, WORKERS[0], "kube-node") == after["kube-node"]
    print(f"requests through the workers' proxies during the rotation (answered, failed): {probes}")
    print(f"the rotation started at {started:.1f} (epoch); its output:\n{run.stderr}")
    for answered, failed in probes:
        assert answered > 20 and failed == [], (probes, answers)
    assert ": replace etcd (" not in run.stderr
    assert after["kube-etcd-" + lab.hosts[0].address.replace(".", "-")] == served_serial(
        lab, 0, 2379, tmp_path
    )
    assert len(ready_nodes(lab)) == 5
    assert len(ready_nodes(lab, old_config)) == 5  # the same CA: the old admin certificate still works
    assert up(lab, "--no-verify").json()["changed"] == 0


def test_cert_rotate_a_service_renews_only_its_certificates(lab):
    before = {name: serial(lab, 0, name) for name in ("kube-apiserver", "kube-node", "kube-proxy")}
    run = rke_py("cert", "rotate", "--service", "kube-proxy", *cluster_args(lab, "--output", "json"))
    assert run.code == 0, run.stderr
    after = {name: serial(lab, 0, name) for name in before}
    assert [n for n in before if after[n] != before[n]] == ["kube-proxy"]
    replaced = {
        t
        for h in run.json()["hosts"]
        for k, t in [(a["kind"], a["target"]) for a in h["actions"]]
        if k == "replace"
    }
    assert replaced == {"kube-proxy"}, replaced


def test_cert_rotate_with_a_new_ca_refuses_the_old_kubeconfig_and_the_new_one_works(lab, tmp_path):
    old_config = tmp_path / "kube_config_before.yml"
    old_config.write_bytes(kubeconfig(lab).read_bytes())
    old_ca = serial(lab, 0, "kube-ca")
    run = rke_py("cert", "rotate", "--rotate-ca", *cluster_args(lab, "--output", "json"))
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True, run.json()["verify"]
    assert {serial(lab, i, "kube-ca") for i in range(5)} - {old_ca} == {serial(lab, 0, "kube-ca")}
    refused = kubectl_run(lab, "--kubeconfig", str(old_config), "get", "nodes")
    assert refused.returncode != 0 and "certificate" in refused.stderr, refused.stderr
    assert len(ready_nodes(lab)) == 5
    assert up(lab, "--no-verify").json()["changed"] == 0


def test_cert_list_shows_each_certificate_with_its_expiry_and_each_kubelets_own(lab):
    run = rke_py("cert", "list", *cluster_args(lab, "--output", "json"))
    assert run.code == 0, run.stderr
    found = run.json()["certificates"]
    served = sorted(c["where"] for c in found if c["name"] == "kubelet serving")
    assert served == sorted(h.address for h in lab.hosts)
    apiserver = next(c for c in found if c["name"] == "kube-apiserver")
    assert apiserver["where"] == "cluster.rkestate" and apiserver["days_left"] >= 3648
    assert lab.hosts[0].address in apiserver["sans"]
    assert all(c["days_left"] > 30 for c in found), found


@pytest.mark.real_kubernetes
def test_after_both_rotations_tokens_logs_and_exec_work(lab):
    assert token_answers(lab)  # the service-account key was kept
    assert kubectl(lab, "logs", "witness").strip() == "started"
    assert kubectl(lab, "exec", "witness", "--", "cat", "/tmp/w").strip() == "witness"


def test_remove_leaves_every_host_clean(lab):
    run = rke_py("remove", *cluster_args(lab, "--force"))
    assert run.code == 0, run.stderr
    assert all_containers(lab) == [{}] * 5
    for i in range(5):
        assert "No such file" in host_exec(lab, i, "ls /etc/kubernetes 2>&1")
        # nothing the kubelet left either: pods' containers, their mounts, the CNI bridge
        assert host_exec(lab, i, "docker ps -aq").strip() == ""
        assert host_exec(lab, i, "grep -c /var/lib/kubelet /proc/mounts").strip() == "0"
        assert "cni0" not in host_exec(lab, i, "ip link")
