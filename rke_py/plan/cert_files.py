"""Which certificate files each node gets (RKE `getCertKeys`), as FileSpecs. Planning, so it lives here:
`pki` makes certificates and knows nothing of nodes' files.

Only what a node's roles need: the CA's key stays on controlplane nodes, etcd keys on etcd nodes, and
kube-admin never leaves the workstation. Modes follow RKE's cert-deployer: 0600, except kube-ca.pem 0644.
"""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.bundle import (
    CA,
    ETCD_CLIENT,
    ETCD_CLIENT_CA,
    KUBE_APISERVER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_NODE,
    KUBE_PROXY,
    KUBE_SCHEDULER,
    KUBELET_PREFIX,
    PROXY_CLIENT,
    REQUESTHEADER_CA,
    SERVICE_ACCOUNT,
    Bundle,
    cert_name_for_host,
    etcd_cert_name,
    has_kubeconfig,
)
from rke_py.pki.kubeconfig import component_kubeconfig
from rke_py.pki.paths import cert_path, key_path, kubeconfig_path
from rke_py.plan.model import FileSpec

CONTROLPLANE_CERTS = (
    KUBE_APISERVER,
    SERVICE_ACCOUNT,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    ETCD_CLIENT,
    ETCD_CLIENT_CA,
    REQUESTHEADER_CA,
    PROXY_CLIENT,
)


def node_cert_names(config: ClusterConfig, bundle: Bundle, node: Node) -> list[str]:
    """The bundle entries `node` receives, in RKE's order."""
    names = [CA, KUBE_PROXY, KUBE_NODE]
    if config.services.kubelet.generate_serving_certificate:
        names += [cert_name_for_host(n, KUBELET_PREFIX) for n in config.nodes]
    if node.has("etcd"):
        names += [etcd_cert_name(n) for n in config.hosts("etcd")]
    if node.has("controlplane"):
        names += CONTROLPLANE_CERTS
    return [n for n in dict.fromkeys(names) if n in bundle]


def files_kind(node: Node) -> tuple[bool, bool]:
    """All that `node_files` reads of a node: nodes of one kind get the same files."""
    return node.has("etcd"), node.has("controlplane")


def node_files(config: ClusterConfig, bundle: Bundle, node: Node) -> list[FileSpec]:
    """Certificates, keys and component kubeconfigs for `node`, at host paths under `prefix_path`."""
    prefix = config.prefix_path or "/"
    files = []
    for name in node_cert_names(config, bundle, node):
        pair = bundle[name]
        # RKE's cert-deployer: every file 0600, but kube-ca for an etcd run as its own user
        mode = 0o644 if name == CA and config.services.etcd.uid and config.services.etcd.gid else 0o600
        files.append(FileSpec(cert_path(name, prefix), pair.cert_pem.encode(), mode))
        if pair.key_pem and (name != CA or node.has("controlplane")):
            files.append(FileSpec(key_path(name, prefix), pair.key_pem.encode(), 0o600, secret=True))
        if has_kubeconfig(name):
            files.append(FileSpec(kubeconfig_path(name, prefix), component_kubeconfig(name).encode(), 0o600))
    return files
