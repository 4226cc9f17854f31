"""What the plan promises users: the right containers on the right nodes, flags as RKE renders them, and
spec hashes that change exactly when the container would have to be replaced.

Certificates are expensive to make, so each cluster's bundle is built once for the module.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import textwrap
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rke_py import plan as plan_pkg
from rke_py.config import load, load_text
from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.bundle import Bundle, build_bundle
from rke_py.pki.certs import make_ca, make_signed
from rke_py.plan import build_plan, kubelet
from rke_py.plan.model import ClusterPlan, ContainerSpec, NodePlan, spec_json
from rke_py.plan.nginx_proxy import CONF_DIR
from tests.cases import fixture_cases

FIXTURES = Path(__file__).parent.parent / "fixtures" / "plan"
CASES = [p.stem for p in fixture_cases(FIXTURES)]
WORKER_PLANE = {"service-sidekick", "kubelet", "kube-proxy"}
CONTROL_PLANE = {"kube-apiserver", "kube-controller-manager", "kube-scheduler"}
ETCD_PLANE = ["etcd", "etcd-rolling-snapshots"]  # recurring snapshots are on unless turned off


def config_of(name: str) -> ClusterConfig:
    """A fresh copy each call, so a test may change it."""
    return load(FIXTURES / f"{name}.yml").config


@cache
def bundle_of(name: str) -> Bundle:
    return build_bundle(config_of(name))


@cache
def plan_of(name: str) -> ClusterPlan:
    return build_plan(config_of(name), bundle_of(name))


def container(node: NodePlan, name: str) -> ContainerSpec:
    return next(c for c in node.containers if c.name == name)


def hashes(plan: ClusterPlan) -> dict[tuple[str, str], str]:
    return {(n.address, c.name): c.spec_hash() for n in plan.nodes for c in n.containers}


def file_content(node: NodePlan, suffix: str) -> str:
    return next(f.content.decode() for f in node.files if f.path.endswith(suffix))


# --- which containers go where ------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_each_node_runs_exactly_the_containers_its_roles_need(name: str) -> None:
    for node in plan_of(name).nodes:
        expected = set(WORKER_PLANE)
        if "etcd" in node.roles:
            expected |= set(ETCD_PLANE)
        if "controlplane" in node.roles:
            expected |= CONTROL_PLANE
        else:
            expected.add("nginx-proxy")
        assert {c.name for c in node.containers} == expected, node.address


@pytest.mark.parametrize("name", CASES)
def test_planes_hold_their_components_in_start_order(name: str) -> None:
    for node in plan_of(name).nodes:
        assert [c.name for c in node.in_plane("etcd")] == (ETCD_PLANE if "etcd" in node.roles else [])
        # The sidekick is created before the first container that takes volumes from it.
        cp = ["service-sidekick", "kube-apiserver", "kube-controller-manager", "kube-scheduler"]
        assert [c.name for c in node.in_plane("control")] == (cp if "controlplane" in node.roles else [])
        first = [] if "controlplane" in node.roles else ["nginx-proxy", "service-sidekick"]
        assert [c.name for c in node.in_plane("worker")] == [*first, "kubelet", "kube-proxy"]


@pytest.mark.parametrize(
    "settings", [{"snapshot": False}, {"backup_config": {"enabled": False}}], ids=["snapshot", "enabled"]
)
def test_recurring_snapshots_can_be_turned_off(settings: dict) -> None:
    config = config_of("single-node")
    etcd = config.services.etcd
    etcd.snapshot = settings.get("snapshot", True)
    if "backup_config" in settings:
        assert etcd.backup_config is not None
        etcd.backup_config.enabled = False
    node = build_plan(config, bundle_of("single-node")).nodes[0]
    assert [c.name for c in node.in_plane("etcd")] == ["etcd"]


def test_recurring_snapshots_take_rkes_command_and_keep_s3_keys_out_of_it() -> None:
    config = load_text(
        textwrap.dedent(
            """
            nodes: [{address: 10.0.0.1, user: root, role: [etcd, controlplane, worker]}]
            services:
              etcd:
                backup_config:
                  interval_hours: 6
                  retention: 4
                  s3backupconfig:
                    endpoint: minio.example.com:9000
                    bucket_name: snaps
                    access_key: AKIDEXAMPLE
                    secret_key: wJalrXUtnFEMIexample
                    folder: prod
            """
        ),
        "cluster.yml",
    ).config
    spec = container(build_plan(config, build_bundle(config)).nodes[0], "etcd-rolling-snapshots")
    assert spec.command[:3] == ("/opt/rke-tools/rke-etcd-backup", "etcd-backup", "save")
    assert {
        "--creation=6h",
        "--retention=24h",
        "--s3-backup=true",
        "--s3-endpoint=minio.example.com:9000",
    } <= set(spec.command)
    assert {"--s3-bucketName=snaps", "--s3-folder=prod", "--endpoints=10.0.0.1:2379"} <= set(spec.command)
    assert not any("wJalrXUtnFEMIexample" in part or "AKIDEXAMPLE" in part for part in spec.command)
    assert "S3_SECRET_KEY=d0phbHJYVXRuRkVNSWV4YW1wbGU=" in spec.env  # base64, as RKE passes it
    assert "S3_SECRET_KEY=(secret)" in spec.shown_env()


def test_the_older_creation_and_retention_keys_rule_when_there_is_no_backup_config() -> None:
    config = load_text(
        "nodes: [{address: 10.0.0.1, user: root, role: [etcd, controlplane, worker]}]\n"
        "services: {etcd: {creation: 30m, retention: 2h}}\n"
    ).config
    spec = container(build_plan(config, build_bundle(config)).nodes[0], "etcd-rolling-snapshots")
    assert spec.command[-2:] == ("--retention=2h", "--creation=30m")


def test_sidekick_is_created_but_never_started() -> None:
    sidekick = container(plan_of("single-node").nodes[0], "service-sidekick")
    assert (sidekick.start, sidekick.network_mode, sidekick.restart_policy) == (False, "none", "")
    assert sidekick.entrypoint == ("/bin/bash",)


@pytest.mark.parametrize("name", CASES)
def test_every_file_a_container_reads_is_written_on_its_node(name: str) -> None:
    for node in plan_of(name).nodes:
        written = {f.path for f in node.files}
        for spec in node.containers:
            assert set(spec.files) <= written, (node.address, spec.name)


@pytest.mark.parametrize("name", CASES)
def test_no_private_key_reaches_a_container_spec(name: str) -> None:
    for node in plan_of(name).nodes:
        for spec in node.containers:
            text = " ".join((*spec.entrypoint, *spec.command, *spec.env, *spec.binds))
            assert "PRIVATE KEY" not in text


# --- nginx-proxy ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mixed-roles", "split-roles", "prefix-and-extras"])
def test_every_proxy_conf_lists_every_controlplane_address(name: str) -> None:
    config = config_of(name)
    addresses = [n.internal_address for n in config.hosts("controlplane")]
    for node in plan_of(name).nodes:
        if "controlplane" in node.roles:
            assert not any(f.path.endswith("nginx.conf") for f in node.files)
            continue
        conf = file_content(node, f"{CONF_DIR}/nginx.conf")
        servers = [
            line.split()[1]
            for line in conf.splitlines()
            if line.strip().startswith("server ") and ":" in line
        ]
        assert servers == [f"{a}:6443" for a in addresses]
        assert "listen 127.0.0.1:6443;" in conf
        assert f"proxy_next_upstream_tries {len(addresses)};" in conf
        assert container(node, "nginx-proxy").env == (f"CP_HOSTS={','.join(addresses)}",)


def test_proxy_mounts_its_conf_read_only_and_reads_it() -> None:
    node = plan_of("prefix-and-extras").node("172.16.0.2")
    proxy = container(node, "nginx-proxy")
    assert proxy.binds == ("/opt/rke/etc/kubernetes/nginx-proxy:/etc/nginx/rke-py:ro",)
    assert proxy.entrypoint == ("nginx", "-c", "/etc/nginx/rke-py/nginx.conf", "-g", "daemon off;")
    assert proxy.files == ("/opt/rke/etc/kubernetes/nginx-proxy/nginx.conf",)
    conf = next(f for f in node.files if f.path == proxy.files[0])
    assert conf.mode == 0o644 and not conf.secret


def test_proxy_conf_brackets_ipv6_apiservers() -> None:
    text = """
