"""The cluster as most RKE users build it: the SSH user is in the docker group, not root, and the images
come from a registry that asks for a password. rke-py pulls with the credentials, the kubelet gets them
for pods, and `remove` still leaves every host clean."""

from __future__ import annotations

import base64
import json

import pytest

from tests.lab.e2e import cluster_args, containers_on, host_exec, kubectl, own_lab, rke_py, up

pytestmark = pytest.mark.lab

USER = "rancher"


@pytest.fixture(scope="module")
def lab(tmp_path_factory, lab_factory):
    with own_lab(tmp_path_factory, "nonroot", 5, user=USER, private_registry=True) as made:
        yield made


def test_a_docker_group_user_builds_the_cluster_from_a_password_protected_registry(lab):
    assert "uid=1000" in host_exec(lab, 0, f"id {USER}") and "docker" in host_exec(lab, 0, f"id {USER}")
    run = up(lab)
    assert run.code == 0, run.stderr
    assert run.json()["ok"] is True
    assert "Accepted publickey for rancher" in host_exec(lab, 0, "cat /var/log/sshd.log")
    for i in range(5):
        # rke-py's files are root's, written through Docker: keys 0600, nothing left of the helper
        assert host_exec(lab, i, "stat -c '%u %a' /etc/kubernetes/ssl/kube-ca.pem").split()[0] == "0"
        assert host_exec(lab, i, "stat -c '%a' /etc/kubernetes/ssl/kube-node-key.pem").strip() == "600"
        assert "rke-py-file-helper" not in host_exec(lab, i, "docker ps -a --format '{{.Names}}'")
        # every image came from the registry that needs the password
        images = host_exec(lab, i, "docker images --format '{{.Repository}}'").split()
        assert images and all(image.startswith(lab.private_registry) for image in images)


def test_the_kubelet_holds_the_registry_credentials_and_no_process_shows_them(lab):
    expected = base64.b64encode(f"{lab.registry_user}:{lab.registry_password}".encode()).decode()
    for i in range(5):
        config = json.loads(host_exec(lab, i, "cat /var/lib/kubelet/config.json"))
        assert config["auths"][lab.private_registry]["auth"] == expected
        assert host_exec(lab, i, "stat -c '%a' /var/lib/kubelet/config.json").strip() == "600"
        assert lab.registry_password not in host_exec(
            lab, i, "cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '"
        )


def test_a_second_up_changes_nothing_and_status_is_healthy(lab):
    run = up(lab, "--no-verify")
    assert run.code == 0, run.stderr
    assert run.json()["changed"] == 0
    status = rke_py("status", *cluster_args(lab, "--output", "json"))
    assert status.code == 0, status.stderr


@pytest.mark.real_kubernetes
def test_a_pod_pulls_its_image_from_the_password_protected_registry(lab):
    """The etcd image is on no worker: the kubelet must pull it, with the credentials rke-py gave it."""
    worker = 4
    image = f"{lab.private_registry}/{lab.images['etcd']}"
    assert image not in host_exec(lab, worker, "docker images --format '{{.Repository}}:{{.Tag}}'")
    overrides = json.dumps({"spec": {"nodeName": lab.hosts[worker].name}})
    run = ["run", "private", f"--image={image}", "--restart=Never", f"--overrides={overrides}"]
    kubectl(lab, *run, "--command", "--", "sleep", "600")
    kubectl(lab, "wait", "--for=condition=Ready", "pod/private", "--timeout=90s")
    assert image in host_exec(lab, worker, "docker images --format '{{.Repository}}:{{.Tag}}'")


def test_remove_leaves_every_host_clean(lab):
    run = rke_py("remove", *cluster_args(lab, "--force"))
    assert run.code == 0, run.stderr
    for i in range(5):
        assert containers_on(lab, i) == {}
        assert host_exec(lab, i, "docker ps -aq").strip() == ""
        assert "No such file" in host_exec(lab, i, "ls /etc/kubernetes /var/lib/kubelet 2>&1")
        assert host_exec(lab, i, "grep -c /var/lib/kubelet /proc/mounts").strip() == "0"
