"""The Kubernetes versions rke-py knows (KDM's v1.27-v1.30 lines), `rke-py config -l/-s` as `rke config`
prints them, and the order `up` moves a cluster in: forward, one minor version at a time."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rke_py.cli import cli
from rke_py.config import kdm, load_text
from rke_py.config.upgrade import version_problems
from rke_py.deploy.desired import prepare
from rke_py.errors import ConfigError, UsageError
from rke_py.state import ClusterState, State, json_name, write_state

CLUSTER = "nodes: [{address: 10.0.0.1, user: root, role: [etcd, controlplane, worker]}]\nkubernetes_version: "


def test_every_known_version_names_the_images_rke_py_runs():
    assert {v.split(".")[1] for v in kdm.versions()} == {"27", "28", "29", "30"}
    assert kdm.DEFAULT_K8S_VERSION in kdm.versions()
    for version in kdm.versions():
        images = kdm.system_images(version)
        assert images is not None and all(images.get(key) for key in kdm.REQUIRED_IMAGES), version
        assert images["kubernetes"] == f"rancher/hyperkube:{version.rsplit('-', 1)[0]}"


def test_versions_order_by_number_then_rancher_revision():
    assert kdm.version_key("v1.28.10-rancher1-1") > kdm.version_key("v1.28.9-rancher1-1")
    assert kdm.version_key("v1.27.8-rancher2-2") > kdm.version_key("v1.27.8-rancher2-1")
    assert kdm.version_key("v1.27.10-rancher1-1") > kdm.version_key("v1.27.8-rancher2-2")
    assert kdm.latest_per_minor() == [
        "v1.27.16-rancher1-1",
        "v1.28.14-rancher1-1",
        "v1.29.9-rancher1-1",
        "v1.30.5-rancher1-1",
    ]


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def test_config_lists_versions_and_images_as_rke_does():
    assert run("config", "--list-version").output == f"{kdm.DEFAULT_K8S_VERSION}\n"
    assert run("config", "-l", "-a").output.split() == kdm.latest_per_minor()
    images = run("config", "-s", "--version", "v1.28.7-rancher1-1").output.split()
    assert "rancher/hyperkube:v1.28.7-rancher1" in images and images == sorted(set(images))
    every = run("config", "-s", "-a").output.splitlines()
    assert [line for line in every if line.startswith("#")] == [f"# images of {v}" for v in kdm.versions()]
    unknown = run("config", "-s", "--version", "v1.31.0-rancher1-1")
    assert isinstance(unknown.exception, UsageError)  # exit 2 through main
    assert "no system images for v1.31.0-rancher1-1" in str(unknown.exception)


@pytest.mark.parametrize(
    ("running", "wanted", "problem"),
    [
        ("v1.28.7-rancher1-1", "v1.28.14-rancher1-1", None),  # a patch release
        ("v1.28.14-rancher1-1", "v1.29.6-rancher1-1", None),  # the next minor
        ("v1.28.7-rancher1-1", "v1.28.7-rancher1-1", None),
        ("", "v1.30.4-rancher1-1", None),  # a new cluster
        (
            "v1.29.9-rancher1-1",
            "v1.28.14-rancher1-1",
            "cluster.yml:2:1: kubernetes_version v1.28.14-rancher1-1 is older than v1.29.9-rancher1-1, "
            "which the cluster runs: rke-py does not downgrade Kubernetes",
        ),
        (
            "v1.28.8-rancher1-1",
            "v1.28.7-rancher1-1",
            "cluster.yml:2:1: kubernetes_version v1.28.7-rancher1-1 is older than v1.28.8-rancher1-1",
        ),
        (
            "v1.27.16-rancher1-1",
            "v1.29.9-rancher1-1",
            "cluster.yml:2:1: upgrading from v1.27.16-rancher1-1 to v1.29.9-rancher1-1 skips v1.28: the "
            "control plane moves one minor version at a time — upgrade to a v1.28 version first",
        ),
    ],
)
def test_a_cluster_moves_forward_one_minor_version_at_a_time(running, wanted, problem):
    config = load_text(CLUSTER + wanted).config
    found = [str(p) for p in version_problems(config, running, "cluster.yml")]
    assert found[0].startswith(problem) if problem else found == [], found


def test_up_refuses_a_downgrade_before_any_host_is_touched(tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text(CLUSTER + "v1.28.7-rancher1-1")
    running = {"kubernetesVersion": "v1.29.9-rancher1-1"}
    write_state(tmp_path / "cluster.rkestate", ClusterState(current=State(rke_config=running)))
    with pytest.raises(
        ConfigError, match=r"cluster\.yml:2:1: kubernetes_version v1\.28\.7-rancher1-1 is older"
    ):
        prepare(path)


LATER = "v1.32.5-rancher1-1"  # RKE v1.7's line: no table in rke-py


def later_state(tmp_path: Path, **changed: str) -> dict[str, str]:
    """A state as RKE writes it for a version rke-py does not list: rkeConfig holds every image it ran."""
    images = {
        **kdm.system_images(kdm.latest_per_minor()[-1]),
        "kubernetes": "rancher/hyperkube:v1.32.5-rancher1",
        "etcd": "rancher/mirrored-coreos-etcd:v3.5.16",
        **changed,
    }
    rke_config = {"kubernetesVersion": LATER, "systemImages": {json_name(k): v for k, v in images.items()}}
    write_state(tmp_path / "cluster.rkestate", ClusterState(current=State(rke_config=rke_config)))
    (tmp_path / "cluster.yml").write_text(CLUSTER + LATER)
    return images


def test_a_version_rke_py_does_not_list_runs_on_the_images_its_state_records(tmp_path: Path):
    images = later_state(tmp_path)
    desired = prepare(tmp_path / "cluster.yml")
    (node,) = desired.plan.nodes
    assert node.container("kube-apiserver").image == images["kubernetes"]
    assert node.container("etcd").image == images["etcd"]
    # all but the snapshot container, which runs the rke-tools of the tool's default version, as RKE's does
    ran = {c.image for c in node.containers if c.name != "etcd-rolling-snapshots"}
    assert ran <= set(images.values()), ran - set(images.values())
    result = run("validate", "--config", str(tmp_path / "cluster.yml"))
    assert result.exit_code == 0, result.output


def test_without_its_state_that_version_needs_system_images(tmp_path: Path):
    later_state(tmp_path)
    (tmp_path / "cluster.rkestate").unlink()
    with pytest.raises(ConfigError, match=r"rke-py has no images for v1\.32\.5-rancher1-1"):
        prepare(tmp_path / "cluster.yml")


def test_recorded_images_are_for_the_recorded_version_only(tmp_path: Path):
    later_state(tmp_path)
    (tmp_path / "cluster.yml").write_text(CLUSTER + "v1.32.6-rancher1-1")  # an upgrade: its images unknown
    with pytest.raises(ConfigError, match=r"rke-py has no images for v1\.32\.6-rancher1-1"):
        prepare(tmp_path / "cluster.yml")


def test_a_recorded_image_that_is_not_an_image_reference_is_not_run(tmp_path: Path):
    later_state(tmp_path, kubernetes="rancher/hyperkube:v1.32.5;reboot")
    with pytest.raises(ConfigError, match="system_images must name kubernetes"):
        prepare(tmp_path / "cluster.yml")
