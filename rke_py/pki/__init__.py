"""CA and certificates (cryptography), which files each node gets, and kubeconfig rendering.

Knows nothing about hosts: config and the state's bundle in, certificates and FileSpecs out.
"""

from rke_py.pki.bundle import Bundle, build_bundle, etcd_cert_name
from rke_py.pki.certs import CertificateError, CertKeyPair
from rke_py.pki.files import node_files
from rke_py.pki.kubeconfig import admin_kubeconfig, component_kubeconfig, default_server
from rke_py.pki.paths import cert_path, key_path, kubeconfig_path

__all__ = [
    "Bundle",
    "CertKeyPair",
    "CertificateError",
    "admin_kubeconfig",
    "build_bundle",
    "cert_path",
    "component_kubeconfig",
    "default_server",
    "etcd_cert_name",
    "key_path",
    "kubeconfig_path",
    "node_files",
]