nodes:
  - {address: "fd00::1", hostname_override: cp-1, user: rke, role: [controlplane, etcd]}
  - {address: 10.0.0.2, user: rke, role: [worker]}
"""
    config = load_text(text).config
    node = build_plan(config, build_bundle(config)).node("10.0.0.2")
    assert "server [fd00::1]:6443 max_fails=1 fail_timeout=2s;" in file_content(node, "nginx.conf")


def test_removing_a_controlplane_node_replaces_only_the_proxies() -> None:
    before_config = config_of("split-roles")
    before = plan_of("split-roles")
    after_config = config_of("split-roles")
    after_config.nodes = [n for n in after_config.nodes if n.name != "cp-2"]
    after = build_plan(after_config, build_bundle(after_config, previous=bundle_of("split-roles")))
    old, new = hashes(before), hashes(after)
    changed = {key for key in new if new[key] != old[key]}
    non_cp = {n.address for n in before_config.nodes if not n.has("controlplane")}
    assert changed == {(address, "nginx-proxy") for address in non_cp}


def test_adding_a_worker_changes_no_existing_container() -> None:
    after_config = config_of("split-roles")
    after_config.nodes.append(Node(address="10.1.0.33", internal_address="10.1.0.33", role=["worker"]))
    after_config.nodes[-1].hostname_override = "worker-3"
    after = build_plan(after_config, build_bundle(after_config, previous=bundle_of("split-roles")))
    old, new = hashes(plan_of("split-roles")), hashes(after)
    assert all(new[key] == old[key] for key in old)
    assert {c.name for c in after.node("10.1.0.33").containers} == {"nginx-proxy", *WORKER_PLANE}


# --- hashes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_hashes_are_stable_across_builds_with_the_same_certificates(name: str) -> None:
    again = build_plan(config_of(name), bundle_of(name))
    assert hashes(again) == hashes(plan_of(name))
    assert [[f.sha256 for f in n.files] for n in again.nodes] == [
        [f.sha256 for f in n.files] for n in plan_of(name).nodes
    ]


@pytest.mark.parametrize("name", CASES)
def test_what_alike_nodes_share_is_what_each_would_get_alone(name: str, monkeypatch) -> None:
    """A plan works out once what many nodes have alike (plan.memo); without that, every node's files,
    containers, health checks and digests come out the same."""
    shared = build_plan(config_of(name), bundle_of(name))
    monkeypatch.setattr(plan_pkg, "planning", contextlib.nullcontext)  # every value made for each node
    assert build_plan(config_of(name), bundle_of(name)).nodes == shared.nodes


SERVICES = [
    ("etcd", "etcd", "log-level", "debug"),
    ("kube_api", "kube-apiserver", "v", "4"),
    ("kube_controller", "kube-controller-manager", "v", "4"),
    ("scheduler", "kube-scheduler", "v", "4"),
    ("kubelet", "kubelet", "max-pods", "200"),
    ("kubeproxy", "kube-proxy", "v", "4"),
]


@pytest.mark.parametrize(("service", "component", "flag", "value"), SERVICES)
def test_one_services_extra_args_change_only_that_component(
    service: str, component: str, flag: str, value: str
) -> None:
    config = config_of("mixed-roles")
    getattr(config.services, service).extra_args[flag] = value
    changed_plan = build_plan(config, bundle_of("mixed-roles"))
    old, new = hashes(plan_of("mixed-roles")), hashes(changed_plan)
    changed = {key for key in new if new[key] != old[key]}
    assert changed == {key for key in old if key[1] == component}
    assert changed, "the component runs somewhere"
    spec = container(changed_plan.nodes[0], component)
    assert f"--{flag}={value}" in (*spec.entrypoint, *spec.command)


def test_a_renewed_certificate_replaces_only_the_containers_that_read_it() -> None:
    bundle = dict(bundle_of("mixed-roles"))
    bundle["kube-proxy"] = make_signed("kube-proxy", bundle["kube-ca"], "system:kube-proxy")
    renewed = build_plan(config_of("mixed-roles"), bundle)
    old, new = hashes(plan_of("mixed-roles")), hashes(renewed)
    assert {key for key in new if new[key] != old[key]} == {key for key in old if key[1] == "kube-proxy"}


def test_the_health_check_does_not_enter_the_hash() -> None:
    spec = container(plan_of("single-node").nodes[0], "etcd")
    assert spec.health is not None
    assert dataclasses.replace(spec, health=None).spec_hash() == spec.spec_hash()


# --- flags, binds, env ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        (["worker"], ""),
        (["etcd", "controlplane", "worker"], ""),
        (["controlplane"], "node-role.kubernetes.io/controlplane=true:NoSchedule"),
        (["etcd"], ""),
        (["etcd", "controlplane"], "node-role.kubernetes.io/controlplane=true:NoSchedule"),
    ],
)
def test_controlplane_nodes_without_the_worker_role_register_with_rkes_taint(
    roles: list[str], expected: str
) -> None:
    """RKE's BuildKubeletProcess: the controlplane taint alone; the etcd taint is set with the labels."""
    assert kubelet.taints(Node(address="10.0.0.1", role=roles)) == expected


