"""Checks on the add-on sections (network, dns, ingress, monitoring, addons, addons_include).

Values that end up in Kubernetes objects are checked here as the apiserver would check them, so a bad
toleration or update strategy is a finding at its line, not a refused object halfway through `up`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from rke_py.addons import user
from rke_py.config import kdm
from rke_py.config.defaults import INGRESS_HTTP_PORT, INGRESS_HTTPS_PORT, NETWORK_OPTIONS, PROVIDER_OPTIONS
from rke_py.config.findings import Findings, Path, did_you_mean, dotted, excerpt
from rke_py.config.schema import DNS_OPTIONS, ClusterConfig, Toleration
from rke_py.config.validate_nodes import TAINT_EFFECTS, check_port

NETWORK_PLUGINS = ("canal", "flannel", "calico", "none")  # what rke-py deploys
RKE_ONLY_PLUGINS = ("weave", "aci")  # RKE had them; rke-py refuses them rather than leave pods unnetworked
ADDON_PROVIDERS = {
    "dns": ("coredns", "kube-dns", "none"),
    "ingress": ("nginx", "none"),
    "monitoring": ("metrics-server", "none"),
}
# options RKE reads (and defaults) that its templates leave out
NO_FLEXVOLUME = "RKE's templates no longer run the flexvolume driver"
UNUSED_NETWORK_OPTIONS = {
    "canal": {
        "canal_flannel_backend_vni": "RKE's canal leaves flannel's VXLAN at its defaults",
        "canal_flannel_backend_port": "RKE's canal leaves flannel's VXLAN at its defaults",
        "canal_flex_volume_plugin_dir": NO_FLEXVOLUME,
    },
    "calico": {"calico_flex_volume_plugin_dir": NO_FLEXVOLUME},
}
INGRESS_NETWORK_MODES = ("hostPort", "hostNetwork", "none")
DNS_POLICIES = ("ClusterFirst", "ClusterFirstWithHostNet", "Default", "None")
TOLERATION_OPERATORS = ("Exists", "Equal")
# update_strategy types, by the kind of workload the section deploys
DAEMONSET_STRATEGIES = ("RollingUpdate", "OnDelete")
DEPLOYMENT_STRATEGIES = ("RollingUpdate", "Recreate")
INT_OR_PERCENT = re.compile(r"[0-9]{1,9}%?\Z", re.ASCII)
USER_ADDON_URL = re.compile(r"https?://", re.ASCII)


def network_plugin(config: ClusterConfig, findings: Findings) -> None:
    plugin = config.network.plugin
    path = ("network", "plugin")
    if plugin in RKE_ONLY_PLUGINS:
        findings.error(
            path,
            f"the {plugin} network plugin is not supported by rke-py",
            f"use one of {', '.join(NETWORK_PLUGINS)} (canal is RKE's default)",
        )
    elif plugin not in NETWORK_PLUGINS:
        hint = f"use one of {', '.join(NETWORK_PLUGINS)}" + did_you_mean(plugin, NETWORK_PLUGINS)
        findings.error(path, f'unknown network plugin "{plugin}"', hint)
    if plugin == "flannel" and config.network.mtu:
        findings.error(("network", "mtu"), "network.mtu cannot be set with the flannel plugin", "remove mtu")
    services = config.services
    ranges = {
        ("services", "kube-api", "service_cluster_ip_range"): services.kube_api.service_cluster_ip_range,
        ("services", "kube-controller", "cluster_cidr"): services.kube_controller.cluster_cidr,
    }
    dual = [where for where, value in ranges.items() if _dual_stack(value)]
    if plugin in NETWORK_PLUGINS and plugin != "calico" and dual:
        findings.error(
            dual[0],
            f"dual-stack ranges need the calico network plugin: RKE refuses them with {plugin}, which does "
            "not support IPv6",
            "set network.plugin: calico, or give one IPv4 range",
        )
    if plugin == "flannel" and config.network.tolerations:
        findings.warning(
            ("network", "tolerations"),
            "network.tolerations are not used by the flannel plugin: it tolerates every taint, as in RKE",
            "remove them",
        )
    if plugin in UNUSED_NETWORK_OPTIONS:
        for key, why in UNUSED_NETWORK_OPTIONS[plugin].items():
            if config.network.options.get(key) != NETWORK_OPTIONS[plugin][key]:
                message = f"network.options.{key} is not used: {why}"
                findings.warning(("network", "options", key), message, "remove it")
    for key in (f"{plugin}_flannel_backend_vni", "flannel_backend_vni"):  # RKE reads them as numbers
        value = config.network.options.get(key)
        if value is not None and not re.fullmatch(r"[0-9]{1,8}", value):
            message = f'network.options.{key} "{value}" is not a number'
            findings.error(("network", "options", key), message, "use the VXLAN network identifier, e.g. 1")
    for key in (f"{plugin}_flannel_backend_port", "flannel_backend_port"):
        if key in config.network.options:
            check_port(config.network.options[key], ("network", "options", key), findings)


def providers(config: ClusterConfig, findings: Findings) -> None:
    for section, choices in ADDON_PROVIDERS.items():
        provider = getattr(config, section).provider
        if provider not in choices:
            findings.error(
                (section, "provider"),
                f'unknown {section} provider "{provider}"',
                f"use one of {', '.join(choices)}" + did_you_mean(str(provider), choices),
            )
    if config.dns.provider == "none" and config.dns.nodelocal and config.dns.nodelocal.ip_address:
        findings.error(
            ("dns", "nodelocal"),
            "NodeLocal DNSCache caches a cluster DNS, and dns.provider is none",
            "use provider: coredns, or remove nodelocal",
        )


def ignored(config: ClusterConfig, findings: Findings) -> None:
    """Add-on keys rke-py reads but does not act on: said at their line, never silently dropped."""
    hint = "rke-py does not use it; remove it"
    used = DNS_OPTIONS.get(config.dns.provider, ())
    for key in config.dns.options:
        if key not in used:
            message = f"dns.options.{key} is not used by the {config.dns.provider} add-on"
            findings.warning(("dns", "options", key), message, hint)
    for key, value in config.network.extra.items():
        for sub in value if isinstance(value, dict) else {}:
            if (key, sub) not in PROVIDER_OPTIONS:
                findings.warning(("network", key, sub), f"network.{key}.{sub} is not used by rke-py", hint)
    calico_cloud = config.network.options.get("calico_cloud_provider", "none")
    if config.network.plugin == "calico" and calico_cloud not in ("", "none"):
        given = ("network", "calico_network_provider", "cloud_provider")
        path = given if given in findings.positions else ("network", "options", "calico_cloud_provider")
        findings.warning(
            path,
            f'calico cloud_provider "{excerpt(calico_cloud)}" changes nothing: RKE\'s calico manifests for '
            "Kubernetes v1.27 and later do not read it",
            "remove it; calico's IP-in-IP and VXLAN settings are the same on every cloud",
        )


def images(config: ClusterConfig, findings: Findings) -> None:
    """Every add-on that is on needs its images: known for the version, or named in system_images
    (said once the version and the core images are right, so one mistake is one message)."""
    core = all(getattr(config.system_images, key) for key in kdm.REQUIRED_IMAGES)
    if kdm.parse_version(config.kubernetes_version) is None or not core:
        return
    needed = {
        ("network", "plugin"): {
            "canal": ("canal_node", "canal_cni", "canal_flannel", "canal_controllers"),
            "flannel": ("flannel", "flannel_cni"),
            "calico": ("calico_node", "calico_cni", "calico_controllers"),
        }.get(config.network.plugin, ()),
        ("dns", "provider"): {
            "coredns": ("coredns", "coredns_autoscaler"),
            "kube-dns": ("kubedns", "dnsmasq", "kubedns_sidecar", "kubedns_autoscaler"),
        }.get(config.dns.provider, ()),
        ("dns", "nodelocal"): ("nodelocal",)
        if config.dns.nodelocal and config.dns.nodelocal.ip_address
        else (),
        ("monitoring", "provider"): ("metrics_server",)
        if config.monitoring.provider == "metrics-server"
        else (),
        ("ingress", "provider"): ("ingress", "ingress_webhook") if config.ingress.provider == "nginx" else (),
        ("ingress", "default_backend"): ("ingress_backend",)
        if config.ingress.provider == "nginx" and config.ingress.default_backend
        else (),
    }
    for path, keys in needed.items():
        missing = [key for key in keys if not getattr(config.system_images, key)]
        if missing:
            findings.error(
                path,
                f"{dotted(path)}{'' if path in findings.positions else ' (the default)'}: "
                f"rke-py has no add-on images for {config.kubernetes_version}; "
                f"system_images must name {', '.join(missing)}",
                "set them under system_images, or turn the add-on off",
            )


def scheduling(config: ClusterConfig, findings: Findings) -> None:
    """Tolerations and update strategies, where each section has them."""
    workloads = {
        "network": DAEMONSET_STRATEGIES,
        "dns": DEPLOYMENT_STRATEGIES,
        "ingress": DAEMONSET_STRATEGIES,
        "monitoring": DEPLOYMENT_STRATEGIES,
    }
    for section, strategies in workloads.items():
        settings = getattr(config, section)
        for index, toleration in enumerate(settings.tolerations):
            _toleration(toleration, (section, "tolerations", index), findings)
        _update_strategy(settings.update_strategy, (section, "update_strategy"), strategies, findings)
    if config.dns.nodelocal:
        strategy = config.dns.nodelocal.update_strategy
        _update_strategy(strategy, ("dns", "nodelocal", "update_strategy"), DAEMONSET_STRATEGIES, findings)


def _toleration(toleration: Toleration, path: Path, findings: Findings) -> None:
    operator = toleration.operator or "Equal"
    if operator not in TOLERATION_OPERATORS:
        findings.error((*path, "operator"), f'toleration operator "{operator}" is not Exists or Equal', "")
    if operator == "Exists" and toleration.value:
        findings.error((*path, "value"), "a toleration with operator Exists has no value", "remove value")
    if not toleration.key and operator != "Exists":
        findings.error(path, "a toleration without a key needs operator: Exists", "add a key")
    if toleration.effect and toleration.effect not in TAINT_EFFECTS:
        hint = f"use one of {', '.join(TAINT_EFFECTS)}" + did_you_mean(toleration.effect, TAINT_EFFECTS)
        findings.error((*path, "effect"), f'taint effect "{toleration.effect}" is unknown', hint)
    if toleration.tolerationSeconds is not None and toleration.effect != "NoExecute":
        findings.error((*path, "tolerationSeconds"), "tolerationSeconds applies only to effect NoExecute", "")


def _update_strategy(
    strategy: dict[str, Any], path: Path, kinds: tuple[str, ...], findings: Findings
) -> None:
    """RKE's `{strategy, rollingUpdate: {maxUnavailable, maxSurge}}`, checked as Kubernetes would."""
    for key in strategy:
        if key not in ("strategy", "rollingUpdate"):
            findings.error(
                (*path, key), f'unknown key "{key}" in {dotted(path)}', "use strategy and rollingUpdate"
            )
    kind = strategy.get("strategy", "RollingUpdate")
    if kind not in kinds:
        findings.error(
            (*path, "strategy"), f'update strategy "{excerpt(kind)}" is not one of {", ".join(kinds)}', ""
        )
    rolling = strategy.get("rollingUpdate")
    if rolling is None:
        return
    if not isinstance(rolling, dict) or kind != "RollingUpdate":
        findings.error(
            (*path, "rollingUpdate"), "rollingUpdate must be a mapping, with strategy RollingUpdate", ""
        )
        return
    allowed = ("maxUnavailable", "maxSurge")
    for key, value in rolling.items():
        where = (*path, "rollingUpdate", key)
        if key not in allowed:
            findings.error(where, f'unknown key "{key}" in rollingUpdate', "use maxUnavailable or maxSurge")
        elif isinstance(value, bool) or not INT_OR_PERCENT.match(str(value)):
            findings.error(
                where, f'{key} "{excerpt(value)}" is not a count or a percentage', 'e.g. 1 or "25%"'
            )


