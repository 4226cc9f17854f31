"""What runs on a lab cluster's hosts, read with `docker inspect` through the outer Docker engine (not
rke-py's SSH code), and compared between twin labs: one built by `rke up`, one by `rke-py up`, from the same
cluster.yml. Addresses and names are the only things twins differ in; they are written generically first."""

from __future__ import annotations

import base64
import json
from typing import Any

import docker
from cryptography import x509

from rke_py.lab.state import Lab
from tests.rke.rke import differences as of_containers
from tests.rke.rke import normal

Container = dict[str, Any]
DOCKER_CONFIG = "RKE_KUBELET_DOCKER_CONFIG="
FILES = "find /etc/kubernetes /opt/rke -type f -exec stat -c '%a %n' {} +"


def _generic(lab: Lab, text: str) -> str:
    """`text` with the lab's subnet, host names and name replaced, in every spelling RKE uses."""
    base = lab.subnet.rsplit(".", 1)[0]  # 172.30.9.0/24 -> 172.30.9
    return (
        text.replace(base + ".", "SUBNET.")
        .replace(base.replace(".", "-") + "-", "SUBNET-")
        .replace(f"{lab.name}-node-", "NODE-")
        .replace(lab.name, "LAB")
    )


def containers(lab: Lab, index: int) -> dict[str, Container]:
    """name -> the container's configuration, of every container but the kubelet's pods."""
    host = docker.from_env().containers.get(lab.hosts[index].name)
    ids = host.exec_run(["docker", "ps", "-aq"]).output.decode().split()
    inspected = json.loads(host.exec_run(["docker", "inspect", *ids]).output) if ids else []
    out = {}
    for c in inspected:
        name = c["Name"].lstrip("/")
        if name.startswith("k8s_"):
            continue
        config, host_config = c["Config"], c["HostConfig"]
        env = [
            DOCKER_CONFIG + base64.b64decode(e[len(DOCKER_CONFIG) :]).decode()
            if e.startswith(DOCKER_CONFIG)
            else e
            for e in config["Env"] or []
        ]
        out[name] = {
            "image": config["Image"],
            "entrypoint": normal(config["Entrypoint"] or []),
            "command": normal(config["Cmd"] or []),
            "env": sorted(env),
            "labels": config["Labels"] or {},
            "user": config["User"],
            "binds": sorted(host_config["Binds"] or []),
            "network_mode": host_config["NetworkMode"],
            "pid_mode": host_config["PidMode"],
            "privileged": host_config["Privileged"],
            "restart_policy": host_config["RestartPolicy"]["Name"],
            "volumes_from": host_config["VolumesFrom"] or [],
            "ports": host_config.get("PortBindings") or {},
        }
    return json.loads(_generic(lab, json.dumps(out)))


def files(lab: Lab, index: int) -> dict[str, Any]:
    """path -> (mode, what it says): a certificate's subject, issuer and names, any other file's text."""
    host = docker.from_env().containers.get(lab.hosts[index].name)
    out: dict[str, Any] = {}
    for line in host.exec_run(["sh", "-c", FILES]).output.decode().splitlines():
        mode, path = line.split(" ", 1)
        if path.endswith("-key.pem") or path.endswith(".zip"):
            out[path] = (mode, "")
            continue
        data = host.exec_run(["cat", path]).output
        out[path] = (
            mode,
            _certificate(lab, data) if path.endswith(".pem") else data.decode(errors="replace"),
        )
    return json.loads(_generic(lab, json.dumps(out)))


def _certificate(lab: Lab, pem: bytes) -> str:
    cert = x509.load_pem_x509_certificate(pem)
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        alt = sorted(_generic(lab, str(n.value)) for n in names)  # in the order twins share
    except x509.ExtensionNotFound:
        alt = []
    return f"{cert.subject.rfc4514_string()} by {cert.issuer.rfc4514_string()} for {', '.join(alt)}"


def differences(rke: Lab, ours: Lab, index: int) -> list[str]:
    """Every field of every container, and every file, in which host `index` of the two labs differ."""
    host = str(index)
    out = of_containers({host: containers(rke, index)}, {host: containers(ours, index)})
    rke_files, our_files = files(rke, index), files(ours, index)
    for path in sorted(set(rke_files) | set(our_files)):
        if path not in rke_files or path not in our_files:
            out.append(f"{index} {path}: only {'RKE' if path in rke_files else 'rke-py'} has it")
        elif rke_files[path] != our_files[path]:
            out.append(f"{index} {path}: RKE {rke_files[path]} rke-py {our_files[path]}")
    return out