@pytest.mark.parametrize("name", CASES)
def test_kubelet_taint_flag_follows_the_roles(name: str) -> None:
    for node in plan_of(name).nodes:
        flags = [a for a in container(node, "kubelet").entrypoint if a.startswith("--register-with-taints=")]
        registers = "controlplane" in node.roles and "worker" not in node.roles
        assert flags == (
            ["--register-with-taints=node-role.kubernetes.io/controlplane=true:NoSchedule"]
            if registers
            else []
        )


def test_kubelet_has_no_node_labels_flag() -> None:
    """RKE sets role labels through the API, not with --node-labels."""
    for node in plan_of("split-roles").nodes:
        assert not any(a.startswith("--node-labels") for a in container(node, "kubelet").entrypoint)


@pytest.mark.parametrize("name", ["mixed-roles", "split-roles"])
def test_etcd_initial_cluster_lists_every_member_in_file_order(name: str) -> None:
    config = config_of(name)
    expected = ",".join(f"etcd-{n.name}=https://{n.internal_address}:2380" for n in config.hosts("etcd"))
    for node in plan_of(name).nodes:
        if "etcd" in node.roles:
            command = container(node, "etcd").command
            assert f"--initial-cluster={expected}" in command
            assert "--initial-cluster-state=new" in command


