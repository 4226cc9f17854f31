"""`rke-py lab`: local hosts in containers to try rke-py on (and to test it with)."""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rke_py.cli.options import output_option
from rke_py.cli.output import emit_json
from rke_py.errors import UsageError

name_option = click.option(
    "--name", default="lab", show_default=True, help="Lab name (prefix of everything it makes)."
)
dir_option = click.option(
    "--dir",
    "directory",
    envvar="RKE_PY_LAB_DIR",
    type=click.Path(file_okay=False),
    help="The lab's state directory  [default: ~/.local/share/rke-py/lab/<name>]",
)


class Progress:
    """Step lines with elapsed time; the same plain lines whether or not stdout is a terminal, so CI
    logs read like the screen (on a terminal they are dimmed)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.tty = sys.stderr.isatty()

    def __call__(self, message: str) -> None:
        line = f"[{time.monotonic() - self.start:5.1f}s] {message}"
        click.echo(click.style(line, dim=True) if self.tty else line, err=True)


def docker_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Report a failing Docker engine as a lab error (exit 1 with one line), not a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import docker

        from rke_py.lab.state import LabError

        try:
            return fn(*args, **kwargs)
        except docker.errors.DockerException as exc:
            raise LabError(f"docker: {exc}") from exc

    return wrapper


binaries_option = click.option(
    "--kubernetes-binaries",
    "binaries",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    envvar="RKE_PY_KUBE_BINARIES",
    help="A directory with real kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy "
    "and cri-dockerd: the lab runs them instead of its stand-ins (env RKE_PY_KUBE_BINARIES).",
)


@click.group("lab")
def command() -> None:
    """Hosts as containers on this machine (sshd + dockerd each), a registry, and a ready cluster.yml."""


@command.command()
@name_option
@click.option(
    "--nodes", "-n", default=3, show_default=True, type=click.IntRange(1, 200), help="Number of hosts."
)
@dir_option
@binaries_option
@click.option(
    "--user",
    default="root",
    show_default=True,
    help="The SSH user cluster.yml names; any other user is made in each host's docker group, not root.",
)
@click.option(
    "--private-registry",
    is_flag=True,
    help="Serve the cluster images from a registry of the lab's own that requires a password.",
)
@click.option(
    "--s3", is_flag=True, help="Run an S3 server (moto, HTTPS) on the lab network, for etcd snapshots."
)
@click.option(
    "--addon-binaries",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    envvar="RKE_PY_ADDON_BINARIES",
    help="A directory with add-on binaries (kube-dns, dnsmasq-nanny, sidecar, node-cache, "
    "cluster-proportional-autoscaler, coredns; any of them): the registry serves their images under the "
    "Kubernetes version's default names and cluster.yml turns DNS on (env RKE_PY_ADDON_BINARIES).",
)
@click.option(
    "--e2e",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    envvar="RKE_PY_E2E",
    help="A directory with the conformance suite (e2e.test, ginkgo, agnhost; sample-apiserver if there): "
    "the registry serves the suite's images and the lab writes its registry map, e2e-repo-list.yaml "
    "(env RKE_PY_E2E).",
)
@click.option(
    "--rancher-images",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    envvar="RKE_PY_RANCHER_IMAGES",
    help="A directory with the sources of Rancher's images (rke-tools, hyperkube-base, bin/; see "
    "rke_py/lab/rancher.py): the cluster runs rancher/rke-tools, rancher/hyperkube, etcd and pause as RKE "
    "names them, built from it and --kubernetes-binaries (env RKE_PY_RANCHER_IMAGES).",
)
@output_option
@docker_errors
def up(
    name: str,
    nodes: int,
    directory: str | None,
    binaries: Path | None,
    user: str,
    private_registry: bool,
    s3: bool,
    addon_binaries: Path | None,
    e2e: Path | None,
    rancher_images: Path | None,
    output: str,
) -> None:
    """Create lab NAME with N hosts (or start the hosts of an existing one)."""
    from rke_py.lab import clusteryml, hosts, testimages

    if e2e is not None and (missing := testimages.missing(e2e)):
        raise UsageError(f"--e2e {e2e}: missing {', '.join(missing)}")

    lab = hosts.up(
        name,
        nodes,
        directory,
        progress=Progress(),
        binaries=binaries,
        user=user,
        private_registry=private_registry,
        s3=s3,
        addon_binaries=addon_binaries,
        e2e=e2e,
        rancher_images=rancher_images,
    )
    if output == "json":
        emit_json(
            {
                "name": lab.name,
                "dir": str(lab.dir),
                "cluster_yml": str(lab.cluster_yml),
                "known_hosts": str(lab.known_hosts),
                "ssh_key": str(lab.key_path),
                "hosts": [{"name": h.name, "address": h.address, "roles": h.role} for h in lab.hosts],
                "e2e_repo_list": str(lab.e2e_repo_list) if lab.e2e_repo_list.exists() else None,
                "next": clusteryml.up_command(lab),
            }
        )
        return
    for host in lab.hosts:
        click.echo(f"{host.name}  {host.address}  {','.join(host.role)}")
    click.echo(f"cluster.yml:  {lab.cluster_yml}")
    click.echo(f"ssh key:      {lab.key_path}")
    click.echo(f"known_hosts:  {lab.known_hosts}")
    click.echo(f"next:         {clusteryml.up_command(lab)}")


@command.command()
@name_option
@dir_option
@click.option("--purge-registry", is_flag=True, help="Also delete the registry's storage if no lab is left.")
@docker_errors
def down(name: str, directory: str | None, purge_registry: bool) -> None:
    """Remove lab NAME: its hosts, their volumes, its network and its state directory."""
    from rke_py.lab import hosts

    hosts.down(name, directory, purge_registry=purge_registry, progress=Progress())
    click.echo(f"lab {name!r} removed")


@command.command()
@name_option
@dir_option
@output_option
@docker_errors
def status(name: str, directory: str | None, output: str) -> None:
    """Show each host's address, container state, and whether its sshd and dockerd answer."""
    from rke_py.lab import hosts

    report = hosts.status(name, directory)
    if output == "json":
        click.echo(json.dumps(report, indent=2))
        return
    yes = {True: "up", False: "down"}
    click.echo(
        f"lab {report['name']}  subnet {report['subnet']}  registry {report['registry']['address']} "
        f"{yes[report['registry']['up']]}"
    )
    click.echo(f"{'HOST':<24} {'ADDRESS':<15} {'STATE':<10} {'SSHD':<5} {'DOCKERD':<8} ROLES")
    for h in report["hosts"]:
        click.echo(
            f"{h['name']:<24} {h['address']:<15} {h['state']:<10} {yes[h['sshd']]:<5} {yes[h['dockerd']]:<8} "
            f"{','.join(h['role'])}"
        )


@command.command()
@click.option("--push", is_flag=True, help="Also start the lab registry and push the cluster images to it.")
@binaries_option
@docker_errors
def images(push: bool, binaries: Path | None) -> None:
    """Build the lab images that are missing (content-hash cache) and print their references."""
    import docker

    from rke_py.lab import hosts, registry
    from rke_py.lab import images as lab_images

    if binaries is not None:
        hosts.kubernetes_version(binaries)  # refuses a directory that lacks a binary, before building
    client = docker.from_env()
    progress = Progress()
    built = lab_images.ensure_images(client, progress=progress, binaries=binaries)
    if push:
        with registry.in_use():
            reg = registry.ensure(client, built["registry"], progress)
            registry.push(client, reg, [built[n] for n in lab_images.CLUSTER_IMAGES], progress)
    for image in built.values():
        click.echo(image.ref)
