"""Read a host's current state over its one connection: Docker info, rke-py's containers, file hashes.

Containers are found by RKE's name label (which rke-py sets too) and sorted by the component registry:
components, and the others rke-py knows (its own leftovers, RKE's helpers and snapshots). Containers with
RKE's label that neither knows are not ours and are left out.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from concurrent.futures import Executor

from rke_py.deploy.facts import HostFacts, ObservedContainer
from rke_py.hosts.base import HostConnection
from rke_py.plan.components import REGISTRY, RKE_UNLABELLED, Component, by_name, is_known
from rke_py.plan.model import HASH_LABEL, MANAGED_LABEL, NAME_LABEL, NodePlan


def observe(
    host: HostConnection,
    plan: NodePlan | None,
    prefix: str,
    registry: tuple[Component, ...] = REGISTRY,
    beside: Executor | None = None,
) -> HostFacts:
    """One container list, one image list and one shell command per host (and one exec in the file helper
    when the SSH user is not root); the Docker version is the one the client negotiated with. With an
    executor `beside`, the shell command runs there while the Docker calls are made: the connection
    carries both at once, and a thousand hosts wait that much less."""
    paths = [f.path for f in plan.files] if plan else []
    # As root one shell command reads everything; otherwise the files are root's, read through Docker.
    script = _facts_script(paths if host.root else [], prefix)
    shell = beside.submit(host.run, script) if beside else None
    facts = _docker_facts(host, registry)
    done = shell.result() if shell else host.run(script)
    _read_shell_facts(facts, done.stdout.decode(errors="replace"), paths, now=time.time())
    if not host.root:
        facts.file_hashes = host.file_hashes(paths)
    return facts


def _docker_facts(host: HostConnection, registry: tuple[Component, ...]) -> HostFacts:
    facts = HostFacts(address=host.address, docker_version=host.docker.server_version())
    components = by_name(registry)
    for c in host.docker.containers(NAME_LABEL, RKE_UNLABELLED):
        seen = ObservedContainer(c.name, c.id, c.image, c.running, c.labels.get(HASH_LABEL, ""))
        if c.name in components:
            if not seen.spec_hash:  # RKE's: what it runs decides whether it stays (diff)
                config, image_env = host.docker.run_config(c.id)
                seen = dataclasses.replace(seen, config=config, image_env=image_env)
            facts.containers[c.name] = seen
        elif is_known(c.name, MANAGED_LABEL in c.labels, registry):
            facts.others[c.name] = seen
    facts.images = host.docker.image_tags()
    return facts


def _facts_script(paths: list[str], prefix: str) -> str:
    hashes = f"sha256sum -- {' '.join(shlex.quote(p) for p in paths)} 2>/dev/null" if paths else "true"
    # Gathered, then written at once: each program's own write is an SSH packet for rke-py to wait for.
    return (
        f"out=$({hashes}; echo '--- ports'; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; "
        f"echo '--- df'; df -Pk {shlex.quote(prefix)} | tail -n 1; echo '--- clock'; date +%s; "
        "echo '--- hostname'; cat /proc/sys/kernel/hostname"  # the name Docker and the kubelet go by
        "); printf '%s\\n' \"$out\""
    )


def _read_shell_facts(facts: HostFacts, out: str, paths: list[str], now: float) -> None:
    """The script's sections into `facts`; `now`: this machine's clock when the answer came."""
    section = "hashes"
    facts.file_hashes = dict.fromkeys(paths)
    for line in out.splitlines():
        if line.startswith("--- "):
            section = line[4:]
            continue
        fields = line.split()
        if section == "hashes" and len(fields) == 2:
            facts.file_hashes[fields[1]] = fields[0]
        elif section == "ports" and len(fields) > 3 and fields[3] == "0A" and ":" in fields[1]:
            facts.listening_ports.add(int(fields[1].rsplit(":", 1)[1], 16))
        elif section == "df" and len(fields) >= 4 and fields[3].isdigit():
            facts.disk_free_mb = int(fields[3]) // 1024
        elif section == "clock" and len(fields) == 1 and fields[0].isdigit():
            facts.clock_offset_s = int(fields[0]) - now
        elif section == "hostname" and len(fields) == 1:
            facts.hostname = fields[0]
