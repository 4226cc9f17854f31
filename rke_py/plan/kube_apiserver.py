"""kube-apiserver (`BuildKubeAPIProcess`, flags of KDM `getKubeAPIOptions124`) and the files it reads.

RKE writes `/etc/kubernetes/admission.yaml` and `/etc/kubernetes/audit-policy.yaml` on controlplane nodes and
puts their md5 into the container's env, so a changed file recreates the container; rke-py does the same
(the files' content hash is in the spec hash as well).
"""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.paths import cert_path, key_path
from rke_py.plan import cloud_provider, encryption
from rke_py.plan.common import (
    CA,
    KUBE_DIR,
    SIDEKICK,
    TLS_CIPHER_SUITES,
    binds,
    ca_file,
    cert_files,
    deployed,
    env,
    etcd_servers,
    host_path,
    is_rbac,
    k8s_entrypoint,
    k8s_minor,
    to_yaml,
)
from rke_py.plan.memo import once
from rke_py.plan.model import ContainerSpec, FileSpec

NAME = "kube-apiserver"
ADMISSION_FILE = "/etc/kubernetes/admission.yaml"
AUDIT_POLICY_FILE = "/etc/kubernetes/audit-policy.yaml"
AUDIT_DIR = "/var/log/kube-audit"
AUTHN_WEBHOOK_FILE = "/etc/kubernetes/kube-api-authn-webhook.yaml"
# The service-account issuer RKE gives its clusters, and rke-py too: when `rke up` takes a cluster back, its
# apiservers accept `rke` alone, and a pod holding a token signed otherwise loses the API until its kubelet
# renews the token (most of an hour). A URL issuer, which OIDC discovery needs, is asked for in cluster.yml
# the same way for both tools (README, "Taking over a cluster RKE built").
RKE_ISSUER = "rke"
ADMISSION_PLUGINS = (
    "NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,"
    "MutatingAdmissionWebhook,ValidatingAdmissionWebhook,ResourceQuota,NodeRestriction,Priority,"
    "TaintNodesByCondition,PersistentVolumeClaimResize"
)
AUDIT_DEFAULTS: dict[str, Any] = {
    "max_age": 30,
    "max_backup": 10,
    "max_size": 100,
    "path": f"{AUDIT_DIR}/audit-log.json",
    "format": "json",
    "policy": {"apiVersion": "audit.k8s.io/v1", "kind": "Policy", "rules": [{"level": "Metadata"}]},
}
EVENT_RATE_LIMIT_DEFAULT = {
    "apiVersion": "eventratelimit.admission.k8s.io/v1alpha1",
    "kind": "Configuration",
    "limits": [{"type": "Server", "qps": 5000, "burst": 20000}],
}
RESTRICTED_EXEMPT_NAMESPACES = ["ingress-nginx", "kube-system"]


def audit_config(config: ClusterConfig) -> dict[str, Any] | None:
    """The effective audit log configuration; None when the user turned it off (it is on by default)."""
    audit = config.services.kube_api.audit_log or {}
    if audit.get("enabled") is False:
        return None
    return {**AUDIT_DEFAULTS, **(audit.get("configuration") or {})}


def pod_security(config: ClusterConfig) -> dict[str, Any]:
    """PodSecurity admission defaults: privileged unless `pod_security_configuration: restricted`."""
    level = config.services.kube_api.pod_security_configuration or "privileged"
    version = "v1" if k8s_minor(config) >= 25 else "v1beta1"
    defaults = {"enforce": level, "enforce-version": "latest"}
    namespaces: list[str] = []
    if level == "restricted":
        defaults |= {"audit": level, "audit-version": "latest", "warn": level, "warn-version": "latest"}
        namespaces = RESTRICTED_EXEMPT_NAMESPACES
    return {
        "apiVersion": f"pod-security.admission.config.k8s.io/{version}",
        "kind": "PodSecurityConfiguration",
        "defaults": defaults,
        "exemptions": {"namespaces": namespaces} if namespaces else {},  # Go leaves empty lists out
    }


def admission_config(config: ClusterConfig) -> dict[str, Any] | None:
    """The AdmissionConfiguration rke-py writes; None when the user points the apiserver at their own."""
    api = config.services.kube_api
    if "admission-control-config-file" in api.extra_args:
        return None
    if api.admission_configuration:
        return api.admission_configuration
    event_rate_limit = (api.event_rate_limit or {}).get("configuration") or EVENT_RATE_LIMIT_DEFAULT
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {"name": "EventRateLimit", "path": "", "configuration": event_rate_limit},
            {"name": "PodSecurity", "path": "", "configuration": pod_security(config)},
        ],
    }