def test_etcd_listens_on_its_internal_address_behind_nat() -> None:
    nat = container(plan_of("mixed-roles").node("203.0.113.2"), "etcd")
    assert "--listen-client-urls=https://10.0.0.2:2379" in nat.command
    assert "--listen-peer-urls=https://10.0.0.2:2380" in nat.command
    assert "ETCDCTL_ENDPOINTS=https://10.0.0.2:2379" in nat.env
    direct = container(plan_of("mixed-roles").node("10.0.0.1"), "etcd")
    assert "--listen-client-urls=https://0.0.0.0:2379" in direct.command
    assert "ETCDCTL_ENDPOINTS=https://127.0.0.1:2379" in direct.env


def test_apiserver_lists_its_own_etcd_member_first() -> None:
    plan = plan_of("mixed-roles")
    apiserver = container(plan.node("10.0.0.1"), "kube-apiserver")
    expected = "--etcd-servers=https://10.0.0.1:2379,https://10.0.0.2:2379,https://10.0.0.3:2379"
    assert expected in apiserver.entrypoint


def test_extra_binds_and_env_are_appended_after_the_builtin_ones() -> None:
    node = plan_of("prefix-and-extras").node("172.16.0.1")
    kubelet_spec = container(node, "kubelet")
    assert kubelet_spec.binds[-1] == "/srv/data:/srv/data:z"  # the user's binds are passed as written
    assert not any(b.endswith(":z") or ",z" in b for b in kubelet_spec.binds[:-1])
    assert container(node, "kube-apiserver").binds[-1] == "/srv/webhook:/etc/webhook:ro"
    assert container(node, "etcd").env[-1] == "ETCD_LOG_LEVEL=debug"
    assert container(node, "kube-scheduler").env == ("SCHED_DEBUG=1",)


