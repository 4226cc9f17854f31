"""The cluster.yml `rke-py config` writes: readable, commented, and loaded by rke-py without a warning."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from rke_py.config import load_text
from rke_py.config.generate import (
    NodeInput,
    parse_node_option,
    render_cluster_yml,
    roles_by_count,
    write_config_file,
    yaml_scalar,
)
from rke_py.errors import ConfigError, UsageError

ALL = ["etcd", "controlplane", "worker"]
RKE_HEADER = (
    "# If you intended to deploy Kubernetes in an air-gapped environment,\n"
    "# please consult the documentation on how to configure custom RKE images.\n"
)


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (1, [ALL]),
        (2, [ALL, ["worker"]]),
        (3, [ALL, ALL, ALL]),
        (4, [["etcd", "controlplane"]] * 3 + [["worker"]]),
        (6, [["etcd", "controlplane"]] * 3 + [["worker"]] * 3),
    ],
)
def test_roles_by_count(count: int, expected: list[list[str]]):
    assert roles_by_count(count) == expected


@pytest.mark.parametrize("count", range(1, 8))
def test_every_count_gives_a_file_that_loads_without_warnings(count: int):
    nodes = [NodeInput(f"10.0.0.{i + 1}", roles) for i, roles in enumerate(roles_by_count(count))]
    loaded = load_text(render_cluster_yml(nodes))
    assert loaded.warnings == []
    assert [n.role for n in loaded.config.nodes] == roles_by_count(count)
    assert len(loaded.config.hosts("etcd")) in (1, 3)


def test_roles_by_count_lists_are_independent():
    roles = roles_by_count(5)
    roles[0].append("worker")
    assert roles[1] == ["etcd", "controlplane"]


def test_file_starts_with_rke_header_and_explains_air_gapped_images():
    text = render_cluster_yml([NodeInput("10.0.0.1", ALL)])
    assert text.startswith(RKE_HEADER)
    header = text.split("\n\n")[0]
    assert "system_images" in header
    assert "private_registries" in header
    # The commented example names real images, so an air-gapped site knows what to mirror.
    assert "#   etcd: rancher/mirrored-coreos-etcd:" in text
    assert "# private_registries:" in text


def test_node_values_round_trip_through_the_loader():
    node = NodeInput(
        "192.168.56.11",
        ALL,
        user="vagrant",
        port=2222,
        ssh_key_path="/home/a b/My Keys/id_ed25519",
        internal_address="10.1.0.11",
        hostname_override="node-1",
        docker_socket="/run/docker.sock",
        comment="the first machine",
    )
    text = render_cluster_yml([node], cluster_name="lab", ssh_key_path="~/.ssh/id_ed25519")
    loaded = load_text(text)
    assert loaded.warnings == []
    config = loaded.config
    assert (config.cluster_name, config.ssh_key_path) == ("lab", "~/.ssh/id_ed25519")
    [got] = config.nodes
    assert got.address == "192.168.56.11"
    assert got.port == "2222"
    assert got.user == "vagrant"
    assert got.role == ALL
    assert got.ssh_key_path == "/home/a b/My Keys/id_ed25519"
    assert got.internal_address == "10.1.0.11"
    assert got.hostname_override == "node-1"
    assert got.docker_socket == "/run/docker.sock"
    assert "  # the first machine\n  - address: 192.168.56.11\n" in text


def test_unset_node_keys_are_left_out_so_rke_defaults_apply():
    text = render_cluster_yml([NodeInput("10.0.0.1", ALL)])
    assert set(YAML(typ="safe", pure=True).load(text)["nodes"][0]) == {"address", "port", "user", "role"}
    config = load_text(text).config
    assert config.nodes[0].internal_address == "10.0.0.1"  # the loader's default: the address
    assert config.nodes[0].ssh_key_path == "~/.ssh/id_rsa"  # the cluster key
    assert config.nodes[0].user == "ubuntu"  # RKE's default user in `rke config`


def test_kubernetes_version_is_a_comment_unless_given():
    assert "\n# kubernetes_version: v" in render_cluster_yml([NodeInput("10.0.0.1", ALL)])
    text = render_cluster_yml([NodeInput("10.0.0.1", ALL)], kubernetes_version="v1.30.4-rancher1-1")
    assert "\nkubernetes_version: v1.30.4-rancher1-1\n" in text
    assert load_text(text).config.kubernetes_version == "v1.30.4-rancher1-1"


def test_cluster_settings_are_written():
    text = render_cluster_yml(
        [NodeInput("10.0.0.1", ALL)],
        network_plugin="flannel",
        service_cluster_ip_range="10.96.0.0/16",
        cluster_cidr="10.244.0.0/16",
        cluster_dns_server="10.96.0.10",
        cluster_domain="lab.local",
    )
    config = load_text(text).config
    assert config.network.plugin == "flannel"
    assert config.services.kube_api.service_cluster_ip_range == "10.96.0.0/16"
    assert config.services.kube_controller.service_cluster_ip_range == "10.96.0.0/16"
    assert config.services.kube_controller.cluster_cidr == "10.244.0.0/16"
    assert config.services.kubelet.cluster_dns_server == "10.96.0.10"
    assert config.services.kubelet.cluster_domain == "lab.local"
    assert config.authorization.mode == "rbac"


def test_authorization_none_is_written_and_refused_as_rke_refuses_it():
    """RKE turns Pod Security admission on for every version rke-py runs and then refuses a cluster
    without RBAC; the file says which line and what to do instead."""
    text = render_cluster_yml([NodeInput("10.0.0.1", ALL)], authorization_mode="none")
    with pytest.raises(ConfigError) as refused:
        load_text(text)
    (problem,) = refused.value.problems
    assert text.splitlines()[problem.line - 1].strip() == "mode: none"
    assert "without RBAC, which RKE refuses" in problem.message and "use mode rbac" in problem.hint


def test_every_section_is_explained_by_a_comment():
    lines = render_cluster_yml([NodeInput("10.0.0.1", ALL)]).splitlines()
    for index, line in enumerate(lines):
        if line and not line.startswith(("#", " ")):  # a top-level key
            assert lines[index - 1].startswith("#"), f"no comment above {line!r}"


def test_written_by_cannot_break_out_of_its_comment():
    text = render_cluster_yml([NodeInput("10.0.0.1", ALL)], written_by="rke-py config --name 'a\nnodes: []'")
    assert load_text(text).config.nodes[0].address == "10.0.0.1"


@pytest.mark.parametrize(
    "value",
    [
        "22",
        "yes",
        "no",
        "on",
        "y",
        "~",
        "null",
        "",
        "0755",
        "12:30",
        "1e3",
        "1.5",
        "2001-01-01",
        "-",
        "a:",
        "a b",
        "x #y",
        "@x",
        "*x",
        "&x",
        "!x",
        "%x",
        "'x",
        '"x',
        "a\nb",
        "ä",
        "::1",
        "fe80::1%eth0",
    ],
)
def test_tricky_strings_load_back_as_the_same_string(value: str):
    loaded = YAML(typ="safe", pure=True).load(f"k: {yaml_scalar(value)}\n")
    assert loaded == {"k": value}


@pytest.mark.parametrize(
    "value",
    ["192.168.56.11", "node-1", "~/.ssh/id_rsa", "10.43.0.0/16", "vagrant", "v1.30.4-rancher1-1", "fd00::1"],
)
def test_ordinary_values_stay_unquoted(value: str):
    assert yaml_scalar(value) == value


@pytest.mark.parametrize(
    ("text", "address", "roles", "user"),
    [
        ("10.0.0.1:etcd,controlplane,worker", "10.0.0.1", ALL, "ubuntu"),
        ("10.0.0.2:worker@admin", "10.0.0.2", ["worker"], "admin"),
        ("host.example.com:etcd", "host.example.com", ["etcd"], "ubuntu"),
        ("fd00::5:controlplane@root", "fd00::5", ["controlplane"], "root"),
        ("[fd00::6]:worker", "fd00::6", ["worker"], "ubuntu"),
    ],
)
def test_parse_node_option(text: str, address: str, roles: list[str], user: str):
    node = parse_node_option(text)
    assert (node.address, node.roles, node.user, node.port) == (address, roles, user, 22)


@pytest.mark.parametrize("text", ["10.0.0.1", "10.0.0.1:", ":worker", "10.0.0.1:worker@"])
def test_parse_node_option_rejects_malformed_text(text: str):
    with pytest.raises(UsageError, match=r"is not ADDRESS:ROLE\[,ROLE\]\[@USER\]"):
        parse_node_option(text)


def test_unknown_role_names_the_valid_ones():
    with pytest.raises(UsageError) as info:
        parse_node_option("10.0.0.1:etcd,master")
    assert (
        str(info.value) == 'unknown role "master" for 10.0.0.1; a role is one of etcd, controlplane, worker'
    )


def test_write_refuses_to_replace_an_existing_file(tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text("mine\n")
    with pytest.raises(UsageError, match="already exists; pass --force"):
        write_config_file(path, "new\n")
    assert path.read_text() == "mine\n"


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o000])
@pytest.mark.parametrize("force", [False, True])
def test_written_file_has_mode_0640_whatever_the_umask(tmp_path: Path, umask: int, force: bool):
    path = tmp_path / "cluster.yml"
    if force:
        path.write_text("old\n")
        path.chmod(0o600)
    old = os.umask(umask)
    try:
        write_config_file(path, "new\n", force=force)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["cluster.yml"]  # no temporary file left behind


@pytest.mark.parametrize("force", [False, True])
def test_a_missing_directory_is_a_usage_error(tmp_path: Path, force: bool):
    with pytest.raises(UsageError, match=r"cannot write .*/nowhere/cluster.yml: No such file or directory"):
        write_config_file(tmp_path / "nowhere" / "cluster.yml", "x\n", force=force)
