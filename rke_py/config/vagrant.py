"""Nodes for cluster.yml from a running Vagrant lab (`rke-py config --from-vagrant`).

`vagrant ssh-config` says how Vagrant itself logs in: the user, the private key, and usually a forwarded
port on 127.0.0.1 (VirtualBox's NAT interface), which the machines cannot use to reach each other. The
cluster needs each machine's private-network address instead, and `vagrant ssh-config` does not show it.
rke-py's Vagrantfile (`vagrant/Vagrantfile`) fixes that address by name: machine `node-<i>` is
`192.168.56.<10+i>`. So, per machine:

* named `node-<i>`: address and internal_address are that private address, port 22, hostname_override
  the machine name (also its hostname);
* any other name: the HostName and Port of `vagrant ssh-config` if HostName is not a loopback address
  (e.g. a libvirt machine's management address), else an error, since a forwarded port is no use;
* user and key: `User` and the first `IdentityFile` (the key Vagrant generated for that machine), unless
  the caller names one key for the whole cluster.

rke-py must run on the machine that hosts the VMs: only it reaches the private network.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import paramiko

from rke_py.config.generate import NodeInput, roles_by_count
from rke_py.errors import RkePyError

PRIVATE_SUBNET = "192.168.56"  # keep in step with SUBNET in vagrant/Vagrantfile
FIRST_OFFSET = 10  # node-1 is .11
MACHINE_NAME = re.compile(r"node-([1-9][0-9]*)")
_HOST_LINE = re.compile(r"^\s*Host\s+(\S+)", re.IGNORECASE | re.MULTILINE)
SSH_CONFIG_TIMEOUT = 120.0  # vagrant starts slowly (Ruby, plugins); it asks each provider for the state


class VagrantError(RkePyError):
    """Vagrant could not tell rke-py about its machines (not installed, nothing running, unusable names)."""


@dataclass
class VagrantHost:
    """One `Host` block of `vagrant ssh-config` output."""

    name: str  # the machine name, e.g. node-1 ("default" for a single unnamed machine)
    hostname: str  # where Vagrant connects: 127.0.0.1 with a forwarded port, or the machine's address
    user: str
    port: int
    identity_files: list[str] = field(default_factory=list)  # in order; Vagrant may list several
    options: dict[str, str] = field(default_factory=dict)  # every other key, lowercased, e.g. identitiesonly


def parse_ssh_config(text: str) -> list[VagrantHost]:
    """The machines in `vagrant ssh-config` output, in the order Vagrant printed them.

    paramiko reads the OpenSSH syntax (quoted values, repeated IdentityFile, `Key=value`) and expands paths
    as ssh would (`~`, `%d`); the order of the `Host` lines is kept here, as paramiko returns a set.
    """
    config = paramiko.SSHConfig.from_text(text)
    hosts = []
    for name in dict.fromkeys(_HOST_LINE.findall(text)):
        entry = dict(config.lookup(name))
        port = str(entry.pop("port", "22"))
        if not port.isdigit():
            raise VagrantError(f'vagrant ssh-config: machine {name} has Port "{port}", not a number')
        found: str | list[str] = entry.pop("identityfile", [])
        identity_files = [found] if isinstance(found, str) else list(found)
        hosts.append(
            VagrantHost(
                name=name,
                hostname=str(entry.pop("hostname", name)),
                user=str(entry.pop("user", "vagrant")),
                port=int(port),
                identity_files=list(identity_files),
                options={key: str(value) for key, value in entry.items()},
            )
        )
    if not hosts:
        raise VagrantError("vagrant ssh-config printed no machines (no `Host` lines)")
    return hosts


def private_address(name: str) -> str | None:
    """The Vagrantfile's private address of machine `name` (node-<i>), or None for other names."""
    match = MACHINE_NAME.fullmatch(name)
    if not match or int(match[1]) > 254 - FIRST_OFFSET:
        return None
    return f"{PRIVATE_SUBNET}.{FIRST_OFFSET + int(match[1])}"


def nodes_from_vagrant(hosts: list[VagrantHost], *, cluster_key: bool = False) -> list[NodeInput]:
    """NodeInputs for `hosts`, roles by `roles_by_count`; `cluster_key`: leave keys to ssh_key_path."""
    return [
        _node(host, roles, cluster_key) for host, roles in zip(hosts, roles_by_count(len(hosts)), strict=True)
    ]


def _node(host: VagrantHost, roles: list[str], cluster_key: bool) -> NodeInput:
    key = "" if cluster_key or not host.identity_files else host.identity_files[0]
    private = private_address(host.name)
    if private:
        return NodeInput(
            address=private,
            internal_address=private,
            port=22,
            user=host.user,
            roles=roles,
            hostname_override=host.name,
            ssh_key_path=key,
            comment=f"Vagrant machine {host.name} (vagrant ssh uses {host.hostname}:{host.port})",
        )
    if _is_loopback(host.hostname):
        raise VagrantError(
            f"Vagrant machine {host.name} is only reachable through a forwarded port "
            f"({host.hostname}:{host.port}), and its private address is unknown: rke-py knows it for"
            f" machines named node-<i> (node-1 is {PRIVATE_SUBNET}.{FIRST_OFFSET + 1}), as"
            " vagrant/Vagrantfile names them. Use that Vagrantfile, or list the nodes with"
            " --node ADDRESS:ROLE[,ROLE][@USER]"
        )
    return NodeInput(
        address=host.hostname,
        port=host.port,
        user=host.user,
        roles=roles,
        ssh_key_path=key,
        comment=f"Vagrant machine {host.name}",
    )


def _is_loopback(hostname: str) -> bool:
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return hostname == "localhost"


def run_ssh_config(directory: str | os.PathLike[str]) -> str:
    """The output of `vagrant ssh-config` for the Vagrant project in `directory`."""
    path = Path(directory)
    vagrantfile = os.environ.get("VAGRANT_VAGRANTFILE", "Vagrantfile")
    if not (path / vagrantfile).is_file():
        raise VagrantError(
            f"{path} has no {vagrantfile}; pass the directory that holds it, e.g. --from-vagrant vagrant/"
        )
    program = shutil.which("vagrant")
    if program is None:
        raise VagrantError(
            "vagrant is not installed (not found on PATH); install it, or pass the recorded output of "
            "`vagrant ssh-config` with --vagrant-ssh-config FILE"
        )
    # VAGRANT_CWD wins over the working directory in Vagrant, so set it too.
    env = {**os.environ, "VAGRANT_CWD": str(path.resolve())}
    try:
        result = subprocess.run(
            [program, "ssh-config"],
            cwd=path,
            env=env,
            capture_output=True,
            text=True,
            timeout=SSH_CONFIG_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise VagrantError(
            f"`vagrant ssh-config` in {path} did not finish in {SSH_CONFIG_TIMEOUT:.0f}s"
        ) from None
    if result.returncode != 0:
        first_paragraph = result.stderr.strip().split("\n\n")[0]
        reason = " ".join(first_paragraph.split()) or f"exit status {result.returncode}"
        raise VagrantError(
            f"`vagrant ssh-config` in {path} failed; are the machines running (`vagrant up` there)? "
            f"Vagrant says: {reason}"
        )
    return result.stdout