def audit_policy(audit: dict[str, Any]) -> dict[str, Any]:
    """The audit policy as RKE writes it, an auditv1.Policy: empty fields left out (every field of a rule
    is `omitempty`), its metadata always there."""
    policy = omit_empty(audit["policy"])
    return {**policy, "metadata": {"creationTimestamp": None, **(policy.get("metadata") or {})}}


def omit_empty(value: Any) -> Any:
    """`value` without empty strings, lists and maps, at any depth, as Go's `omitempty` writes them."""
    if isinstance(value, dict):
        kept = {k: omit_empty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in ("", [], {}, None)}
    if isinstance(value, list):
        return [omit_empty(v) for v in value]
    return value


def config_documents(config: ClusterConfig) -> dict[str, bytes]:
    """admission.yaml and audit-policy.yaml as RKE marshals them (what its checksums are taken over), by
    their path on the host; made once a plan (the YAML is slow to write, and every apiserver reads it)."""
    return dict(once((NAME, "documents"), lambda: _documents(config)))


def _documents(config: ClusterConfig) -> dict[str, bytes]:
    out = {}
    admission = admission_config(config)
    if admission is not None:
        out[host_path(config, ADMISSION_FILE)] = to_yaml(admission, go=True)
    audit = audit_config(config)
    if audit is not None:
        out[host_path(config, AUDIT_POLICY_FILE)] = to_yaml(audit_policy(audit), go=True)
    return out


def files(config: ClusterConfig) -> list[FileSpec]:
    """admission.yaml, audit-policy.yaml and the encryption config, for every controlplane node."""
    documents = [FileSpec(path, deployed(text)) for path, text in config_documents(config).items()]
    return [*documents, *encryption.files(config)]


def webhook_files(config: ClusterConfig) -> list[FileSpec]:
    """The token webhook's kubeconfig, which RKE writes on every node when a webhook is configured."""
    webhook = config.authentication.webhook
    if webhook is None:
        return []
    return [FileSpec(host_path(config, AUTHN_WEBHOOK_FILE), deployed(webhook.config_file), secret=True)]


def admission_plugins(config: ClusterConfig) -> str:
    api = config.services.kube_api
    plugins = ADMISSION_PLUGINS
    if api.always_pull_images:
        plugins += ",AlwaysPullImages"
    if (api.event_rate_limit or {}).get("enabled"):
        plugins += ",EventRateLimit"
    return plugins


def audit_flags(config: ClusterConfig) -> dict[str, str]:
    audit = audit_config(config)
    if audit is None:
        return {}
    return {
        "audit-log-format": str(audit["format"]),
        "audit-log-maxage": str(audit["max_age"]),
        "audit-log-maxbackup": str(audit["max_backup"]),
        "audit-log-maxsize": str(audit["max_size"]),
        "audit-log-path": str(audit["path"]),
        "audit-policy-file": AUDIT_POLICY_FILE,
    }


def etcd_client(config: ClusterConfig, node: Node) -> dict[str, str]:
    """How the apiserver reaches etcd: the cluster's own members with kube-node, or external_urls."""
    etcd = config.services.etcd
    if etcd.external_urls:
        return {
            "etcd-servers": ",".join(etcd.external_urls),
            "etcd-prefix": etcd.path or "/registry",
            "etcd-cafile": cert_path("kube-etcd-client-ca"),
            "etcd-certfile": cert_path("kube-etcd-client"),
            "etcd-keyfile": key_path("kube-etcd-client"),
        }
    return {
        "etcd-servers": etcd_servers(config, node),
        "etcd-prefix": "/registry",
        "etcd-cafile": cert_path(CA),
        "etcd-certfile": cert_path("kube-node"),
        "etcd-keyfile": key_path("kube-node"),
    }


