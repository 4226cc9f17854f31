"""The cloud provider (`rke:cloudprovider/*`, `BuildRKEConfigNodePlan`): the `--cloud-provider` value the
apiserver, controller manager and kubelet get, and the cloud config file RKE writes on every node.

As RKE, the provider is picked from the sub-objects alone when `name` is empty (`InitCloudProvider`: the
last of aws, azure, openstack, vsphere, harvester, custom that is present), and `name` overrides the name
of azure, openstack and vsphere, so `name: external` with `vsphereCloudProvider` writes vSphere's file for an
out-of-tree controller manager. Which names Kubernetes still runs is `validate_cloud`'s to decide.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from rke_py.config.schema import ClusterConfig
from rke_py.plan.common import deployed, host_path
from rke_py.plan.model import FileSpec

CONFIG_FILE = "/etc/kubernetes/cloud-config"
CHECKSUM_ENV = "RKE_CLOUD_CONFIG_CHECKSUM"
EXTERNAL = "external"
EXTERNAL_AWS = "external-aws"  # RKE's name for AWS's out-of-tree provider: `--cloud-provider=external`
# The taint a kubelet started with --cloud-provider=external registers with, until a cloud controller
# manager initialises the node.
UNINITIALIZED_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"

# Fields of RKE's AzureCloudProvider in its order, (key, type, omitempty): RKE writes them all with
# encoding/json, so an unset one appears as its zero value unless it is omitempty.
AZURE_FIELDS: tuple[tuple[str, type, bool], ...] = (
    ("cloud", str, False),
    ("tenantId", str, False),
    ("subscriptionId", str, False),
    ("resourceGroup", str, False),
    ("location", str, False),
    ("vnetName", str, False),
    ("vnetResourceGroup", str, False),
    ("subnetName", str, False),
    ("securityGroupName", str, False),
    ("securityGroupResourceGroup", str, True),
    ("routeTableName", str, False),
    ("primaryAvailabilitySetName", str, False),
    ("vmType", str, False),
    ("primaryScaleSetName", str, False),
    ("aadClientId", str, False),
    ("aadClientSecret", str, False),
    ("aadClientCertPath", str, False),
    ("aadClientCertPassword", str, False),
    ("cloudProviderBackoff", bool, False),
    ("cloudProviderBackoffRetries", int, False),
    ("cloudProviderBackoffExponent", int, False),
    ("cloudProviderBackoffDuration", int, False),
    ("cloudProviderBackoffJitter", int, False),
    ("cloudProviderRateLimit", bool, False),
    ("cloudProviderRateLimitQPS", int, False),
    ("cloudProviderRateLimitBucket", int, False),
    ("useInstanceMetadata", bool, False),
    ("useManagedIdentityExtension", bool, False),
    ("userAssignedIdentityID", str, True),
    ("maximumLoadBalancerRuleCount", int, False),
    ("loadBalancerSku", str, True),
    ("excludeMasterFromStandardLB", bool, True),
    ("tags", str, True),
)
# RKE's OpenstackCloudProvider: YAML section key -> (INI section, {key: type}), in RKE's order.
OPENSTACK_SECTIONS: dict[str, tuple[str, dict[str, type]]] = {
    "global": (
        "Global",
        dict.fromkeys(
            (
                "auth-url",
                "username",
                "user-id",
                "password",
                "tenant-id",
                "tenant-name",
                "trust-id",
                "domain-id",
                "domain-name",
                "region",
                "ca-file",
            ),
            str,
        ),
    ),
    "load_balancer": (
        "LoadBalancer",
        {
            "lb-version": str,
            "use-octavia": bool,
            "subnet-id": str,
            "floating-network-id": str,
            "lb-method": str,
            "lb-provider": str,
            "create-monitor": bool,
            "monitor-delay": str,
            "monitor-timeout": str,
            "monitor-max-retries": int,
            "manage-security-groups": bool,
        },
    ),
    "block_storage": (
        "BlockStorage",
        {"bs-version": str, "trust-device-path": bool, "ignore-volume-az": bool},
    ),
    "route": ("Route", {"router-id": str}),
    "metadata": ("Metadata", {"search-order": str, "request-timeout": int}),
}
# RKE's VsphereCloudProvider: section -> {key: type}; virtual_center maps a server to the second table.
VSPHERE_GLOBAL: dict[str, type] = {
    "user": str,
    "password": str,
    "server": str,
    "port": str,
    "insecure-flag": bool,
    "datacenter": str,
    "datacenters": str,
    "datastore": str,
    "working-dir": str,
    "soap-roundtrip-count": int,
    "vm-uuid": str,
    "vm-name": str,
}
VSPHERE_VIRTUAL_CENTER: dict[str, type] = {
    "user": str,
    "password": str,
    "port": str,
    "datacenters": str,
    "soap-roundtrip-count": int,
}
VSPHERE_SECTIONS: dict[str, dict[str, type]] = {
    "global": VSPHERE_GLOBAL,
    "network": {"public-network": str},
    "disk": {"scsicontrollertype": str},
    "workspace": dict.fromkeys(
        ("server", "datacenter", "folder", "default-datastore", "resourcepool-path"), str
    ),
}


@dataclass(frozen=True)
class Provider:
    """`kind`: which of RKE's providers wrote the config ("" for a bare name); `name`: its name after RKE's
    overrides (what the state and the checks read); `config`: the cloud config file's text."""

    kind: str
    name: str
    config: str

    @property
    def flag(self) -> str:
        """The `--cloud-provider` value (RKE's `getCloudProviderName`)."""
        return EXTERNAL if self.name == EXTERNAL_AWS else self.name

    @property
    def external(self) -> bool:
        return self.flag == EXTERNAL


