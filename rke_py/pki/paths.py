"""Where certificate files live (`rke:pki/util.go` `GetCertPath`, `GetKeyPath`, `GetConfigPath`).

The host directory `<prefix_path>/etc/kubernetes` is bind-mounted at `/etc/kubernetes` in every container,
so container-side paths always use the default prefix "/" and host-side paths use `prefix_path`. Each path is
worked out once: a plan asks for the same few for every file of every node.
"""

from __future__ import annotations

import functools
import posixpath

SSL_DIR = "etc/kubernetes/ssl"


@functools.cache
def ssl_dir(prefix: str = "/") -> str:
    return posixpath.join("/", prefix or "/", SSL_DIR)


@functools.cache
def cert_path(name: str, prefix: str = "/") -> str:
    return posixpath.join(ssl_dir(prefix), f"{name}.pem")


@functools.cache
def key_path(name: str, prefix: str = "/") -> str:
    return posixpath.join(ssl_dir(prefix), f"{name}-key.pem")


@functools.cache
def kubeconfig_path(name: str, prefix: str = "/") -> str:
    return posixpath.join(ssl_dir(prefix), f"kubecfg-{name}.yaml")
