"""What every component module shares: flag rendering, binds, env and where files live.

RKE renders flags from a map (`--k=v`), so their order is Go's random map order; rke-py sorts them so the
spec hash is stable. Precedence is RKE's: built-in defaults < conditional flags < `extra_args`, then every
`extra_args_array` value appended as its own `--k=v`.
"""

from __future__ import annotations

import functools
import io
import posixpath
import re
from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.emitter import Emitter

from rke_py.config.schema import BaseService, ClusterConfig, Node
from rke_py.pki.paths import cert_path, key_path, kubeconfig_path
from rke_py.templating import hostport

CA = "kube-ca"
SIDEKICK = "service-sidekick"
ENTRYPOINT = "/opt/rke-tools/entrypoint.sh"  # from the sidekick's /opt/rke-tools volume
KUBE_DIR = "/etc/kubernetes"  # bind-mounted from <prefix_path>/etc/kubernetes in every container

# kube-apiserver and kubelet (`getKubeAPIOptions124`, `getKubeletOptions124`).
TLS_CIPHER_SUITES = ",".join(
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    )
)


def host_path(config: ClusterConfig, path: str) -> str:
    """`path` under the cluster's prefix_path, as RKE's `path.Join(prefix, path)`."""
    return _under(config.prefix_path or "/", path)


@functools.cache
def _under(prefix: str, path: str) -> str:
    return posixpath.join("/", prefix, path.lstrip("/"))


Flags = Mapping[str, "str | tuple[str, ...]"]  # a tuple: the flag given once per value, in that order


def render_flags(flags: Flags, service: BaseService) -> tuple[str, ...]:
    """`--k=v` for the merged flags (sorted), then one `--k=v` per `extra_args_array` value."""
    merged: dict[str, str | tuple[str, ...]] = {**flags, **service.extra_args}
    rendered = [
        f"--{key}={value}"
        for key in sorted(merged)
        for value in ((merged[key],) if isinstance(merged[key], str) else merged[key])
    ]
    for key in sorted(service.extra_args_array):
        rendered.extend(f"--{key}={value}" for value in service.extra_args_array[key])
    return tuple(rendered)


@functools.cache  # the same few binds on every node
def remove_z(bind: str) -> str:
    """Drop the SELinux `z` option from a bind, as RKE does for k8s >= 1.22 (`util.RemoveZFromBinds`)."""
    parts = bind.split(":")
    if len(parts) < 3:
        return bind
    options = [opt for opt in parts[-1].split(",") if opt.lower() != "z"]
    return ":".join(parts[:-1] + ([",".join(options)] if options else []))


def unique(items: Iterable[str]) -> tuple[str, ...]:
    """Items in first-seen order without repeats (RKE's `getUniqStringList`)."""
    return tuple(dict.fromkeys(items))


def binds(base: Iterable[str], service: BaseService) -> tuple[str, ...]:
    """Built-in binds without `z`, then the user's extra_binds verbatim."""
    return unique([*(remove_z(b) for b in base), *service.extra_binds])


def env(base: Iterable[str], service: BaseService) -> tuple[str, ...]:
    return unique([*base, *service.extra_env])


def is_rbac(config: ClusterConfig) -> bool:
    return config.authorization.mode in ("", "rbac")


def etcd_servers(config: ClusterConfig, node: Node) -> str:
    """Client URLs of the etcd members, the node's own first when it is one (`GetEtcdConnString`)."""
    own = node.internal_address
    members = [n.internal_address for n in config.hosts("etcd")]
    ordered = ([own] if own in members else []) + [ip for ip in members if ip != own]
    return ",".join(f"https://{hostport(ip, 2379)}" for ip in ordered)


def k8s_entrypoint(binary: str, flags: Flags, service: BaseService) -> tuple[str, ...]:
    """The rke-tools entrypoint (shared from the sidekick) running `binary` with its flags."""
    return (ENTRYPOINT, binary, *render_flags(flags, service))


def cert_files(config: ClusterConfig, *names: str) -> tuple[str, ...]:
    """Host paths of the certificate and key of each bundle name."""
    prefix = config.prefix_path or "/"
    return tuple(p for name in names for p in (cert_path(name, prefix), key_path(name, prefix)))


def ca_file(config: ClusterConfig) -> str:
    return cert_path(CA, config.prefix_path or "/")


def kubeconfig_file(config: ClusterConfig, name: str) -> str:
    return kubeconfig_path(name, config.prefix_path or "/")


class _GoEmitter(Emitter):
    """Quotes a string that needs quotes in double quotes, as go-yaml does, never in single ones."""

    def choose_scalar_style(self) -> Any:
        style = super().choose_scalar_style()
        return '"' if style == "'" else style


def to_yaml(data: object, *, go: bool = False) -> bytes:
    """Block-style YAML for the configuration files rke-py writes, keys in the order given; with `go`, as
    RKE writes a Kubernetes object (sigs.k8s.io/yaml: keys sorted, go-yaml's quotes), byte for byte, so the
    checksums RKE puts into a container's env come out the same."""
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = go  # type: ignore[assignment]  # typed None in ruamel
    if go:
        yaml.Emitter = _GoEmitter
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue().encode()


def deployed(content: str | bytes) -> bytes:
    """A configuration file as RKE's file-deployer leaves it on a host (`echo -e "$CONTENT" > file`): one
    more newline at the end. (echo -e also reads backslash escapes in the content; rke-py writes them as
    they are, so a backslash in a cloud config stays a backslash.)"""
    return (content.encode() if isinstance(content, str) else content) + b"\n"


def k8s_minor(config: ClusterConfig) -> int:
    """The Kubernetes minor version (`v1.30.4-rancher1-1` → 30); 0 when unknown."""
    match = re.match(r"v?1\.(\d+)", config.kubernetes_version)
    return int(match.group(1)) if match else 0