def test_extra_args_override_the_default_value_once() -> None:
    node = plan_of("prefix-and-extras").node("172.16.0.1")
    apiserver = container(node, "kube-apiserver").entrypoint
    assert "--profiling=true" in apiserver and "--profiling=false" not in apiserver
    etcd = [a for a in container(node, "etcd").command if a.startswith("--election-timeout=")]
    assert etcd == ["--election-timeout=6000"]
    assert "--node-monitor-grace-period=20s" in container(node, "kube-controller-manager").entrypoint
    assert "--proxy-mode=ipvs" in container(node, "kube-proxy").entrypoint


def test_extra_args_array_values_follow_the_sorted_flags_one_each() -> None:
    apiserver = container(plan_of("prefix-and-extras").node("172.16.0.1"), "kube-apiserver").entrypoint
    assert apiserver[-2:] == (
        "--tls-sni-cert-key=/etc/webhook/a.pem,/etc/webhook/a-key.pem",
        "--tls-sni-cert-key=/etc/webhook/b.pem,/etc/webhook/b-key.pem",
    )
    names = [flag.split("=")[0] for flag in apiserver[2:-2]]
    assert names == sorted(names)


def test_oidc_discovery_is_asked_for_as_with_rke_a_url_issuer_first_and_rke_kept() -> None:
    config = config_of("single-node")
    api = config.services.kube_api
    api.extra_args = {"service-account-issuer": "https://kubernetes.default.svc.cluster.local"}
    api.extra_args_array = {"service-account-issuer": ["rke"]}
    entrypoint = container(build_plan(config, bundle_of("single-node")).nodes[0], "kube-apiserver").entrypoint
    assert [a for a in entrypoint if a.startswith("--service-account-issuer=")] == [
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        "--service-account-issuer=rke",
    ]


def test_prefix_path_moves_host_paths_not_container_paths() -> None:
    node = plan_of("prefix-and-extras").node("172.16.0.1")
    assert all(f.path.startswith("/opt/rke/etc/kubernetes/") for f in node.files)
    etcd = container(node, "etcd")
    assert etcd.binds[:2] == (
        "/opt/rke/var/lib/etcd:/var/lib/rancher/etcd/",
        "/opt/rke/etc/kubernetes:/etc/kubernetes",
    )
    assert "--trusted-ca-file=/etc/kubernetes/ssl/kube-ca.pem" in etcd.command
    kubelet_spec = container(node, "kubelet")
    assert "--root-dir=/opt/rke/var/lib/kubelet" in kubelet_spec.entrypoint
    assert "/var/lib/kubelet/volumeplugins:/var/lib/kubelet/volumeplugins:shared" in kubelet_spec.binds


# --- kube-apiserver's own files -------------------------------------------------------------------------


def test_apiserver_checksums_match_the_files_it_reads() -> None:
    node = plan_of("single-node").nodes[0]
    env = dict(e.split("=", 1) for e in container(node, "kube-apiserver").env)
    for var, suffix in (
        ("RKE_ADMISSION_CONFIG_CHECKSUM", "admission.yaml"),
        ("RKE_AUDITLOG_CONFIG_CHECKSUM", "audit-policy.yaml"),
    ):
        content = next(f.content for f in node.files if f.path.endswith(suffix))
        # RKE's sum is over the document, the file holds it with the newline its file-deployer's echo adds
        assert content.endswith(b"\n\n")
        assert env[var] == hashlib.md5(content[:-1], usedforsecurity=False).hexdigest()


