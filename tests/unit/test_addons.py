"""Add-on templates: cluster.yml in, Kubernetes objects out.

Each fixture in tests/fixtures/addons/ has a `.objects` sibling listing, per add-on, the objects rke-py
builds for it in apply order; the tests below check the values cluster.yml's options put into them.
"""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from rke_py.addons import ADDON_LABEL, build
from rke_py.addons.k8s import object_ref
from rke_py.config import load, load_text
from rke_py.errors import ConfigError
from rke_py.plan.kubelet import flags
from tests.cases import fixture_cases

FIXTURES = Path(__file__).parents[1] / "fixtures" / "addons"
CASES = fixture_cases(FIXTURES)


def objects_of(path: Path) -> dict[str, list[dict[str, Any]]]:
    return {addon.name: addon.objects for addon in build(load(path).config, path.parent)}


def find(objects: dict[str, list[dict[str, Any]]], ref: str) -> dict[str, Any]:
    return next(o for items in objects.values() for o in items if object_ref(o) == ref)


def listing(objects: dict[str, list[dict[str, Any]]]) -> list[str]:
    return [f"{name}: {object_ref(o)}" for name, items in objects.items() for o in items]


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_each_fixture_builds_the_listed_objects_in_order_all_labelled(case: Path):
    objects = objects_of(case)
    assert listing(objects) == case.with_suffix(".objects").read_text().splitlines()
    for name, items in objects.items():
        assert all(o["metadata"]["labels"][ADDON_LABEL] == name for o in items)


