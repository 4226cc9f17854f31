"""The etcd container (`BuildEtcdProcess`, flags of `getETCDOptions122`, etcd >= 3.4.15)."""

from __future__ import annotations

import shlex

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.bundle import etcd_cert_name
from rke_py.pki.paths import cert_path, key_path
from rke_py.plan.common import CA, binds, ca_file, cert_files, env, host_path, render_flags
from rke_py.plan.model import ContainerSpec, HealthCheck
from rke_py.templating import hostport

NAME = "etcd"
DATA_DIR = "/var/lib/rancher/etcd/"
CIPHER_SUITES = "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"


def initial_cluster(config: ClusterConfig) -> str:
    """Every etcd member in file order: `etcd-<hostname>=https://<internal>:2380,...`."""
    return ",".join(
        f"etcd-{n.name}=https://{hostport(n.internal_address, 2380)}" for n in config.hosts("etcd")
    )


def listen_address(node: Node) -> str:
    """0.0.0.0 unless the node has a distinct internal address (a DNATed public address cannot be bound)."""
    return "0.0.0.0" if node.address == node.internal_address else node.internal_address


def flags(config: ClusterConfig, node: Node, joined: bool = False) -> dict[str, str]:
    """`joined`: the member was added to a running cluster (etcdctl member add), not created with it."""
    cert = etcd_cert_name(node)
    listen = listen_address(node)
    return {
        "name": f"etcd-{node.name}",
        "data-dir": DATA_DIR,
        "listen-client-urls": f"https://{hostport(listen, 2379)}",
        "listen-peer-urls": f"https://{hostport(listen, 2380)}",
        "advertise-client-urls": f"https://{hostport(node.internal_address, 2379)}",
        "initial-advertise-peer-urls": f"https://{hostport(node.internal_address, 2380)}",
        "initial-cluster-token": "etcd-cluster-1",
        "initial-cluster": initial_cluster(config),
        "initial-cluster-state": "existing" if joined else "new",
        "trusted-ca-file": cert_path(CA),
        "peer-trusted-ca-file": cert_path(CA),
        "cert-file": cert_path(cert),
        "key-file": key_path(cert),
        "peer-cert-file": cert_path(cert),
        "peer-key-file": key_path(cert),
        "client-cert-auth": "true",
        "peer-client-cert-auth": "true",
        "cipher-suites": CIPHER_SUITES,
    }


# `docker info` Architecture, which RKE puts into etcd's env; unknown offline, so the common one (as the
# kubelet's DOCKER_ROOT): on an arm64 host RKE writes arm64 there, and rke-py's etcd differs by that.
ARCHITECTURE = "x86_64"


def etcdctl_env(node: Node) -> list[str]:
    """So `docker exec etcd etcdctl ...` works without flags, as on an RKE node."""
    cert = etcd_cert_name(node)
    listen = listen_address(node)
    endpoint = "127.0.0.1" if listen == "0.0.0.0" else listen
    return [
        "ETCDCTL_API=3",
        f"ETCDCTL_CACERT={cert_path(CA)}",
        f"ETCDCTL_CERT={cert_path(cert)}",
        f"ETCDCTL_KEY={key_path(cert)}",
        f"ETCDCTL_ENDPOINTS=https://{hostport(endpoint, 2379)}",
        f"ETCD_UNSUPPORTED_ARCH={ARCHITECTURE}",  # RKE's, from `docker info`; etcd reads it off amd64/arm64
    ]


def owner(config: ClusterConfig) -> str:
    """`uid:gid` etcd runs as, when both are set (RKE ignores one alone); "" for root. RKE writes
    `uid:uid` here, a bug that runs etcd with the wrong group; rke-py uses the gid it was given."""
    etcd = config.services.etcd
    return f"{etcd.uid}:{etcd.gid}" if etcd.uid and etcd.gid else ""


def prepare(config: ClusterConfig, node: Node) -> str:
    """What RKE's etcd-fix-perm and cert-deployer do for a non-root etcd: its data directory 0700 and
    owned by it, its own certificate and key owned by it, the CA readable."""
    user = owner(config)
    if not user:
        return ""
    data = shlex.quote(host_path(config, "/var/lib/etcd"))
    own = " ".join(shlex.quote(p) for p in cert_files(config, etcd_cert_name(node)))
    return (
        f"mkdir -p {data} && chmod 700 {data} && chown -R {user} {data} && chown {user} {own} && "
        f"chmod 644 {shlex.quote(ca_file(config))}"
    )


def reloads(config: ClusterConfig) -> bool:
    """Whether etcd takes a new certificate and key of its own without a restart: it reads them anew for
    every connection (not the CA), so a same-CA rotation or new names need no new container and no
    leader election, which fails the reads in flight with "leader changed". A non-root etcd still
    restarts: `prepare` hands the new files to its user."""
    return not owner(config)


def container(config: ClusterConfig, node: Node, joined: bool = False) -> ContainerSpec:
    service = config.services.etcd
    return ContainerSpec(
        name=NAME,
        image=config.system_images.etcd,
        command=("/usr/local/bin/etcd", *render_flags(flags(config, node, joined), service)),
        env=env(etcdctl_env(node), service),
        binds=binds(
            [
                f"{host_path(config, '/var/lib/etcd')}:{DATA_DIR}:z",
                f"{host_path(config, '/etc/kubernetes')}:/etc/kubernetes:z",
            ],
            service,
        ),
        files=(*([] if reloads(config) else cert_files(config, etcd_cert_name(node))), ca_file(config)),
        user=owner(config),
        prepare=prepare(config, node),
    )


def health(node: Node) -> HealthCheck:
    return HealthCheck(
        url=f"https://{hostport(node.internal_address, 2379)}/health",
        client_cert="kube-node",
        expect_json=(("health", "true"),),
        retries=18,  # RKE allows 90 s for a re-election
    )
