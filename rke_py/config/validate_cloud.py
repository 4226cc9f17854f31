"""`cloud_provider`: the providers Kubernetes still runs for the cluster's version, and every value that
goes into the cloud config file checked before it is written on a host.

Kubernetes removed the in-tree OpenStack provider in v1.26 and AWS in v1.27 (RKE refuses aws itself), and
from v1.29 the remaining in-tree providers (Azure, vSphere) are off unless a feature gate turns them back
on; the way forward for each is `name: external` and the provider's own cloud controller manager, with the
sub-object kept so its cloud config file is still written for that controller.
"""

from __future__ import annotations

import re
from typing import Any

from rke_py.config.findings import Findings, Path, did_you_mean
from rke_py.config.schema import ClusterConfig
from rke_py.plan import cloud_provider as cp
from rke_py.plan.common import k8s_minor

ROOT = ("cloud_provider",)
REMOVED = {"openstack": 26, "aws": 27}  # the Kubernetes minor that dropped the in-tree provider
GATED = {"azure": 29, "vsphere": 29}  # DisableCloudProviders on by default from this minor
SUB_OBJECTS = {
    "aws": "awsCloudProvider",
    "azure": "azureCloudProvider",
    "openstack": "openstackCloudProvider",
    "vsphere": "vsphereCloudProvider",
    "harvester": "harvesterCloudProvider",
    "custom": "customCloudProvider",
}
NAMES = (cp.EXTERNAL, cp.EXTERNAL_AWS, *REMOVED, *GATED, "harvester")
# What may appear inside a quoted or bare INI value: one line, no quote that would end it early.
INI_TEXT = re.compile(r"[^\"\n\r\x00]*\Z")
SERVER = re.compile(r"[A-Za-z0-9.:\-\[\]]{1,253}\Z", re.ASCII)  # a vCenter's host name or address
KINDS = {str: "text", int: "a whole number", bool: "true or false"}
FORWARD = (
    "set name: external and run the provider's cloud controller manager (keep the {key} sub-object: "
    "rke-py still writes its cloud config file for that controller)"
)


def cloud(config: ClusterConfig, findings: Findings) -> None:
    """The provider is one Kubernetes runs for this version, and its sub-object is well formed."""
    cloud_cfg = config.cloud_provider
    _shapes(config, findings)
    picked = cp.kind(config)
    name = cloud_cfg.name
    minor = k8s_minor(config)
    sub = SUB_OBJECTS.get(picked, "name")
    where = (*ROOT, sub) if getattr(cloud_cfg, sub, None) is not None and sub != "name" else (*ROOT, "name")
    if picked == "aws":
        findings.error(
            where,
            f"the in-tree aws cloud provider was removed in Kubernetes v1.{REMOVED['aws']} "
            f"({config.kubernetes_version} is later)",
            "set name: external-aws (without awsCloudProvider) and run AWS's cloud controller manager",
        )
    elif picked in REMOVED and name in ("", picked) and minor >= REMOVED[picked]:
        findings.error(
            where,
            f"the in-tree {picked} cloud provider was removed in Kubernetes v1.{REMOVED[picked]}",
            FORWARD.format(key=SUB_OBJECTS[picked]),
        )
    elif picked in GATED and name in ("", picked) and minor >= GATED[picked]:
        findings.error(
            where,
            f"the in-tree {picked} cloud provider is off in Kubernetes v1.{GATED[picked]} and later "
            f"(DisableCloudProviders) and removed in v1.31",
            FORWARD.format(key=SUB_OBJECTS[picked]),
        )
    if (
        picked in ("azure", "openstack", "vsphere", "harvester")
        and getattr(cloud_cfg, SUB_OBJECTS[picked]) is None
    ):
        findings.error(
            (*ROOT, "name"),
            f"cloud provider {picked} needs its {SUB_OBJECTS[picked]} settings",
            f"add cloud_provider.{SUB_OBJECTS[picked]}, as RKE requires",
        )
    if picked == "custom" and not name:
        findings.error(
            (*ROOT, "customCloudProvider"),
            "a custom cloud provider needs a name",
            "set cloud_provider.name to the --cloud-provider value the cloud config is for",
        )
    if not picked and name and name not in NAMES:
        findings.error(
            (*ROOT, "name"),
            f'unknown cloud provider "{name}"' + did_you_mean(name, NAMES),
            "use external (with the provider's cloud controller manager), external-aws, azure or vsphere; "
            "for another in-tree provider give its file as customCloudProvider",
        )
    if cloud_cfg.useInstanceMetadataHostname and name not in ("aws", cp.EXTERNAL_AWS):
        findings.warning(
            (*ROOT, "useInstanceMetadataHostname"),
            "useInstanceMetadataHostname is only used with the external-aws cloud provider",
            "remove it, or set name: external-aws",
        )