def flags(config: ClusterConfig, node: Node) -> dict[str, str | tuple[str, ...]]:
    api = config.services.kube_api
    out: dict[str, str | tuple[str, ...]] = {
        "allow-privileged": "true",
        "anonymous-auth": "false",
        "api-audiences": "unknown",
        "bind-address": "0.0.0.0",
        "client-ca-file": cert_path(CA),
        "enable-admission-plugins": admission_plugins(config),
        "kubelet-client-certificate": cert_path("kube-apiserver"),
        "kubelet-client-key": key_path("kube-apiserver"),
        "kubelet-preferred-address-types": "InternalIP,ExternalIP,Hostname",
        "profiling": "false",
        "proxy-client-cert-file": cert_path("kube-apiserver-proxy-client"),
        "proxy-client-key-file": key_path("kube-apiserver-proxy-client"),
        "requestheader-allowed-names": "kube-apiserver-proxy-client",
        "requestheader-client-ca-file": cert_path("kube-apiserver-requestheader-ca"),
        "requestheader-extra-headers-prefix": "X-Remote-Extra-",
        "requestheader-group-headers": "X-Remote-Group",
        "requestheader-username-headers": "X-Remote-User",
        "runtime-config": "authorization.k8s.io/v1beta1=true",
        "secure-port": "6443",
        "service-account-issuer": RKE_ISSUER,
        "service-account-key-file": key_path("kube-service-account-token"),
        "service-account-lookup": "true",
        "service-account-signing-key-file": key_path("kube-service-account-token"),
        "service-cluster-ip-range": api.service_cluster_ip_range,
        "service-node-port-range": api.service_node_port_range,
        "storage-backend": "etcd3",
        "tls-cert-file": cert_path("kube-apiserver"),
        "tls-private-key-file": key_path("kube-apiserver"),
        "tls-cipher-suites": TLS_CIPHER_SUITES,
        **etcd_client(config, node),
        **cloud_provider.flags(config),
        **audit_flags(config),
        **encryption.flags(config),
    }
    if is_ip(node.internal_address):
        out["advertise-address"] = node.internal_address
    if admission_config(config) is not None:
        out["admission-control-config-file"] = ADMISSION_FILE
    if is_rbac(config):
        out["authorization-mode"] = "Node,RBAC"
    if config.authentication.webhook is not None:
        out["authentication-token-webhook-config-file"] = AUTHN_WEBHOOK_FILE
        out["authentication-token-webhook-cache-ttl"] = config.authentication.webhook.cache_timeout
    if config.services.kubelet.generate_serving_certificate:
        out["kubelet-certificate-authority"] = cert_path(CA)
    return out


def is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def checksum_env(config: ClusterConfig) -> list[str]:
    """RKE's md5 env vars over the admission and audit files, so RKE itself sees the same container."""
    documents = config_documents(config)
    pairs = (
        ("RKE_ADMISSION_CONFIG_CHECKSUM", host_path(config, ADMISSION_FILE)),
        ("RKE_AUDITLOG_CONFIG_CHECKSUM", host_path(config, AUDIT_POLICY_FILE)),
    )
    own = [f"{var}={md5(documents[path])}" for var, path in pairs if path in documents]
    return own + cloud_provider.checksum_env(config)


def md5(content: bytes) -> str:
    return hashlib.md5(content, usedforsecurity=False).hexdigest()


def read_files(config: ClusterConfig) -> tuple[str, ...]:
    """Host paths of every managed file the apiserver reads."""
    prefix = config.prefix_path or "/"
    etcd_client_certs = (
        (*cert_files(config, "kube-etcd-client"), cert_path("kube-etcd-client-ca", prefix))
        if config.services.etcd.external_urls
        else cert_files(config, "kube-node")
    )
    return (
        ca_file(config),
        *cert_files(config, "kube-apiserver", "kube-apiserver-proxy-client"),
        key_path("kube-service-account-token", prefix),
        cert_path("kube-apiserver-requestheader-ca", prefix),
        *etcd_client_certs,
        *(f.path for f in files(config) if f.content),  # not the emptied encryption config
        *cloud_provider.read_files(config),
        *(f.path for f in webhook_files(config)),
    )


def container(config: ClusterConfig, node: Node) -> ContainerSpec:
    service = config.services.kube_api
    base_binds = [f"{host_path(config, KUBE_DIR)}:{KUBE_DIR}:z"]
    if audit_config(config) is not None:
        base_binds.append(f"{host_path(config, AUDIT_DIR)}:{AUDIT_DIR}")
    return ContainerSpec(
        name=NAME,
        image=config.system_images.kubernetes,
        entrypoint=k8s_entrypoint(NAME, flags(config, node), service),
        env=env(checksum_env(config), service),
        binds=binds(base_binds, service),
        volumes_from=(SIDEKICK,),
        files=read_files(config),
    )
