"""RKE keys that change how a cluster runs, on one running cluster: `cloud_provider: {name: external}`
(nodes wait, tainted, for a cloud controller manager), `authentication.strategy: x509|webhook` (bearer
tokens checked by a webhook, RKE's default kubeconfig pointing at 127.0.0.1:6440 on the controlplane host),
`services.etcd.uid/gid` (etcd as that user, owning its data), the cri-dockerd stream server's address and
port, and `network.enable_br_netfilter`."""

from __future__ import annotations

import json
import shlex

import pytest

from tests.lab.conftest import kube_binaries
from tests.lab.e2e import edit_cluster_yml, host_exec, kubectl, own_lab, up

pytestmark = pytest.mark.lab

UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"
GOOD_TOKEN = "lab-token-the-webhook-accepts"
# A token webhook as Rancher's kube-api-auth answers on 127.0.0.1:6440: a TokenReview in, the same
# apiVersion back, authenticated only for one token.
WEBHOOK = f"""
import http.server, json
class Review(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ok = review["spec"]["token"] == {GOOD_TOKEN!r}
        status = {{"authenticated": ok}}
        if ok:
            status["user"] = {{"username": "webhook-user", "groups": ["system:masters"]}}
        body = json.dumps({{"apiVersion": review["apiVersion"], "kind": "TokenReview", "status": status}})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())
http.server.HTTPServer(("127.0.0.1", 6440), Review).serve_forever()
"""
TOKEN_REQUEST = (
    "curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 --cacert /etc/kubernetes/ssl/kube-ca.pem "
    "-H 'Authorization: Bearer {token}' https://127.0.0.1:6443/api/v1/namespaces/default"
)


ETCD_UID, ETCD_GID = 52034, 52035
STREAM_PORT = 10020


def configure(data) -> None:
    data["cloud_provider"] = {"name": "external"}
    data["authentication"] = {"strategy": "x509|webhook"}
    data.setdefault("services", {}).setdefault("etcd", {}).update(uid=ETCD_UID, gid=ETCD_GID)
    data["cri_dockerd_stream_server_address"] = "127.0.0.1"
    data["cri_dockerd_stream_server_port"] = str(STREAM_PORT)
    data.setdefault("network", {})["enable_br_netfilter"] = True


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "cloud", 1) as made:
        edit_cluster_yml(made, configure)
        run = up(made)
        assert run.code == 0, run.stderr
        # run from the rke-tools image `up` pulled from the lab registry (it has python3); the apiserver
        # asks the webhook on each new token
        started = host_exec(
            made,
            0,
            f"docker run -d --name lab-token-webhook --net host --entrypoint python3 "
            f"$(docker images --format '{{{{.Repository}}}}:{{{{.Tag}}}}' | grep /rke-tools: | head -1) "
            f"-c {shlex.quote(WEBHOOK)}",
        )
        assert "Error" not in started, started
        yield made


def node(lab) -> dict:
    return json.loads(kubectl(lab, "get", "node", lab.hosts[0].name, "-o", "json"))


def test_nodes_wait_tainted_for_a_cloud_controller_manager(lab):
    taints = {t["key"]: t["effect"] for t in node(lab)["spec"].get("taints") or []}
    assert taints.get(UNINITIALIZED) == "NoSchedule"
    assert "--cloud-provider=external" in host_exec(lab, 0, "docker inspect kubelet")


def test_a_minimal_controller_initialises_the_node_and_up_leaves_it_so(lab):
    """What a cloud controller manager does first: the node gets its provider ID and loses the taint."""
    current = node(lab)
    kept = [t for t in current["spec"].get("taints") or [] if t["key"] != UNINITIALIZED]
    patch = {"spec": {"providerID": f"lab://{lab.hosts[0].name}", "taints": kept or None}}
    kubectl(lab, "patch", "node", lab.hosts[0].name, "--type", "merge", "-p", json.dumps(patch))
    after = node(lab)
    assert UNINITIALIZED not in {t["key"] for t in after["spec"].get("taints") or []}
    assert after["spec"]["providerID"] == f"lab://{lab.hosts[0].name}"
    again = up(lab)
    assert again.code == 0, again.stderr
    assert again.json()["changed"] == 0
    assert UNINITIALIZED not in {t["key"] for t in node(lab)["spec"].get("taints") or []}


def test_the_webhook_authenticates_the_token_it_accepts_and_only_that(lab):
    assert host_exec(lab, 0, "docker inspect -f '{{.State.Running}}' lab-token-webhook").strip() == "true"
    accepted = host_exec(lab, 0, TOKEN_REQUEST.format(token=GOOD_TOKEN))
    refused = host_exec(lab, 0, TOKEN_REQUEST.format(token="a-token-nobody-knows"))
    assert (accepted, refused) == ("200", "401")


def test_the_webhook_file_is_rke_s_default_on_the_host(lab):
    content = host_exec(lab, 0, "cat /etc/kubernetes/kube-api-authn-webhook.yaml")
    assert "server: http://127.0.0.1:6440/v1/authenticate" in content
    assert host_exec(lab, 0, "stat -c %a /etc/kubernetes/kube-api-authn-webhook.yaml").strip() == "600"


def test_etcd_runs_as_its_user_and_owns_its_data(lab):
    owner = f"{ETCD_UID}:{ETCD_GID}"
    assert host_exec(lab, 0, "docker inspect -f '{{.Config.User}}' etcd").strip() == owner
    assert host_exec(lab, 0, "stat -c %u:%g:%a /var/lib/etcd").strip() == f"{owner}:700"
    assert host_exec(lab, 0, "stat -c %u:%g /var/lib/etcd/member/snap/db").strip() == owner
    status = host_exec(
        lab, 0, "grep -E '^(Uid|Gid):' /proc/$(docker inspect -f '{{.State.Pid}}' etcd)/status"
    )
    assert [line.split()[1] for line in status.splitlines()] == [str(ETCD_UID), str(ETCD_GID)]


def test_cri_dockerd_streams_on_the_given_port_and_kube_proxy_gets_br_netfilter(lab):
    kubelet_env = host_exec(lab, 0, "docker inspect -f '{{json .Config.Env}}' kubelet")
    assert f"CRIDOCKERD_STREAM_SERVER_PORT={STREAM_PORT}" in kubelet_env
    assert "RKE_KUBE_PROXY_BR_NETFILTER=true" in host_exec(
        lab, 0, "docker inspect -f '{{json .Config.Env}}' kube-proxy"
    )
    if kube_binaries() is not None:  # the stand-in images carry no cri-dockerd
        listening = host_exec(lab, 0, "cat /proc/net/tcp")
        assert f":{STREAM_PORT:04X} " in listening
