"""kubelet (`BuildKubeletProcess`, KDM `getKubeletOptions124`), beside cri-dockerd as for k8s >= 1.24."""

from __future__ import annotations

from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.bundle import KUBELET_PREFIX, cert_name_for_host
from rke_py.pki.paths import cert_path, key_path, kubeconfig_path
from rke_py.plan import cloud_provider
from rke_py.plan.common import (
    CA,
    SIDEKICK,
    TLS_CIPHER_SUITES,
    binds,
    ca_file,
    cert_files,
    env,
    host_path,
    k8s_entrypoint,
    kubeconfig_file,
)
from rke_py.plan.memo import once
from rke_py.plan.model import DOCKER_CONFIG_ENV, ContainerSpec
from rke_py.plan.registries import kubelet_docker_config

NAME = "kubelet"
DOCKER_ROOT = "/var/lib/docker"  # `docker info` DockerRootDir, unknown offline; Docker's default
ROLE_TAINTS = (  # RKE's taints for nodes without the worker role, so workloads stay off them
    ("controlplane", "node-role.kubernetes.io/controlplane", "NoSchedule"),
    ("etcd", "node-role.kubernetes.io/etcd", "NoExecute"),
)


def role_taints(node: Node) -> list[tuple[str, str]]:
    """(key, effect) of the role taints `node` carries; none for a worker."""
    if node.has("worker"):
        return []
    return [(key, effect) for role, key, effect in ROLE_TAINTS if node.has(role)]


def taints(node: Node) -> str:
    """The kubelet's --register-with-taints, as RKE gives it: the controlplane taint on a controlplane node
    without the worker role, nothing else; the etcd taint is set on the Node with the labels (nodesync)."""
    return (
        "node-role.kubernetes.io/controlplane=true:NoSchedule"
        if node.has("controlplane") and not node.has("worker")
        else ""
    )


def node_local_dns(config: ClusterConfig) -> str:
    """NodeLocal DNSCache's address when it is deployed: then every kubelet points pods at it (as RKE)."""
    nodelocal = config.dns.nodelocal
    return nodelocal.ip_address if nodelocal and config.dns.provider != "none" else ""


def flags(config: ClusterConfig, node: Node) -> dict[str, str]:
    out = dict(once((NAME, "flags"), lambda: _cluster_flags(config)))
    if not metadata_hostname(config):
        out["hostname-override"] = node.name
    if node.address != node.internal_address:
        out["node-ip"] = node.internal_address
    if taints(node):
        out["register-with-taints"] = taints(node)
    if config.services.kubelet.generate_serving_certificate:
        out["tls-cert-file"] = cert_path(serving_cert(node))
        out["tls-private-key-file"] = key_path(serving_cert(node))
    return out


def _cluster_flags(config: ClusterConfig) -> dict[str, str]:
    """The flags every node's kubelet has alike."""
    kubelet = config.services.kubelet
    return {
        "address": "0.0.0.0",
        "anonymous-auth": "false",
        "authentication-token-webhook": "true",
        "authorization-mode": "Webhook",
        "cgroups-per-qos": "True",
        "client-ca-file": cert_path(CA),
        "cluster-dns": node_local_dns(config) or kubelet.cluster_dns_server,
        "cluster-domain": kubelet.cluster_domain,
        "container-runtime-endpoint": "unix:///var/run/cri-dockerd.sock",
        "event-qps": "0",
        "fail-swap-on": str(kubelet.fail_swap_on).lower(),
        "kubeconfig": kubeconfig_path("kube-node"),
        "make-iptables-util-chains": "true",
        "pod-infra-container-image": kubelet.infra_container_image,
        "read-only-port": "0",
        "resolv-conf": "/etc/resolv.conf",
        "root-dir": host_path(config, "/var/lib/kubelet"),
        "streaming-connection-idle-timeout": "30m",
        "tls-cipher-suites": TLS_CIPHER_SUITES,
        "v": "2",
        "volume-plugin-dir": "/var/lib/kubelet/volumeplugins",
        **cloud_provider.flags(config),
    }


def metadata_hostname(config: ClusterConfig) -> bool:
    """AWS names nodes after the instance metadata: RKE then leaves `hostname-override` to rke-tools'
    entrypoint, which reads it from the metadata service."""
    cloud = config.cloud_provider
    return bool(cloud.useInstanceMetadataHostname) and cloud.name == cloud_provider.EXTERNAL_AWS