def kind(config: ClusterConfig) -> str:
    """Which of RKE's providers `cloud_provider` selects ("" for none: a bare `name` or nothing)."""
    cloud = config.cloud_provider
    picked = ""
    for candidate, given in (
        ("aws", cloud.awsCloudProvider is not None),
        ("azure", cloud.azureCloudProvider is not None),
        ("openstack", cloud.openstackCloudProvider is not None),
        ("vsphere", cloud.vsphereCloudProvider is not None),
        ("harvester", cloud.harvesterCloudProvider is not None),
    ):
        if given or cloud.name == candidate:
            picked = candidate
    return "custom" if cloud.customCloudProvider else picked


def provider(config: ClusterConfig) -> Provider | None:
    """The cloud provider `config` sets up, or None."""
    cloud = config.cloud_provider
    picked = kind(config)
    if not picked:
        return Provider("", cloud.name, "") if cloud.name else None
    if picked == "aws":
        return Provider(picked, "aws", "")  # refused for every version rke-py runs (validate_cloud)
    if picked == "harvester":  # an out-of-tree provider: RKE names it external
        return Provider(picked, EXTERNAL, str((cloud.harvesterCloudProvider or {}).get("cloud_config") or ""))
    if picked == "custom":
        return Provider(picked, cloud.name, cloud.customCloudProvider)
    return Provider(picked, cloud.name or picked, RENDER[picked](config))


def _azure(config: ClusterConfig) -> str:
    given = config.cloud_provider.azureCloudProvider or {}
    out: dict[str, Any] = {}
    for key, typ, omitempty in AZURE_FIELDS:
        value = given.get(key)
        if value in (None, "") and omitempty:
            continue
        out[key] = typ() if value in (None, "") else (str(value) if typ is str else value)
    return json.dumps(out, indent="\n")  # RKE's json.MarshalIndent(cfg, "", "\n")


def _openstack(config: ClusterConfig) -> str:
    given = config.cloud_provider.openstackCloudProvider or {}
    sections = []
    for yaml_key, (section, keys) in OPENSTACK_SECTIONS.items():
        values = given.get(yaml_key) or {}
        lines = [
            f"{key} = {ini_value(values[key])}" for key in keys if values.get(key) not in (None, "", 0, False)
        ]
        sections.append("\n".join([f"[{section}]", *lines]))
    return "\n\n".join(sections) + "\n"


def ini_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _vsphere(config: ClusterConfig) -> str:
    """RKE's `VsphereCloudProviderTemplate`, line for line (Go's template ranges over sorted keys)."""
    given = config.cloud_provider.vsphereCloudProvider or {}
    glob, work, disk, net = (given.get(s) or {} for s in ("global", "workspace", "disk", "network"))

    def line(key: str, value: object, indent: str = "") -> str:
        return f'\n{indent}{key} = "{ini_value(value)}"'

    def optional(section: dict[str, Any], key: str, indent: str = "") -> str:
        return line(key, section[key], indent) if section.get(key) not in (None, "") else ""

    tab = " " * 8
    out = "\n[Global]" + line("user", glob.get("user", "")) + line("password", glob.get("password", ""))
    out += optional(glob, "server") + optional(glob, "port")
    out += line("insecure-flag", bool(glob.get("insecure-flag")))
    out += "".join(optional(glob, k) for k in ("datacenters", "datacenter", "datastore", "working-dir"))
    out += line("soap-roundtrip-count", int(glob.get("soap-roundtrip-count") or 0))
    out += optional(glob, "vm-uuid") + optional(glob, "vm-name") + "\n\n"
    centers = given.get("virtual_center") or {}
    for server in sorted(centers):
        center = centers[server] or {}
        out += f'\n[VirtualCenter "{server}"]' + line("user", center.get("user", ""), tab)
        out += line("password", center.get("password", ""), tab)
        out += optional(center, "port", tab) + optional(center, "datacenters", tab)
        out += line("soap-roundtrip-count", int(center.get("soap-roundtrip-count") or 0), tab)
    out += "\n\n[Workspace]" + "".join(
        line(k, work.get(k, ""), tab)
        for k in ("server", "datacenter", "folder", "default-datastore", "resourcepool-path")
    )
    scsi = (
        f"\n{tab}scsicontrollertype = {disk['scsicontrollertype']}" if disk.get("scsicontrollertype") else ""
    )
    return out + "\n\n[Disk]" + scsi + "\n\n[Network]" + optional(net, "public-network", tab) + "\n"


RENDER = {"azure": _azure, "openstack": _openstack, "vsphere": _vsphere}


def files(config: ClusterConfig) -> list[FileSpec]:
    """The cloud config file, for every node, when a provider is set (RKE writes it even when empty)."""
    chosen = provider(config)
    if chosen is None:
        return []
    return [FileSpec(host_path(config, CONFIG_FILE), deployed(chosen.config), secret=True)]


def flags(config: ClusterConfig) -> dict[str, str]:
    """`--cloud-provider` (empty when none, as RKE emits it) and `--cloud-config` when one is set."""
    chosen = provider(config)
    if chosen is None:
        return {"cloud-provider": ""}
    return {"cloud-provider": chosen.flag, "cloud-config": CONFIG_FILE}


def checksum_env(config: ClusterConfig) -> list[str]:
    """RKE's md5 of the cloud config in the environment, so RKE sees the same containers."""
    chosen = provider(config)
    if chosen is None:
        return []
    return [f"{CHECKSUM_ENV}={hashlib.md5(chosen.config.encode(), usedforsecurity=False).hexdigest()}"]


def read_files(config: ClusterConfig) -> tuple[str, ...]:
    return tuple(f.path for f in files(config))