def test_own_admission_config_file_and_disabled_audit_log_leave_no_files() -> None:
    text = """
nodes:
  - {address: 10.0.0.1, user: rke, role: [controlplane, etcd, worker]}
services:
  kube-api:
    audit_log: {enabled: false}
    extra_args: {admission-control-config-file: /etc/kubernetes/mine.yaml}
"""
    config = load_text(text).config
    node = build_plan(config, build_bundle(config, previous=bundle_of("single-node"))).nodes[0]
    apiserver = container(node, "kube-apiserver")
    assert not any(f.path.endswith(("admission.yaml", "audit-policy.yaml")) for f in node.files)
    assert not any(a.startswith("--audit-") for a in apiserver.entrypoint)
    assert "--admission-control-config-file=/etc/kubernetes/mine.yaml" in apiserver.entrypoint
    assert apiserver.env == ()
    assert apiserver.binds == ("/etc/kubernetes:/etc/kubernetes",)


def test_generated_kubelet_serving_certificates_are_used() -> None:
    text = (
        FIXTURES / "mixed-roles.yml"
    ).read_text() + "services:\n  kubelet: {generate_serving_certificate: true}\n"
    config = load_text(text).config
    plan = build_plan(config, build_bundle(config, previous=bundle_of("mixed-roles")))
    spec = container(plan.node("203.0.113.2"), "kubelet")
    assert "--tls-cert-file=/etc/kubernetes/ssl/kube-kubelet-10-0-0-2.pem" in spec.entrypoint
    assert "/etc/kubernetes/ssl/kube-kubelet-10-0-0-2-key.pem" in spec.files
    apiserver = container(plan.node("10.0.0.1"), "kube-apiserver")
    assert "--kubelet-certificate-authority=/etc/kubernetes/ssl/kube-ca.pem" in apiserver.entrypoint


# --- the reference flags (rke.md §4.2, k8s 1.24-1.31) --------------------------------------------------

