"""Where certificate files live (`rke:pki/util.go` `GetCertPath`, `GetKeyPath`, `GetConfigPath`).

The host directory `<prefix_path>/etc/kubernetes` is bind-mounted at `/etc/kubernetes` in every container,
so container-side paths always use the default prefix "/" and host-side paths use `prefix_path`.
"""

from __future__ import annotations

import posixpath

SSL_DIR = "etc/kubernetes/ssl"


def ssl_dir(prefix: str = "/") -> str:
    return posixpath.join("/", prefix or "/", SSL_DIR)


def cert_path(name: str, prefix: str = "/") -> str:
    return posixpath.join(ssl_dir(prefix), f"{name}.pem")


def key_path(name: str, prefix: str = "/") -> str:
    return posixpath.join(ssl_dir(prefix), f"{name}-key.pem")


def kubeconfig_path(name: str, prefix: str = "/") -> str:
    return posixpath.join(ssl_dir(prefix), f"kubecfg-{name}.yaml")
