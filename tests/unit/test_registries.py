"""Private registries: pods pull with the same credentials rke-py pulls with, and no output shows them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from moto import mock_aws

from rke_py.cli import main
from rke_py.config import load, load_text
from rke_py.deploy import pullauth
from rke_py.plan import kubelet
from rke_py.plan.registries import ecr_region, kubelet_docker_config, registry_auth, registry_of

REGISTRY = Path(__file__).parents[1] / "fixtures" / "config" / "good" / "private_registry.yml"


def env_of(config) -> dict[str, str]:
    spec = kubelet.container(config, config.nodes[0])
    return dict(entry.partition("=")[::2] for entry in spec.env)


def test_the_kubelet_gets_every_registrys_credentials_as_a_docker_config_in_its_environment():
    config = load(REGISTRY).config
    env = env_of(config)
    docker_config = json.loads(base64.b64decode(env["RKE_KUBELET_DOCKER_CONFIG"]))
    auth = docker_config["auths"]["registry.example.com:5000"]["auth"]
    assert base64.b64decode(auth) == b"admin:secret"
    assert env["RKE_KUBELET_DOCKER_FILE"] == "/var/lib/kubelet/config.json"
    spec = kubelet.container(config, config.nodes[0])
    argv = [*spec.entrypoint, *spec.command]
    assert not any("secret" in word or env["RKE_KUBELET_DOCKER_CONFIG"] in word for word in argv)


def test_a_registry_without_credentials_is_in_the_kubelets_docker_config_as_rke_writes_it():
    """RKE's GetKubeletDockerConfig lists every registry, an empty `user:password` when it has none, in
    Go's compact JSON: the same bytes keep an RKE-built kubelet's environment, and the kubelet, as it is."""
    config = load(REGISTRY).config
    for registry in config.private_registries:
        registry.user = registry.password = ""
    written = base64.b64decode(env_of(config)["RKE_KUBELET_DOCKER_CONFIG"])
    assert written == b'{"auths":{"registry.example.com:5000":{"auth":"Og=="}}}'
    config.private_registries = []
    assert kubelet_docker_config(config) == ""
    assert "RKE_KUBELET_DOCKER_CONFIG" not in env_of(config)


def test_pulls_find_credentials_by_the_registry_an_image_names():
    config = load(REGISTRY).config
    auth = registry_auth(config)
    assert auth[registry_of(config.system_images.etcd)] == {"username": "admin", "password": "secret"}
    assert registry_of("rancher/rke-tools:v0.1.102") == "docker.io"
    assert registry_of("localhost/x:1") == "localhost"


def test_plan_output_never_shows_the_credentials(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "cluster.yml"
    config.write_text(REGISTRY.read_text())
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--offline", "--output", "json", "--config", str(config)])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    encoded = kubelet_docker_config(load(REGISTRY).config)
    assert "RKE_KUBELET_DOCKER_CONFIG=(secret)" in out
    assert encoded not in out and base64.b64encode(b"admin:secret").decode() not in out
    assert '"secret"' not in out


ECR = "123456789012.dkr.ecr.eu-west-1.amazonaws.com"
ECR_CONFIG = f"""
nodes:
  - {{address: 192.0.2.11, user: ubuntu, role: [etcd, controlplane, worker]}}
private_registries:
  - url: {ECR}
    is_default: true
    ecr_credential_plugin:
      aws_access_key_id: AKIAEXAMPLEKEY
      aws_secret_access_key: example-secret-key
"""


def test_ecr_registries_are_recognised_by_rkes_pattern():
    assert ecr_region(ECR) == "eu-west-1"
    assert ecr_region("https://1.dkr.ecr-fips.us-gov-west-1.amazonaws.com/") == "us-gov-west-1"
    assert ecr_region("1.dkr.ecr.cn-north-1.amazonaws.com.cn") == "cn-north-1"
    assert ecr_region("registry.example.com") is None
    assert ecr_region("1.dkr.ecr.eu-west-1.amazonaws.com.evil.example") is None


def test_the_kubelet_leaves_an_ecr_registry_to_the_ecr_login_helper_as_rke_does():
    config = load_text(ECR_CONFIG, "cluster.yml").config
    document = json.loads(base64.b64decode(env_of(config)["RKE_KUBELET_DOCKER_CONFIG"]))
    assert document == {"credHelpers": {ECR: "ecr-login"}}


def test_pulls_from_ecr_use_a_token_ecr_hands_out_for_the_plugins_keys(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pullauth, "_tokens", {})
    config = load_text(ECR_CONFIG, "cluster.yml").config
    with mock_aws():
        auth = pullauth.pull_auth(config)
        assert pullauth.pull_auth(config) == auth  # asked once a process
    assert auth[ECR]["username"] == "AWS"
    assert auth[ECR]["password"] and "example-secret-key" not in auth[ECR]["password"]


def test_a_registry_with_its_own_user_is_not_asked_for_an_ecr_token(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pullauth, "_tokens", {})
    config = load_text(ECR_CONFIG, "cluster.yml").config
    config.private_registries[0].user, config.private_registries[0].password = (
        "AWS",
        "from-get-login-password",
    )
    assert pullauth.pull_auth(config) == {ECR: {"username": "AWS", "password": "from-get-login-password"}}


def test_ecr_keys_never_reach_plan_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    config = tmp_path / "cluster.yml"
    config.write_text(ECR_CONFIG)
    with pytest.raises(SystemExit) as exited:
        main(["plan", "--offline", "--output", "json", "--config", str(config)])
    assert exited.value.code == 0
    assert "example-secret-key" not in capsys.readouterr().out