SSL = "/etc/kubernetes/ssl"
CIPHERS = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,"
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305"
)
APISERVER_CP1 = [
    "--admission-control-config-file=/etc/kubernetes/admission.yaml",
    "--advertise-address=10.1.0.21",
    "--allow-privileged=true",
    "--anonymous-auth=false",
    "--api-audiences=unknown",
    "--audit-log-format=json",
    "--audit-log-maxage=30",
    "--audit-log-maxbackup=10",
    "--audit-log-maxsize=100",
    "--audit-log-path=/var/log/kube-audit/audit-log.json",
    "--audit-policy-file=/etc/kubernetes/audit-policy.yaml",
    "--authorization-mode=Node,RBAC",
    "--bind-address=0.0.0.0",
    f"--client-ca-file={SSL}/kube-ca.pem",
    "--cloud-provider=",
    "--enable-admission-plugins=NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,"
    "DefaultTolerationSeconds,MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota,"
    "NodeRestriction,Priority,TaintNodesByCondition,PersistentVolumeClaimResize",
    f"--etcd-cafile={SSL}/kube-ca.pem",
    f"--etcd-certfile={SSL}/kube-node.pem",
    f"--etcd-keyfile={SSL}/kube-node-key.pem",
    "--etcd-prefix=/registry",
    "--etcd-servers=https://10.1.0.11:2379,https://10.1.0.12:2379,https://10.1.0.13:2379",
    f"--kubelet-client-certificate={SSL}/kube-apiserver.pem",
    f"--kubelet-client-key={SSL}/kube-apiserver-key.pem",
    "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
    "--profiling=false",
    f"--proxy-client-cert-file={SSL}/kube-apiserver-proxy-client.pem",
    f"--proxy-client-key-file={SSL}/kube-apiserver-proxy-client-key.pem",
    "--requestheader-allowed-names=kube-apiserver-proxy-client",
    f"--requestheader-client-ca-file={SSL}/kube-apiserver-requestheader-ca.pem",
    "--requestheader-extra-headers-prefix=X-Remote-Extra-",
    "--requestheader-group-headers=X-Remote-Group",
    "--requestheader-username-headers=X-Remote-User",
    "--runtime-config=authorization.k8s.io/v1beta1=true",
    "--secure-port=6443",
    "--service-account-issuer=rke",
    f"--service-account-key-file={SSL}/kube-service-account-token-key.pem",
    "--service-account-lookup=true",
    f"--service-account-signing-key-file={SSL}/kube-service-account-token-key.pem",
    "--service-cluster-ip-range=10.43.0.0/16",
    "--service-node-port-range=30000-32767",
    "--storage-backend=etcd3",
    f"--tls-cert-file={SSL}/kube-apiserver.pem",
    f"--tls-cipher-suites={CIPHERS}",
    f"--tls-private-key-file={SSL}/kube-apiserver-key.pem",
]
KCM = [
    "--allocate-node-cidrs=true",
    "--allow-untagged-cloud=true",
    f"--authentication-kubeconfig={SSL}/kubecfg-kube-controller-manager.yaml",
    f"--authorization-kubeconfig={SSL}/kubecfg-kube-controller-manager.yaml",
    "--cloud-provider=",
    "--cluster-cidr=10.42.0.0/16",
    "--configure-cloud-routes=false",
    "--enable-hostpath-provisioner=false",
    f"--kubeconfig={SSL}/kubecfg-kube-controller-manager.yaml",
    "--leader-elect=true",
    "--node-monitor-grace-period=40s",
    "--profiling=false",
    f"--root-ca-file={SSL}/kube-ca.pem",
    f"--service-account-private-key-file={SSL}/kube-service-account-token-key.pem",
    "--service-cluster-ip-range=10.43.0.0/16",
    "--terminated-pod-gc-threshold=1000",
    "--v=2",
]
SCHEDULER = [
    f"--authentication-kubeconfig={SSL}/kubecfg-kube-scheduler.yaml",
    f"--authorization-kubeconfig={SSL}/kubecfg-kube-scheduler.yaml",
    f"--kubeconfig={SSL}/kubecfg-kube-scheduler.yaml",
    "--leader-elect=true",
    "--profiling=false",
    "--v=2",
]
KUBELET_WORKER1 = [
    "--address=0.0.0.0",
    "--anonymous-auth=false",
    "--authentication-token-webhook=true",
    "--authorization-mode=Webhook",
    "--cgroups-per-qos=True",
    f"--client-ca-file={SSL}/kube-ca.pem",
    "--cloud-provider=",
    "--cluster-dns=10.43.0.10",
    "--cluster-domain=cluster.local",
    "--container-runtime-endpoint=unix:///var/run/cri-dockerd.sock",
    "--event-qps=0",
    "--fail-swap-on=false",
    "--hostname-override=worker-1",
    f"--kubeconfig={SSL}/kubecfg-kube-node.yaml",
    "--make-iptables-util-chains=true",
    "--pod-infra-container-image=rancher/mirrored-pause:3.7",
    "--read-only-port=0",
    "--resolv-conf=/etc/resolv.conf",
    "--root-dir=/var/lib/kubelet",
    "--streaming-connection-idle-timeout=30m",
    f"--tls-cipher-suites={CIPHERS}",
    "--v=2",
    "--volume-plugin-dir=/var/lib/kubelet/volumeplugins",
]
KUBE_PROXY_WORKER1 = [
    "--cluster-cidr=10.42.0.0/16",
    "--healthz-bind-address=127.0.0.1",
    "--hostname-override=worker-1",
    f"--kubeconfig={SSL}/kubecfg-kube-proxy.yaml",
    "--v=2",
]


