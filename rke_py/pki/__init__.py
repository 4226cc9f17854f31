"""CA and certificates (cryptography) and kubeconfig rendering.

Knows nothing about hosts or plans: config and the state's bundle in, certificates out. Which files a
node receives is planning (`rke_py.plan.cert_files`).
"""

from rke_py.pki.bundle import Bundle, build_bundle, etcd_cert_name
from rke_py.pki.certs import CertificateError, CertKeyPair
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
]
