"""Every value that reaches a host is checked as what it is: one table, one rule per key.

A row names keys by their YAML path, where `*` is every list item, every mapping value or every field of a
section, and `<key>` is a mapping's keys themselves. Only values the file holds are checked: RKE's defaults
are known to be good, and a default copied from a checked value (internal_address from address) would only
repeat its finding. An empty value is left to the checks that require it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from rke_py.config import values
from rke_py.config.findings import Findings, Path, dotted, excerpt
from rke_py.config.mapping import RENAMES, YAML_NAMES
from rke_py.config.schema import ClusterConfig

Check = Callable[[str], "str | None"]
SECRETS = {
    "password",
    "secret_key",
    "aws_secret_access_key",
    "aws_session_token",
}  # keys whose values a message never quotes

HOST_HINT = "write an IP address or a DNS name, e.g. 10.0.0.11 or node1.example.com"
PATH_HINT = "write an absolute path such as /opt/rke"
LABEL_HINT = "Kubernetes label syntax: [prefix/]name, e.g. app.example.com/tier"
FLAG_HINT = 'write the flag name as "v" for --v'
VALUE_HINT = "a flag value is one line of text"
IMAGE_HINT = (
    "e.g. rancher/hyperkube:v1.30.4-rancher1 or registry.example.com:5000/rancher/mirrored-coredns:1.11"
)

RULES: tuple[tuple[str, Check, str], ...] = (
    ("nodes.*.address", values.host, HOST_HINT),
    ("nodes.*.internal_address", values.host, HOST_HINT),
    ("nodes.*.user", values.user, "write the SSH login name, e.g. ubuntu"),
    (
        "nodes.*.docker_socket",
        values.host_path,
        "write the socket's absolute path, e.g. /var/run/docker.sock",
    ),
    ("nodes.*.labels.<key>", values.label_key, LABEL_HINT),
    ("nodes.*.labels.*", values.label_value, 'e.g. production; quote values such as "true"'),
    ("nodes.*.taints.*.key", values.label_key, LABEL_HINT),
    ("nodes.*.taints.*.value", values.label_value, "e.g. dedicated"),
    ("bastion_host.address", values.host, HOST_HINT),
    ("bastion_host.user", values.user, "write the SSH login name, e.g. ubuntu"),
    ("system_images.*", values.image, IMAGE_HINT),
    ("private_registries.*.url", values.registry, "e.g. registry.example.com:5000"),
    ("private_registries.*.user", values.text, "remove the control character"),
    ("private_registries.*.password", values.text, "remove the control character"),
    ("services.*.extra_args.<key>", values.flag_name, FLAG_HINT),
    ("services.*.extra_args.*", values.text, VALUE_HINT),
    ("services.*.extra_args_array.<key>", values.flag_name, FLAG_HINT),
    ("services.*.extra_args_array.*.*", values.text, VALUE_HINT),
    ("services.*.extra_binds.*", values.bind, 'e.g. "/var/lib/data:/data:z"'),
    ("services.*.extra_env.*", values.text, "an environment entry is one line, KEY=value"),
    ("services.etcd.path", values.host_path, 'write the etcd key prefix, e.g. "/"'),
    ("services.etcd.retention", values.duration, 'e.g. "72h"'),
    ("services.etcd.creation", values.duration, 'e.g. "12h"'),
    *(
        (f"services.etcd.backup_config.s3backupconfig.{key}", check, hint)
        for key, check, hint in (
            ("endpoint", values.endpoint, "e.g. s3.amazonaws.com or minio.example.com:9000"),
            ("bucket_name", values.bucket, "e.g. etcd-snapshots"),
            ("region", values.region, "e.g. us-east-1"),
            ("folder", values.folder, "e.g. clusters/production"),
            ("access_key", values.text, "remove the control character"),
            ("secret_key", values.text, "remove the control character"),
        )
    ),
    ("services.kubelet.cluster_domain", values.subdomain, "e.g. cluster.local"),
    ("services.kubelet.infra_container_image", values.image, IMAGE_HINT),
    ("authentication.sans.*", values.san, "write an IP address or a DNS name, e.g. api.example.com"),
    ("network.options.*", values.text, "an option value is one line of text"),
    *(
        rule
        for section in ("network", "dns", "ingress", "monitoring")
        for rule in (
            (f"{section}.node_selector.<key>", values.label_key, LABEL_HINT),
            (f"{section}.node_selector.*", values.label_value, "e.g. linux"),
        )
    ),
    ("dns.upstreamnameservers.*", values.nameserver, "e.g. 10.0.0.2 or 10.0.0.2:53"),
    ("dns.stubdomains.<key>", values.subdomain, "e.g. corp.example.com"),
    ("dns.stubdomains.*.*", values.nameserver, "e.g. 10.0.0.2"),
    ("dns.reversecidrs.*", values.text, "e.g. 10.0.0.0/8"),
    ("dns.nodelocal.ip_address", values.host, "e.g. 169.254.20.10"),
    ("ingress.extra_args.<key>", values.flag_name, FLAG_HINT),
    ("ingress.extra_args.*", values.text, VALUE_HINT),
    ("ingress.options.<key>", values.config_key, "e.g. proxy-body-size"),
    ("ingress.options.*", values.text, "an option value is one line of text"),
    ("ingress.dns_policy", values.text, "e.g. ClusterFirst"),
    ("monitoring.options.<key>", values.flag_name, FLAG_HINT),
    ("monitoring.options.*", values.text, VALUE_HINT),
    ("network.options.<key>", values.config_key, "e.g. canal_iface"),
    *(
        (f"{section}.tolerations.*.key", values.label_key, LABEL_HINT)
        for section in ("network", "dns", "ingress", "monitoring")
    ),
    *(
        (f"{section}.{key}", values.subdomain, "e.g. system-cluster-critical")
        for section, key in (
            ("monitoring", "metrics_server_priority_class_name"),
            ("ingress", "nginx_ingress_controller_priority_class_name"),
            ("ingress", "default_http_backend_priority_class_name"),
            ("dns.nodelocal", "node_local_dns_priority_class_name"),
        )
    ),
    ("addons_include.*", values.text, "write one file path or URL per item"),
    ("prefix_path", values.host_path, PATH_HINT),
    ("cluster_name", values.text, "remove the control character"),
    ("cri_dockerd_stream_server_address", values.listen_address, "rke-tools' default is 127.0.0.1"),
    ("cri_dockerd_stream_server_port", values.port, "e.g. 10010, rke-tools' default"),
)


def check_values(config: ClusterConfig, findings: Findings) -> None:
    for pattern, check, hint in RULES:
        keys = pattern.endswith("<key>")
        for path, value in values_at(config, tuple(pattern.split("."))):
            problem = value and path in findings.positions and check(value)
            if problem:
                what = f"{dotted(path[:-1])} key" if keys else dotted(path)
                shown = "(not shown)" if path[-1] in SECRETS else f'"{excerpt(value)}"'
                findings.error(path, f"{what} {shown} {problem}", hint)


def values_at(node: Any, pattern: tuple[str, ...], path: Path = ()) -> Iterator[tuple[Path, str]]:
    """(path, value) of every string in `node` that `pattern` names; see the module docstring."""
    if not pattern:
        if isinstance(node, str):
            yield path, node
        return
    head, rest = pattern[0], pattern[1:]
    if head == "<key>":
        if isinstance(node, dict):
            for key in node:
                yield (*path, key), str(key)
        return
    for key, child in _children(node, head):
        yield from values_at(child, rest, (*path, key))


def _children(node: Any, head: str) -> Iterator[tuple[Any, Any]]:
    if head != "*":
        if isinstance(node, dict):
            if head in node:
                yield head, node[head]
        elif node is not None:
            yield head, getattr(node, RENAMES.get(head, head))
    elif isinstance(node, list):
        yield from enumerate(node)
    elif isinstance(node, dict):
        yield from node.items()
    elif dataclasses.is_dataclass(node):
        for field in dataclasses.fields(node):
            yield YAML_NAMES.get(field.name, field.name), getattr(node, field.name)