def _shapes(config: ClusterConfig, findings: Findings) -> None:
    cloud_cfg = config.cloud_provider
    if cloud_cfg.azureCloudProvider is not None:
        fields = {key: typ for key, typ, _ in cp.AZURE_FIELDS}
        _section(cloud_cfg.azureCloudProvider, fields, (*ROOT, "azureCloudProvider"), findings, ini=False)
    if cloud_cfg.openstackCloudProvider is not None:
        tables = {key: keys for key, (_, keys) in cp.OPENSTACK_SECTIONS.items()}
        _sections(cloud_cfg.openstackCloudProvider, tables, (*ROOT, "openstackCloudProvider"), findings)
    if cloud_cfg.vsphereCloudProvider is not None:
        path = (*ROOT, "vsphereCloudProvider")
        given = dict(cloud_cfg.vsphereCloudProvider)
        centers = given.pop("virtual_center", None) or {}
        _sections(given, cp.VSPHERE_SECTIONS, path, findings)
        if not isinstance(centers, dict):
            findings.type_error(
                (*path, "virtual_center"), "virtual_center must be a mapping of vCenter servers"
            )
            return
        for server, center in centers.items():
            at = (*path, "virtual_center", server)
            if not SERVER.match(str(server)):
                findings.error(at, f'"{server}" is not a vCenter host name or address', "e.g. vc.example.com")
            elif isinstance(center, dict):
                _section(center, cp.VSPHERE_VIRTUAL_CENTER, at, findings, ini=True)
            elif center is not None:
                findings.type_error(at, "a vCenter's settings must be a mapping (user, password, ...)")
    if cloud_cfg.harvesterCloudProvider is not None:
        path = (*ROOT, "harvesterCloudProvider")
        _section(cloud_cfg.harvesterCloudProvider, {"cloud_config": str}, path, findings, ini=False)


def _sections(
    given: dict[str, Any], tables: dict[str, dict[str, type]], path: Path, findings: Findings
) -> None:
    for key, section in given.items():
        if key not in tables:
            _unknown(key, path, tuple(tables), findings)
        elif isinstance(section, dict):
            _section(section, tables[key], (*path, key), findings, ini=True)
        elif section is not None:
            findings.type_error((*path, key), f"{key} must be a mapping of settings")


def _section(given: Any, fields: dict[str, type], path: Path, findings: Findings, ini: bool) -> None:
    """Known keys with values of their type; with `ini`, text that stays on its own line of the file."""
    if not isinstance(given, dict):
        findings.type_error(path, "must be a mapping of settings")
        return
    for key, value in given.items():
        at = (*path, key)
        if key not in fields:
            _unknown(key, path, tuple(fields), findings)
        elif value is None:
            continue
        elif not _is(value, fields[key]):
            findings.type_error(at, f"{key} must be {KINDS[fields[key]]}")
        elif ini and isinstance(value, str) and not INI_TEXT.match(value):
            findings.error(
                at, f"{key} must be one line without double quotes", "it is written into an INI file"
            )


def _is(value: object, typ: type) -> bool:
    if typ is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if typ is str:
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    return isinstance(value, typ)


def _unknown(key: str, path: Path, known: tuple[str, ...], findings: Findings) -> None:
    findings.warning(
        (*path, key),
        f'"{key}" is not a setting RKE writes into the cloud config file; it is ignored',
        "remove it or check the spelling" + did_you_mean(str(key), known),
    )