def dns(config: ClusterConfig, findings: Findings) -> None:
    for index, cidr in enumerate(config.dns.reversecidrs):
        try:
            ipaddress.ip_network(cidr)
        except ValueError:
            findings.error(
                ("dns", "reversecidrs", index), f'"{excerpt(cidr)}" is not a network', "e.g. 10.0.0.0/8"
            )
    nodelocal = config.dns.nodelocal
    if nodelocal and nodelocal.ip_address:
        try:
            ipaddress.IPv4Address(nodelocal.ip_address)
        except ValueError:
            findings.error(
                ("dns", "nodelocal", "ip_address"),
                f'"{excerpt(nodelocal.ip_address)}" is not an IPv4 address',
                "use a link-local address such as 169.254.20.10",
            )
    params = config.dns.linear_autoscaler_params
    if params is None:
        return
    base = ("dns", "linear_autoscaler_params")
    for key in ("cores_per_replica", "nodes_per_replica"):
        if getattr(params, key) < 0:
            findings.error((*base, key), f"{key} cannot be negative", "e.g. 128 cores or 4 nodes per replica")
    if not (params.cores_per_replica or params.nodes_per_replica):
        findings.error(
            base,
            "the autoscaler needs cores_per_replica or nodes_per_replica",
            "e.g. cores_per_replica: 128 and nodes_per_replica: 4, RKE's defaults",
        )
    if params.min < 0 or params.max < 0 or (params.max and params.max < params.min):
        findings.error((*base, "max"), "max must be 0 (no limit) or at least min", "")