def test_canal_carries_the_pod_network_backend_and_interface():
    objects = objects_of(FIXTURES / "defaults.yml")
    config_map = find(objects, "configmap/kube-system/canal-config")
    assert json.loads(config_map["data"]["net-conf.json"]) == {
        "Network": "10.42.0.0/16",
        "Backend": {"Type": "vxlan"},
    }
    assert config_map["data"]["veth_mtu"] == "1450"  # RKE's, when network.mtu is not set
    pod = find(objects, "daemonset/kube-system/canal")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["calico-node", "kube-flannel"]
    assert pod["hostNetwork"] is True and pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert {"operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    # the node controller of calico-kube-controllers frees what calico kept for deleted nodes
    controllers = find(objects, "deployment/kube-system/calico-kube-controllers")["spec"]["template"]["spec"]
    assert controllers["containers"][0]["env"][0] == {"name": "ENABLED_CONTROLLERS", "value": "node"}


def test_flannel_options_and_kube_dns_upstreams():
    objects = objects_of(FIXTURES / "flannel_kube_dns.yml")
    flannel = find(objects, "daemonset/kube-system/kube-flannel")["spec"]["template"]["spec"]["containers"][1]
    assert "--iface=eth1" in flannel["args"]
    net_conf = json.loads(find(objects, "configmap/kube-system/kube-flannel-cfg")["data"]["net-conf.json"])
    assert net_conf["Backend"]["Type"] == "host-gw"
    data = find(objects, "configmap/kube-system/kube-dns")["data"]
    assert json.loads(data["upstreamNameservers"]) == ["10.0.0.2"]
    assert json.loads(data["stubDomains"]) == {"corp.example.com": ["10.0.0.3"]}
    assert find(objects, "service/kube-system/kube-dns")["spec"]["clusterIP"] == "10.43.0.10"


def test_calico_scheduling_options_as_rke_applies_them():
    objects = objects_of(FIXTURES / "calico_everything.yml")
    daemonset = find(objects, "daemonset/kube-system/calico-node")
    pod = daemonset["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "pool": "net"}
    # calico-node tolerates every taint; network.tolerations go to calico-kube-controllers
    assert {"effect": "NoExecute", "operator": "Exists"} in pod["tolerations"]
    controllers = find(objects, "deployment/kube-system/calico-kube-controllers")["spec"]["template"]["spec"]
    assert controllers["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "net", "effect": "NoSchedule"}
    ]
    assert daemonset["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 2},
    }
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["CALICO_IPV4POOL_CIDR"] == "10.42.0.0/16"
    assert find(objects, "configmap/kube-system/calico-config")["data"]["veth_mtu"] == "1400"


def test_coredns_nodelocal_and_autoscaler_follow_dns_settings():
    path = FIXTURES / "calico_everything.yml"
    objects = objects_of(path)
    corefile = find(objects, "configmap/kube-system/coredns")["data"]["Corefile"]
    assert "kubernetes cluster.local 10.0.0.0/8 {" in corefile  # RKE's: the given reverse zones only
    assert 'forward . "/etc/resolv.conf"' in corefile
    autoscaler = find(objects, "deployment/kube-system/coredns-autoscaler")["spec"]["template"]["spec"]
    params = next(a for a in autoscaler["containers"][0]["command"] if a.startswith("--default-params="))
    assert json.loads(params.split("=", 1)[1]) == {
        "linear": {
            "coresPerReplica": 64,
            "nodesPerReplica": 2,
            "min": 2,
            "max": 5,
        }  # RKE's defaults apply only when linear_autoscaler_params is absent
    }
    assert (
        "replicas" not in find(objects, "deployment/kube-system/coredns")["spec"]
    )  # the autoscaler's to set
    cache = find(objects, "daemonset/kube-system/node-local-dns")["spec"]["template"]["spec"]["containers"][0]
    assert cache["args"][:2] == ["-localip", "169.254.20.10,10.43.0.10"]  # and the cluster DNS address
    config = load(path).config
    assert flags(config, config.nodes[0])["cluster-dns"] == "169.254.20.10"  # pods ask the node-local cache


def test_ingress_and_metrics_server_options():
    objects = objects_of(FIXTURES / "calico_everything.yml")
    controller = find(objects, "daemonset/ingress-nginx/nginx-ingress-controller")["spec"]["template"]["spec"]
    assert controller["hostNetwork"] is True and controller["dnsPolicy"] == "ClusterFirstWithHostNet"
    args = controller["containers"][0]["args"]
    assert {"--http-port=8080", "--https-port=8443", "--enable-ssl-passthrough=true"} <= set(args)
    assert "--default-backend-service=$(POD_NAMESPACE)/default-http-backend" in args
    # default_ingress_class: false: no default-class annotation, and the leader lease RKE names for it
    assert "annotations" not in find(objects, "ingressclass/nginx")["metadata"]
    assert "--election-id=ingress-controller-leader" in args
    leases = find(objects, "role/ingress-nginx/ingress-nginx")["rules"][6]
    assert leases["resourceNames"] == ["ingress-controller-leader"]
    assert find(objects, "configmap/ingress-nginx/ingress-nginx-controller")["data"] == {
        "proxy-body-size": "8m"
    }
    metrics = find(objects, "deployment/kube-system/metrics-server")
    assert metrics["spec"]["replicas"] == 2
    assert "--v=2" in metrics["spec"]["template"]["spec"]["containers"][0]["args"]


def test_host_port_ingress_by_default_with_its_admission_webhook():
    objects = objects_of(FIXTURES / "defaults.yml")
    pod = find(objects, "daemonset/ingress-nginx/nginx-ingress-controller")["spec"]["template"]["spec"]
    ports = pod["containers"][0]["ports"]
    assert [(p["name"], p["containerPort"], p.get("hostPort")) for p in ports] == [
        ("http", 80, 80),
        ("https", 443, 443),
        ("webhook", 8443, None),
    ]
    # the webhook serves the certificate the create Job writes into this Secret
    assert pod["volumes"][0] == {"name": "webhook-cert", "secret": {"secretName": "ingress-nginx-admission"}}
    create = find(objects, "job/ingress-nginx/ingress-nginx-admission-create")["spec"]["template"]["spec"]
    assert "--secret-name=ingress-nginx-admission" in create["containers"][0]["args"]
    webhook = find(objects, "validatingwebhookconfiguration/ingress-nginx-admission")["webhooks"][0]
    assert webhook["clientConfig"]["service"]["name"] == "ingress-nginx-controller-admission"


BASE = "nodes:\n  - {address: 192.0.2.11, user: ubuntu, role: [etcd, controlplane, worker]}\n"


def test_inline_and_included_user_add_ons_with_their_lines(tmp_path: Path):
    (tmp_path / "extra.yml").write_text(
        "apiVersion: v1\nkind: List\nitems:\n  - {apiVersion: v1, kind: Namespace, metadata: {name: team}}\n"
    )
    inline = "addons: |-\n  apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n"
    text = BASE + inline + "addons_include: [extra.yml]\n"
    config = load_text(text).config
    addons = {a.name: a.objects for a in build(config, tmp_path)}
    assert [object_ref(o) for o in addons["rke-user-addon"]] == ["configmap/a"]
    assert [object_ref(o) for o in addons["rke-user-includes-addons"]] == ["namespace/team"]
    with pytest.raises(ConfigError) as bad:
        load_text(
            BASE + "addons: |-\n  apiVersion: v1\n  kind: ConfigMap\n  ---\n  kind: Secret\n  metadata: {}\n"
        )
    assert [str(p) for p in bad.value.problems] == [
        "cluster.yml:4:1: ConfigMap has no valid metadata.name — each document must be one Kubernetes object",
        "cluster.yml:7:1: an add-on object has no apiVersion — each document must be one Kubernetes object",
    ]


def test_an_include_that_cannot_be_read_or_fetched_says_which(tmp_path: Path):
    config = load_text(BASE + "addons_include: [missing.yml, 'http://127.0.0.1:9/none.yml']\n").config
    with pytest.raises(ConfigError) as err:
        build(config, tmp_path)
    messages = [str(p) for p in err.value.problems]
    assert messages[0].startswith(f"{tmp_path}/missing.yml: cannot read the add-on file: No such file")
    assert messages[1].startswith("http://127.0.0.1:9/none.yml: cannot fetch the add-on:")


def test_an_include_by_url_is_fetched(tmp_path: Path):
    (tmp_path / "served.yml").write_text(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: bot, namespace: x}\n"
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(tmp_path), **kwargs)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/served.yml"
        config = load_text(BASE + f"addons_include: ['{url}']\n").config
        addons = {a.name: a.objects for a in build(config, tmp_path)}
    finally:
        server.shutdown()
    assert [object_ref(o) for o in addons["rke-user-includes-addons"]] == ["serviceaccount/x/bot"]


def test_the_dns_provider_not_in_use_keeps_an_empty_add_on_so_what_it_left_is_removed():
    for provider, other in (("kube-dns", "rke-coredns-addon"), ("coredns", "rke-kube-dns-addon")):
        config = load_text(f"{BASE}dns: {{provider: {provider}}}\n").config
        addons = {a.name: a.objects for a in build(config)}
        assert addons[other] == []
        assert any(o["kind"] == "Deployment" for o in addons[f"rke-{provider}-addon"])
    names = [a.name for a in build(load_text(f"{BASE}dns: {{provider: none}}\n").config)]
    assert {"rke-coredns-addon", "rke-kube-dns-addon"} <= set(names)
