"""Keys of RKE's cluster.yml that change nothing: RKE ignores them, they are for Windows nodes, or they ask
for an RKE action rke-py does not carry out yet. Each is named at its line, so nobody believes it took
effect (`tests/unit/test_key_audit.py` changes every key and holds rke-py to this)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from rke_py.config import kdm
from rke_py.config.defaults import default_registry
from rke_py.config.findings import Findings, excerpt
from rke_py.config.mapping import YAML_NAMES
from rke_py.config.schema import ClusterConfig, Services

WINDOWS = "applies only to Windows nodes, which rke-py does not run"
REMOVE = "remove it"
# services.<name>.image: RKE runs every service with system_images, whatever is given here
SERVICE_IMAGES = {
    "etcd": "etcd",
    "kube_api": "kubernetes",
    "kube_controller": "kubernetes",
    "scheduler": "kubernetes",
    "kubelet": "kubernetes",
    "kubeproxy": "kubernetes",
}
# system_images of what rke-py never runs, with what `rke config` (RKE v1.6) writes for the ACI ones
UNUSED_IMAGES = {
    "weave_node": "Weave (rke-py deploys canal, flannel and calico)",
    "weave_cni": "Weave (rke-py deploys canal, flannel and calico)",
    "calico_ctl": "calicoctl, which RKE's manifests do not run",
    "canal_flexvol": "canal's flexvolume driver, which RKE's templates no longer run",
    "calico_flexvol": "calico's flexvolume driver, which RKE's templates no longer run",
    "windows_pod_infra_container": "Windows nodes, which rke-py does not run",
}
ACI_DEFAULTS = {
    "aci_cni_deploy_container": "noiro/cnideploy:6.0.4.2.81c2369",
    "aci_host_container": "noiro/aci-containers-host:6.0.4.2.81c2369",
    "aci_opflex_container": "noiro/opflex:6.0.4.2.81c2369",
    "aci_mcast_container": "noiro/opflex:6.0.4.2.81c2369",
    "aci_ovs_container": "noiro/openvswitch:6.0.4.2.81c2369",
    "aci_controller_container": "noiro/aci-containers-controller:6.0.4.2.81c2369",
    "aci_gbp_server_container": "",
    "aci_opflex_server_container": "",
}
IMAGE_VERSION = re.compile(r":v([0-9]+)\.([0-9]+)\.([0-9]+)")


def as_given(config: ClusterConfig, findings: Findings) -> None:
    """What the defaults overwrite, as RKE's do: checked before them."""
    for field in dataclasses.fields(Services):
        key = YAML_NAMES.get(field.name, field.name)
        image = getattr(config.services, field.name).image
        system = SERVICE_IMAGES[field.name]
        if image and image != getattr(config.system_images, system):
            findings.warning(
                ("services", key, "image"),
                f"services.{key}.image is not used: RKE runs {key} with system_images.{system}",
                f"set system_images.{system} instead",
            )
    agent = "RKE and rke-py take ssh_agent_auth from the top level of cluster.yml for every host"
    hint = "set ssh_agent_auth: true at the top level"
    for index, node in enumerate(config.nodes):
        if node.ssh_agent_auth and not config.ssh_agent_auth:
            findings.warning(("nodes", index, "ssh_agent_auth"), agent, hint)
    if config.bastion_host and config.bastion_host.ssh_agent_auth and not config.ssh_agent_auth:
        findings.warning(("bastion_host", "ssh_agent_auth"), agent, hint)


def ignored(config: ClusterConfig, findings: Findings) -> None:
    _services(config, findings)
    _hosts(config, findings)
    _images(config, findings)
    _actions(config, findings)
    _cluster(config, findings)


def _services(config: ClusterConfig, findings: Findings) -> None:
    for field in dataclasses.fields(Services):
        key = YAML_NAMES.get(field.name, field.name)
        service = getattr(config.services, field.name)
        for option in ("win_extra_args", "win_extra_args_array", "win_extra_binds", "win_extra_env"):
            if getattr(service, option):
                findings.warning(("services", key, option), f"services.{key}.{option} {WINDOWS}", REMOVE)
    etcd = config.services.etcd
    if not etcd.external_urls:
        for option in ("ca_cert", "cert", "key", "path"):
            if getattr(etcd, option):
                findings.warning(
                    ("services", "etcd", option),
                    f"services.etcd.{option} is only for an external etcd (external_urls), which is not set",
                    "remove it, or give external_urls",
                )


def _hosts(config: ClusterConfig, findings: Findings) -> None:
    for index, node in enumerate(config.nodes):
        if node.nodeName:
            findings.warning(
                ("nodes", index, "nodeName"),
                "nodeName is Rancher's name for a provisioned machine: RKE and rke-py do not use it",
                "use hostname_override to name the node",
            )
    bastion = config.bastion_host
    if bastion is not None and bastion.ignore_proxy_env_vars:
        findings.warning(
            ("bastion_host", "ignore_proxy_env_vars"),
            "ignore_proxy_env_vars changes nothing: rke-py never dials the bastion through a proxy "
            "from the environment",
            REMOVE,
        )
    if config.win_prefix_path:
        findings.warning(("win_prefix_path",), f"win_prefix_path {WINDOWS}", REMOVE)


def _images(config: ClusterConfig, findings: Findings) -> None:
    registry = default_registry(config)
    table: Mapping[str, str] = kdm.system_images(config.kubernetes_version) or {}
    defaults = {key: f"{registry}/{image}" if registry else image for key, image in table.items()}
    for key, what in UNUSED_IMAGES.items():
        value = getattr(config.system_images, key)
        if ("system_images", key) in findings.positions and value != defaults.get(key, ""):
            message = f"system_images.{key} is not used: it is for {what}"
            findings.warning(("system_images", key), message, REMOVE)
    for key, default in ACI_DEFAULTS.items():
        if str(config.system_images.extra.get(key) or "") not in ("", default):
            findings.warning(
                ("system_images", key),
                f"system_images.{key} is not used: it is for Cisco ACI, which rke-py does not deploy",
                REMOVE,
            )
    _version_pinned(config, findings)


def _version_pinned(config: ClusterConfig, findings: Findings) -> None:
    """kubernetes_version only picks default images: one given in system_images.kubernetes with another
    version in its tag runs that version instead (an image tagged otherwise is the user's own build)."""
    image = config.system_images.kubernetes
    tagged = IMAGE_VERSION.search(image.rsplit("/", 1)[-1])
    wanted = kdm.parse_version(config.kubernetes_version)
    if ("kubernetes_version",) not in findings.positions or not tagged or wanted is None:
        return
    if tuple(map(int, tagged.groups())) != wanted:
        findings.warning(
            ("kubernetes_version",),
            f"system_images.kubernetes ({excerpt(image)}) decides what runs, not kubernetes_version "
            f"{config.kubernetes_version}",
            "change both together, or remove system_images.kubernetes to take the version's image",
        )


def _actions(config: ClusterConfig, findings: Findings) -> None:
    restore = config.restore or {}
    if restore.get("restore"):
        name = excerpt(str(restore.get("snapshot_name") or "NAME"))
        findings.warning(
            ("restore",),
            "restore in cluster.yml is Rancher's way to ask for a restore: rke-py up does not restore",
            f"run `rke-py etcd snapshot-restore --name {name}` and remove restore",
        )


def _cluster(config: ClusterConfig, findings: Findings) -> None:
    if config.authorization.options:
        findings.warning(
            ("authorization", "options"), "authorization.options is not used by RKE or rke-py", REMOVE
        )