def serving_cert(node: Node) -> str:
    """The node's kubelet serving certificate, signed by kube-ca (`generate_serving_certificate`)."""
    return cert_name_for_host(node, KUBELET_PREFIX)


def read_files(config: ClusterConfig, node: Node) -> tuple[str, ...]:
    own = once((NAME, "files"), lambda: _own_files(config))
    if config.services.kubelet.generate_serving_certificate:
        return (*own, *cert_files(config, serving_cert(node)))
    return own


def _own_files(config: ClusterConfig) -> tuple[str, ...]:
    return (
        kubeconfig_file(config, "kube-node"),
        *cert_files(config, "kube-node"),
        ca_file(config),
        *cloud_provider.read_files(config),
    )


def base_binds(config: ClusterConfig) -> list[str]:
    kubelet_dir = host_path(config, "/var/lib/kubelet")
    out = [
        f"{host_path(config, '/etc/kubernetes')}:/etc/kubernetes:z",
        "/etc/cni:/etc/cni:rw,z",
        "/opt/cni:/opt/cni:rw,z",
        f"{host_path(config, '/var/lib/cni')}:/var/lib/cni:z",
        "/var/lib/calico:/var/lib/calico:z",
        "/etc/resolv.conf:/etc/resolv.conf",
        "/sys:/sys:rprivate",
        f"{DOCKER_ROOT}:{DOCKER_ROOT}:rw,rslave,z",
        f"{kubelet_dir}:{kubelet_dir}:shared,z",
        "/var/lib/rancher:/var/lib/rancher:shared,z",
        "/var/run:/var/run:rw,rprivate",
        "/run:/run:rprivate",
        f"{host_path(config, '/etc/ceph')}:/etc/ceph",
        "/dev:/host/dev:rprivate",
        "/var/log/containers:/var/log/containers:z",
        "/var/log/pods:/var/log/pods:z",
        "/usr:/host/usr:ro",
        "/etc:/host/etc:ro",
    ]
    if kubelet_dir != "/var/lib/kubelet":  # flex volume plugins stay where drivers expect them
        out.append("/var/lib/kubelet/volumeplugins:/var/lib/kubelet/volumeplugins:shared,z")
    # RKE lists cri-dockerd's state dir first.
    return [f"{host_path(config, '/var/lib/cri-dockerd')}:/var/lib/cri-dockerd:z", *out]


def pulled_images(config: ClusterConfig) -> list[str]:
    """The pod sandbox (pause) image: cri-dockerd pulls it itself, without the registries' credentials,
    so a registry that asks for a password would leave every pod without a sandbox. rke-py pulls it."""
    return [config.services.kubelet.infra_container_image]


def entrypoint_env(config: ClusterConfig) -> list[str]:
    """What rke-tools' entrypoint acts on: cri-dockerd started next to the kubelet, and the registries'
    credentials written where the kubelet reads them, so pods pull from the same private registries.
    Passed in the environment, never as an argument."""
    out = ["RKE_KUBELET_CRIDOCKERD=true", *cloud_provider.checksum_env(config)]
    if "," in config.services.kube_controller.cluster_cidr:
        out.append("RKE_KUBELET_CRIDOCKERD_DUALSTACK=true")
    # where cri-dockerd serves exec, attach and port-forward streams (rke-tools: 127.0.0.1:10010)
    if config.cri_dockerd_stream_server_address:
        out.append(f"CRIDOCKERD_STREAM_SERVER_ADDRESS={config.cri_dockerd_stream_server_address}")
    if config.cri_dockerd_stream_server_port:
        out.append(f"CRIDOCKERD_STREAM_SERVER_PORT={config.cri_dockerd_stream_server_port}")
    docker_config = kubelet_docker_config(config)
    if docker_config:
        kubelet_dir = host_path(config, "/var/lib/kubelet")
        out += [
            f"{DOCKER_CONFIG_ENV}={docker_config}",
            f"RKE_KUBELET_DOCKER_FILE={kubelet_dir}/config.json",
        ]
    return out


def container(config: ClusterConfig, node: Node) -> ContainerSpec:
    service = config.services.kubelet
    return ContainerSpec(
        name=NAME,
        image=config.system_images.kubernetes,
        entrypoint=k8s_entrypoint(NAME, flags(config, node), service),
        env=once((NAME, "env"), lambda: env(entrypoint_env(config), service)),
        binds=once((NAME, "binds"), lambda: binds(base_binds(config), service)),
        pid_mode="host",
        privileged=True,
        volumes_from=(SIDEKICK,),
        files=read_files(config, node),
    )
