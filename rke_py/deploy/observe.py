"""Read a host's current state over its one connection: Docker info, rke-py's containers, file hashes."""

from __future__ import annotations

import shlex

import docker

from rke_py.deploy.facts import HostFacts, ObservedContainer
from rke_py.plan.model import HASH_LABEL, NAME_LABEL, NodePlan

# Containers rke-py owns by name. Others carrying RKE's label (snapshots, log linkers) are left alone.
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "nginx-proxy",
    "service-sidekick",
    "kubelet",
    "kube-proxy",
)


def observe(address: str, client: docker.DockerClient, run, plan: NodePlan | None, prefix: str) -> HostFacts:
    """One Docker info, one container list, one image list and one shell command per host."""
    info = client.api.info()
    facts = HostFacts(
        address=address,
        hostname=info.get("Name", ""),
        docker_version=info.get("ServerVersion", ""),
    )
    for c in client.api.containers(all=True, filters={"label": NAME_LABEL}):
        name = c["Names"][0].lstrip("/")
        if name in COMPONENTS:
            facts.containers[name] = ObservedContainer(
                name=name,
                id=c["Id"],
                image=c["Image"],
                running=c["State"] == "running",
                spec_hash=(c.get("Labels") or {}).get(HASH_LABEL, ""),
            )
    for image in client.api.images():
        facts.images.update(image.get("RepoTags") or ())
    paths = [f.path for f in plan.files] if plan else []
    _read_shell_facts(facts, run(_facts_script(paths, prefix)).stdout.decode(errors="replace"), paths)
    return facts


def _facts_script(paths: list[str], prefix: str) -> str:
    hashes = f"sha256sum -- {' '.join(shlex.quote(p) for p in paths)} 2>/dev/null" if paths else "true"
    return (
        f"{hashes}; echo '--- ports'; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; "
        f"echo '--- df'; df -Pk {shlex.quote(prefix)} | tail -n 1; echo '--- uid'; id -u"
    )


def _read_shell_facts(facts: HostFacts, out: str, paths: list[str]) -> None:
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
        elif section == "uid" and fields and fields[0].isdigit():
            facts.uid = int(fields[0])
