"""Lab networks: subnets that collide with nothing (not this machine's routes, not other Docker networks),
and their removal.

Every network the lab creates names its subnet, so Docker never picks one from its default pools that
would later overlap a lab's /24.
"""

from __future__ import annotations

import contextlib
import ipaddress
import time
from typing import Any

import docker
from docker.types import IPAMConfig, IPAMPool

from rke_py.lab.state import LabError, machine_lock


def _machine_networks() -> list[ipaddress.IPv4Network]:
    """Networks this machine routes to directly (a lab subnet must not shadow one of them)."""
    nets = []
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            dest, mask = (int(fields[1], 16).to_bytes(4, "little"), int(fields[7], 16).to_bytes(4, "little"))
            net = ipaddress.ip_network(f"{ipaddress.IPv4Address(dest)}/{ipaddress.IPv4Address(mask)}")
            if net.prefixlen > 0:
                nets.append(net)
    return nets


def free_subnet(client: docker.DockerClient, second_octet: int, start: int) -> ipaddress.IPv4Network:
    """The first free 172.<second_octet>.X.0/24, trying X from `start` on."""
    used: list[Any] = _machine_networks()
    for net in client.api.networks():
        for config in (net.get("IPAM") or {}).get("Config") or []:
            if config.get("Subnet"):
                used.append(ipaddress.ip_network(config["Subnet"]))
    for i in range(256):
        candidate = ipaddress.IPv4Network(f"172.{second_octet}.{(start + i) % 256}.0/24")
        if not any(candidate.version == u.version and candidate.overlaps(u) for u in used):
            return candidate
    raise LabError(f"no free /24 left in 172.{second_octet}.0.0/16 for a lab network")


def claiming() -> contextlib.AbstractContextManager[None]:
    """Held from choosing a subnet until the network on it exists, so that no other lab takes it between."""
    return machine_lock("subnets")


def ipam(subnet: ipaddress.IPv4Network) -> IPAMConfig:
    return IPAMConfig(pool_configs=[IPAMPool(subnet=str(subnet), gateway=str(subnet.network_address + 1))])


def remove_network(network: Any, patience: float = 30, pause: float = 1) -> None:
    """Remove a lab network, disconnecting what is still attached to it first (the shared registry, a
    container of the lab's that Docker has not let go of). Docker frees a removed container's endpoint a
    moment after the removal returns and refuses to remove a network that still has one ("has active
    endpoints"): the removal is asked again for up to `patience` seconds. Docker 20.10 can also keep
    counting an endpoint that no container holds (seen once, after 48 hosts were removed at once); only a
    restart of dockerd clears that, which the LabError says."""
    deadline = time.monotonic() + patience
    while True:
        network.reload()
        for endpoint in network.attrs.get("Containers") or {}:
            with contextlib.suppress(docker.errors.APIError):  # gone meanwhile
                network.disconnect(endpoint, force=True)
        try:
            network.remove()
            return
        except docker.errors.APIError as e:
            if "active endpoints" not in str(e):
                raise
            if time.monotonic() > deadline:
                raise LabError(
                    f"Docker still counts an endpoint on network {network.name} though no container is "
                    "attached to it (a Docker bug); restart dockerd, then run `rke-py lab down` again"
                ) from None
        time.sleep(pause)