def ingress(config: ClusterConfig, findings: Findings) -> None:
    settings = config.ingress
    if settings.network_mode not in INGRESS_NETWORK_MODES:
        hint = f"use one of {', '.join(INGRESS_NETWORK_MODES)}"
        findings.error(
            ("ingress", "network_mode"), f'network_mode "{settings.network_mode}" is unknown', hint
        )
    for key in ("http_port", "https_port"):
        if not 1 <= getattr(settings, key) <= 65535:
            findings.error(("ingress", key), f"ingress.{key} must be 1 to 65535", "")
    for key, default in (("http_port", INGRESS_HTTP_PORT), ("https_port", INGRESS_HTTPS_PORT)):
        if getattr(settings, key) != default and settings.network_mode != "hostPort":
            findings.warning(
                ("ingress", key),
                f"ingress.{key} is used with network_mode hostPort only (as in RKE): the controller listens "
                f"on {default}",
                f"to move it, set ingress.extra_args.{key.replace('_', '-')}",
            )
    if not settings.default_backend:
        for key in ("tolerations", "default_http_backend_priority_class_name"):
            if getattr(settings, key):
                findings.warning(
                    ("ingress", key),
                    f"ingress.{key} is for the default backend, which is off (the controller tolerates "
                    "every taint, as in RKE)",
                    "set ingress.default_backend: true, or remove the key",
                )
    for flag in ("http-port", "https-port"):  # the controller's ports in its pod (RKE's template)
        if flag in settings.extra_args:
            check_port(settings.extra_args[flag], ("ingress", "extra_args", flag), findings)
    if settings.dns_policy and settings.dns_policy not in DNS_POLICIES:
        hint = f"use one of {', '.join(DNS_POLICIES)}" + did_you_mean(settings.dns_policy, DNS_POLICIES)
        findings.error(("ingress", "dns_policy"), f'dns_policy "{settings.dns_policy}" is unknown', hint)
    for key in ("extra_envs", "extra_volumes", "extra_volume_mounts"):
        for index, item in enumerate(getattr(settings, key)):
            if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
                findings.error(
                    ("ingress", key, index), f"ingress.{key}[{index}] needs a name", "as in a Pod spec"
                )
    if settings.extra_volume_mounts and not all(
        isinstance(m, dict) and m.get("mountPath") for m in settings.extra_volume_mounts
    ):
        findings.error(("ingress", "extra_volume_mounts"), "every volume mount needs a mountPath", "")


def user_addons(config: ClusterConfig, findings: Findings) -> None:
    """Inline add-ons are checked here, document by document; included files when `up` reads them."""
    if config.addons.strip():
        line = findings.where(("addons",))[0]
        findings.errors += user.inline_addons(config.addons, findings.source, line)[1]
    for index, entry in enumerate(config.addons_include):
        path = ("addons_include", index)
        if "://" in entry and not USER_ADDON_URL.match(entry):
            findings.error(path, f'"{excerpt(entry)}" is neither a file nor an http(s) URL', "")
        elif not entry.strip():
            findings.error(path, "an empty addons_include entry", "remove it")


def _dual_stack(ranges: str) -> bool:
    """Whether `ranges` is an IPv4 and an IPv6 range (what is malformed is reported where ranges are)."""
    try:
        versions = [ipaddress.ip_network(part.strip(), strict=False).version for part in ranges.split(",")]
    except ValueError:
        return False
    return sorted(versions) == [4, 6]
