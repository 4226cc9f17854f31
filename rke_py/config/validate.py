"""Checks on a loaded, defaulted ClusterConfig: what RKE rejects (`rke:cluster/validation.go`) and more.

Every finding names the key it is about (its position comes from `config.positions`), says what is wrong
and how to fix it. Node checks live in `validate_nodes`, address ranges in `validate_network`. rke-py is
stricter than RKE in rejecting `extra_args` keys written with leading dashes (RKE would pass `----v`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable

from cryptography import x509
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from rke_py.config import (
    kdm,
    validate_addons,
    validate_cloud,
    validate_encryption,
    validate_ignored,
    validate_network,
    validate_nodes,
    validate_values,
    values,
)
from rke_py.config.findings import Findings, Path, did_you_mean, dotted, excerpt
from rke_py.config.mapping import YAML_NAMES
from rke_py.config.schema import ClusterConfig, Services
from rke_py.pki.bundle import SERVICES as ROTATABLE
from rke_py.plan.registries import ecr_region

AUTH_STRATEGIES = ("x509", "webhook")
AUTHZ_MODES = ("rbac", "none")
POD_SECURITY = ("", "privileged", "restricted")
SERVICE_KEYS = {YAML_NAMES.get(f.name, f.name): f.name for f in dataclasses.fields(Services)}  # YAML -> field
MAX_UNAVAILABLE = re.compile(r"([0-9]{1,9})(%?)\Z", re.ASCII)


def validate(config: ClusterConfig, findings: Findings) -> None:
    """Report every problem in `config` to `findings`."""
    for check in CHECKS:
        check(config, findings)


# --- etcd ----------------------------------------------------------------------------------------------


def _external_etcd(config: ClusterConfig, findings: Findings) -> None:
    etcd = config.services.etcd
    path = ("services", "etcd", "external_urls")
    if not etcd.external_urls:
        return
    members = [f"nodes[{i}]" for i, node in enumerate(config.nodes) if node.has("etcd")]
    if members:
        findings.error(
            path,
            "internal and external etcd cannot be mixed: external_urls is set and "
            f"{', '.join(members)} {'has' if len(members) == 1 else 'have'} the etcd role",
            "remove the etcd role from those nodes, or remove services.etcd.external_urls",
        )
    missing = [key for key in ("ca_cert", "cert", "key", "path") if not getattr(etcd, key)]
    if missing:
        findings.error(
            path,
            f"external etcd needs ca_cert, cert, key and path; missing: {', '.join(missing)}",
            "add the PEM text of the CA, client certificate and key, and the etcd path prefix (e.g. /)",
        )


# --- network ranges --------------------------------------------------------------------------------------


# --- services' extra_* ------------------------------------------------------------------------------------


def _extras(config: ClusterConfig, findings: Findings) -> None:
    for key, attribute in SERVICE_KEYS.items():
        service = getattr(config.services, attribute)
        base: Path = ("services", key)
        for prefix in ("", "win_"):
            _extra_args(getattr(service, f"{prefix}extra_args"), (*base, f"{prefix}extra_args"), findings)
            _extra_env(getattr(service, f"{prefix}extra_env"), (*base, f"{prefix}extra_env"), findings)


def _extra_args(args: dict[str, str], path: Path, findings: Findings) -> None:
    for flag in args:
        if flag.startswith("-"):
            findings.error(
                (*path, flag),
                f'{dotted(path)} key "{flag}" starts with "-"',
                f'write the flag name without dashes ("{flag.lstrip("-")}: ..."); rke-py adds "--"',
            )


def _extra_env(env: list[str], path: Path, findings: Findings) -> None:
    for index, entry in enumerate(env):
        name, equals, _ = entry.partition("=")
        if not equals or values.env_name(name):
            findings.error(
                (*path, index), f'{dotted(path)} entry "{entry}" is not KEY=value', 'e.g. "HTTP_PROXY=..."'
            )


# --- cluster-wide settings --------------------------------------------------------------------------------


def _authentication(config: ClusterConfig, findings: Findings) -> None:
    strategy = config.authentication.strategy
    parts = strategy.split("|")
    path = ("authentication", "strategy")
    unknown = [part for part in parts if part not in AUTH_STRATEGIES]
    if unknown or "x509" not in parts:
        findings.error(
            path,
            f'authentication strategy "{strategy}" is not supported',
            'use "x509" or "x509|webhook"; x509 is always required',
        )
    webhook = config.authentication.webhook
    if webhook is None:
        return
    problem = values.duration(webhook.cache_timeout)
    if problem:
        findings.error(("authentication", "webhook", "cache_timeout"), f"cache_timeout {problem}")
    if not _names_a_server(webhook.config_file):
        findings.error(
            ("authentication", "webhook", "config_file"),
            "config_file is not a kubeconfig naming the webhook's server",
            "give a kubeconfig (YAML) whose clusters[0].cluster.server is the webhook's URL, "
            "or leave it empty for RKE's default (http://127.0.0.1:6440/v1/authenticate)",
        )


def _names_a_server(text: str) -> bool:
    """The webhook kubeconfig parses and its first cluster has a server URL (what the apiserver reads)."""
    try:
        data = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return False
    clusters = data.get("clusters") if isinstance(data, dict) else None
    first = clusters[0] if isinstance(clusters, list) and clusters and isinstance(clusters[0], dict) else {}
    server = (first.get("cluster") or {}).get("server") if isinstance(first.get("cluster"), dict) else None
    return isinstance(server, str) and server.startswith(("http://", "https://"))


def _authorization(config: ClusterConfig, findings: Findings) -> None:
    mode = config.authorization.mode
    if mode not in AUTHZ_MODES:
        hint = "use rbac or none" + did_you_mean(mode, AUTHZ_MODES)
        findings.error(("authorization", "mode"), f'authorization mode "{mode}" is not supported', hint)
    api = config.services.kube_api
    pss = api.pod_security_configuration
    if pss not in POD_SECURITY:
        findings.error(
            ("services", "kube-api", "pod_security_configuration"),
            f'pod_security_configuration "{pss}" is not supported',
            "use privileged or restricted",
        )
    if mode == "none" and "admission-control-config-file" not in api.extra_args:
        findings.error(
            ("authorization", "mode"),
            f'authorization mode "{mode}" leaves Pod Security admission without RBAC, which RKE refuses '
            "(it turns Pod Security admission on for every Kubernetes version rke-py runs)",
            "use mode rbac, or give the apiserver your own admission-control-config-file in "
            "services.kube-api.extra_args",
        )
    if api.pod_security_policy:
        findings.error(
            ("services", "kube-api", "pod_security_policy"),
            "PodSecurityPolicy was removed in Kubernetes v1.25; RKE refuses pod_security_policy: true from "
            "then on",
            "remove the key: Pod Security admission replaces it "
            "(services.kube-api.pod_security_configuration: privileged or restricted)",
        )


def _bastion(config: ClusterConfig, findings: Findings) -> None:
    bastion = config.bastion_host
    if bastion is None:
        return
    if not bastion.address:
        findings.error(
            ("bastion_host",), "bastion_host has a user but no address", 'add "address:" or remove it'
        )
    if not bastion.user:
        findings.error(("bastion_host",), "bastion_host has an address but no user", 'add "user: <SSH user>"')
    validate_nodes.check_port(bastion.port, ("bastion_host", "port"), findings)


def _version_and_images(config: ClusterConfig, findings: Findings) -> None:
    version = config.kubernetes_version
    path = ("kubernetes_version",)
    if kdm.parse_version(version) is None:
        example = f"v{version}" if kdm.parse_version(f"v{version}") else kdm.DEFAULT_K8S_VERSION
        findings.error(
            path, f'kubernetes_version "{version}" is not a version like vX.Y.Z', f'e.g. "{example}"'
        )
        return
    if kdm.system_images(version) is not None:
        return
    missing = [key for key in kdm.REQUIRED_IMAGES if not getattr(config.system_images, key)]
    if missing:
        findings.error(
            path,
            f"rke-py has no images for {version}; system_images must name {', '.join(missing)}",
            "set those keys under system_images, or use a version `rke-py config --list-version --all` lists",
        )


def _cri_dockerd(config: ClusterConfig, findings: Findings) -> None:
    version = kdm.parse_version(config.kubernetes_version)
    if version is None:
        return
    path = ("enable_cri_dockerd",)
    if config.enable_cri_dockerd is False and version[:2] >= (1, 24):
        findings.error(
            path,
            "enable_cri_dockerd is false, but Kubernetes v1.24 and later need cri-dockerd to use Docker",
            "remove enable_cri_dockerd (it defaults to true)",
        )
    if config.enable_cri_dockerd and version[:2] < (1, 21):
        findings.error(
            path, "enable_cri_dockerd needs Kubernetes v1.21 or later", "remove enable_cri_dockerd"
        )


def _registries(config: ClusterConfig, findings: Findings) -> None:
    for index, registry in enumerate(config.private_registries):
        if registry.url and registry.ecr_credential_plugin is not None and ecr_region(registry.url) is None:
            findings.error(
                ("private_registries", index, "ecr_credential_plugin"),
                f'"{excerpt(registry.url)}" is not an ECR registry: ecr_credential_plugin cannot log in',
                "ECR is ACCOUNT.dkr.ecr.REGION.amazonaws.com; remove the plugin for other registries",
            )
        if not registry.url:
            findings.error(
                ("private_registries", index),
                f"private_registries[{index}] has no url",
                'add "url: <registry HOST[:PORT]>"; without it the credentials would go to Docker Hub',
            )
    defaults = [i for i, registry in enumerate(config.private_registries) if registry.is_default]
    for index in defaults[1:]:
        findings.error(
            ("private_registries", index, "is_default"),
            f"more than one private registry has is_default: true (also private_registries[{defaults[0]}])",
            "mark only the registry that holds the system images as is_default",
        )


def _upgrade_strategy(config: ClusterConfig, findings: Findings) -> None:
    strategy = config.upgrade_strategy
    for key in ("max_unavailable_worker", "max_unavailable_controlplane"):
        value = getattr(strategy, key)
        match = MAX_UNAVAILABLE.match(value)
        if not match or (match[2] and int(match[1]) > 100):
            findings.error(
                ("upgrade_strategy", key),
                f'upgrade_strategy.{key} "{value}" is not a count or a percentage',
                'write a whole number ("1") or a percentage up to 100% ("10%")',
            )


DRAIN_FLAGS = ("force", "ignore_daemonsets", "delete_local_data", "delete_empty_dir_data")
DRAIN_NUMBERS = {"grace_period": (-1, 86400), "timeout": (1, 86400)}


def _drain_input(config: ClusterConfig, findings: Findings) -> None:
    """node_drain_input as kubectl drain takes it: flags are true/false, times whole seconds."""
    base = ("upgrade_strategy", "node_drain_input")
    for key, value in (config.upgrade_strategy.node_drain_input or {}).items():
        if key in DRAIN_FLAGS:
            if not isinstance(value, bool):
                findings.error((*base, key), f"node_drain_input.{key} must be true or false", "")
        elif key in DRAIN_NUMBERS:
            low, high = DRAIN_NUMBERS[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                findings.error((*base, key), f"node_drain_input.{key} must be {low} to {high} seconds", "")
        else:
            known = (*DRAIN_FLAGS, *DRAIN_NUMBERS)
            hint = f"use {', '.join(known)}" + did_you_mean(str(key), known)
            findings.error((*base, key), f'unknown key "{key}" in node_drain_input', hint)


def _numbers(config: ClusterConfig, findings: Findings) -> None:
    """Counts and sizes that RKE takes as integers but that only make sense in a range."""
    backup = config.services.etcd.backup_config
    checks = [
        (config.addon_job_timeout, ("addon_job_timeout",), 1, 24 * 3600, "seconds"),
        (config.network.mtu, ("network", "mtu"), 0, 65535, "bytes (0: the plugin's default)"),
    ]
    if backup is not None:
        base = ("services", "etcd", "backup_config")
        checks += [
            (backup.interval_hours, (*base, "interval_hours"), 0, 24 * 365, "hours"),
            (backup.retention, (*base, "retention"), 0, 100_000, "snapshots"),
            (backup.timeout, (*base, "timeout"), 0, 24 * 3600, "seconds"),
        ]
    for value, path, low, high, unit in checks:
        if not low <= value <= high:
            findings.error(path, f"{dotted(path)} {value} is out of range", f"use {low} to {high} {unit}")


def _s3(config: ClusterConfig, findings: Findings) -> None:
    """Where recurring snapshots go: a bucket is required, and a custom CA must be PEM certificates."""
    backup = config.services.etcd.backup_config
    s3 = backup.s3backupconfig if backup else None
    if s3 is None:
        return
    base = ("services", "etcd", "backup_config", "s3backupconfig")
    if not s3.bucket_name:
        findings.error(
            base, "s3backupconfig needs bucket_name", "add bucket_name: <the bucket for snapshots>"
        )
    if s3.custom_ca and pem_problem(s3.custom_ca):
        findings.error(
            (*base, "custom_ca"),
            f"{dotted((*base, 'custom_ca'))} {pem_problem(s3.custom_ca)}",
            "paste the PEM text of the CA (-----BEGIN CERTIFICATE----- ...)",
        )


def pem_problem(text: str) -> str | None:
    try:
        x509.load_pem_x509_certificates(text.encode())
    except ValueError:
        return "is not PEM certificate text"
    return None


# --- accepted but not acted on yet -------------------------------------------------------------------


def _etcd_user(config: ClusterConfig, findings: Findings) -> None:
    etcd = config.services.etcd
    if bool(etcd.uid) != bool(etcd.gid):
        findings.warning(
            ("services", "etcd", "uid" if etcd.uid else "gid"),
            "etcd runs as root unless both uid and gid are set (as in RKE)",
            "set both services.etcd.uid and services.etcd.gid, or neither",
        )


def _rotation(config: ClusterConfig, findings: Findings) -> None:
    """RKE's `rotate_certificates: {cacertificates, services}` and `rotate_encryption_key`: `up` rotates
    while they are there."""
    if config.rotate_encryption_key:
        findings.warning(
            ("rotate_encryption_key",),
            "every `rke-py up` replaces the secrets encryption key while rotate_encryption_key is true "
            "(as RKE's does)",
            "remove it once rotated, or use `rke-py encrypt rotate-key` instead",
        )
    given = config.rotate_certificates
    if given is None:
        return
    if not isinstance(given, dict):
        findings.error(("rotate_certificates",), "rotate_certificates must be a mapping")
        return
    for key in given:
        if key not in ("cacertificates", "services"):
            findings.error(
                ("rotate_certificates", key), f"rotate_certificates has no key {excerpt(str(key))}"
            )
    if not isinstance(given.get("cacertificates", False), bool):
        findings.error(("rotate_certificates", "cacertificates"), "cacertificates must be true or false")
    services = given.get("services") or []
    if not isinstance(services, list):
        findings.error(("rotate_certificates", "services"), "services must be a list")
        services = []
    for index, name in enumerate(services):
        if name not in ROTATABLE:
            findings.error(
                ("rotate_certificates", "services", index),
                f"{excerpt(str(name))} is not a service with certificates",
                "one of " + ", ".join(ROTATABLE),
            )
    findings.warning(
        ("rotate_certificates",),
        "every `rke-py up` rotates certificates while rotate_certificates is in cluster.yml (as RKE's does)",
        "remove it once rotated, or use `rke-py cert rotate` instead",
    )


CHECKS: tuple[Callable[[ClusterConfig, Findings], None], ...] = (
    validate_nodes.nodes,
    validate_nodes.duplicates,
    validate_nodes.loopback,
    validate_nodes.roles_present,
    validate_nodes.etcd_count,
    _external_etcd,
    validate_network.ranges,
    validate_network.node_port_range,
    _extras,
    validate_values.check_values,
    validate_addons.network_plugin,
    _authentication,
    _authorization,
    _bastion,
    _version_and_images,
    _cri_dockerd,
    _registries,
    _upgrade_strategy,
    _drain_input,
    _numbers,
    _s3,
    validate_addons.providers,
    validate_addons.images,
    validate_addons.scheduling,
    validate_addons.dns,
    validate_addons.ingress,
    validate_addons.user_addons,
    validate_addons.ignored,
    validate_cloud.cloud,
    validate_encryption.encryption,
    _etcd_user,
    _rotation,
    validate_ignored.ignored,
)