@pytest.mark.parametrize(
    ("address", "component", "flags"),
    [
        ("10.1.0.21", "kube-apiserver", APISERVER_CP1),
        ("10.1.0.21", "kube-controller-manager", KCM),
        ("10.1.0.21", "kube-scheduler", SCHEDULER),
        ("10.1.0.31", "kubelet", KUBELET_WORKER1),
        ("10.1.0.31", "kube-proxy", KUBE_PROXY_WORKER1),
    ],
)
def test_flags_match_the_rke_reference(address: str, component: str, flags: list[str]) -> None:
    spec = container(plan_of("split-roles").node(address), component)
    assert spec.entrypoint == ("/opt/rke-tools/entrypoint.sh", component, *flags)
    assert spec.image == "rancher/hyperkube:v1.30.4-rancher1"
    assert spec.volumes_from == ("service-sidekick",)
    assert (spec.network_mode, spec.restart_policy) == ("host", "always")
    expected_command = (
        ("--use-service-account-credentials=true",) if component == "kube-controller-manager" else ()
    )
    assert spec.command == expected_command
    assert (spec.privileged, spec.pid_mode) == (
        (True, "host") if component in ("kubelet", "kube-proxy") else (False, "")
    )


def test_external_etcd_is_reached_with_its_own_client_certificate() -> None:
    ca = make_ca("external-etcd-ca")
    client = make_signed("external-etcd-client", ca, "etcd-client")
    text = f"""
nodes:
  - {{address: 10.0.0.1, user: rke, role: [controlplane, worker]}}
services:
  etcd:
    external_urls: [https://10.9.0.1:2379, https://10.9.0.2:2379]
    path: /mycluster
    ca_cert: {block(ca.cert_pem)}
    cert: {block(client.cert_pem)}
    key: {block(client.key_pem)}
"""
    config = load_text(text).config
    node = build_plan(config, build_bundle(config, previous=bundle_of("single-node"))).nodes[0]
    apiserver = container(node, "kube-apiserver")
    assert {
        "--etcd-servers=https://10.9.0.1:2379,https://10.9.0.2:2379",
        "--etcd-prefix=/mycluster",
        f"--etcd-cafile={SSL}/kube-etcd-client-ca.pem",
        f"--etcd-certfile={SSL}/kube-etcd-client.pem",
        f"--etcd-keyfile={SSL}/kube-etcd-client-key.pem",
    } <= set(apiserver.entrypoint)
    assert f"{SSL}/kube-etcd-client-key.pem" in apiserver.files
    assert "etcd" not in {c.name for c in node.containers}


def block(pem: str) -> str:
    """A YAML block scalar holding `pem`, indented for a key at depth two."""
    return "|\n" + textwrap.indent(pem, "      ")


def test_a_new_sidekick_replaces_the_containers_that_take_its_volume() -> None:
    """Their /opt/rke-tools (entrypoint, cri-dockerd) is the sidekick's volume, read when they are created."""
    config = config_of("single-node")
    before = build_plan(config, bundle_of("single-node")).nodes[0]
    config.system_images.kubernetes_services_sidecar += "-new"
    after = build_plan(config, bundle_of("single-node")).nodes[0]
    changed = {c.name for c in after.containers if c.spec_hash() != container(before, c.name).spec_hash()}
    users = {c.name for c in after.containers if "service-sidekick" in c.volumes_from}
    assert users and changed == {"service-sidekick", *users}


# what a ContainerSpec's hashed fields hold: strings, tuples of strings, booleans (and None, integers)
_VALUES = st.none() | st.booleans() | st.integers() | st.text() | st.lists(st.text(), max_size=6).map(tuple)


@given(st.dictionaries(st.text(), _VALUES, max_size=6))
def test_spec_hashes_are_taken_over_the_bytes_every_running_containers_label_was_made_from(values):
    """A faster encoder must not change one hash: each would replace a container on every host."""
    assert spec_json(values) == json.dumps(values, sort_keys=True, separators=(",", ":")).encode()
