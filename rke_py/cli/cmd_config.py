"""`rke-py config`: write a starting cluster.yml, as `rke config` does.

The nodes come from `--node` options, from a running Vagrant lab (`--from-vagrant`), or from RKE's
questions on a terminal. The text is loaded with the same loader `up` uses before anything is written, so
the command never leaves a file behind that rke-py would reject.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from rke_py import config as cluster_config
from rke_py.cli.cmd_validate import summary
from rke_py.config import defaults, kdm
from rke_py.config.generate import (
    DEFAULT_USER,
    NODE_SYNTAX,
    ClusterInput,
    NodeInput,
    parse_node_option,
    render_cluster_yml,
    roles_by_count,
    write_config_file,
)
from rke_py.config.schema import ROLES
from rke_py.config.vagrant import nodes_from_vagrant, parse_ssh_config, run_ssh_config
from rke_py.config.validate import AUTHZ_MODES
from rke_py.config.validate_addons import NETWORK_PLUGINS
from rke_py.errors import ConfigError, UsageError, printable

MAX_SSH_CONFIG = 1024 * 1024  # `vagrant ssh-config` prints a few hundred bytes a machine


@click.command("config")
@click.option(
    "--name",
    "-n",
    default="cluster.yml",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The file to write.",
)
@click.option(
    "--node",
    "node_specs",
    multiple=True,
    metavar=NODE_SYNTAX,
    help=f"A node, once per node; no questions are asked. Roles: {', '.join(ROLES)}. USER: {DEFAULT_USER}.",
)
@click.option(
    "--ssh-key-path",
    metavar="PATH",
    help="Private key for every node (cluster ssh_key_path). [default: ~/.ssh/id_rsa, or with "
    "--from-vagrant each machine's key from vagrant ssh-config]",
)
@click.option(
    "--from-vagrant",
    "vagrant_dir",
    is_flag=False,
    flag_value=".",
    metavar="[DIR]",
    type=click.Path(file_okay=False),
    help="Take the nodes from the running machines of the Vagrant project in DIR (default: .), "
    "e.g. the lab in vagrant/.",
)
@click.option(
    "--vagrant-ssh-config",
    "vagrant_ssh_config",
    metavar="FILE",
    type=click.Path(dir_okay=False, exists=True),
    help="Read recorded `vagrant ssh-config` output from FILE instead of running vagrant "
    "(implies --from-vagrant).",
)
@click.option(
    "--print", "-p", "to_stdout", is_flag=True, help="Write the configuration to stdout, not to a file."
)
@click.option("--force", is_flag=True, help="Overwrite the file if it exists.")
@click.option(
    "--empty", "-e", is_flag=True, help="A file with every setting and no nodes yet, to fill in (RKE's flag)."
)
@click.option(
    "--list-version",
    "-l",
    is_flag=True,
    help="Print the default Kubernetes version (--all: every line's newest).",
)
@click.option(
    "--system-images",
    "-s",
    is_flag=True,
    help="Print the system images of a version (--all: of every version).",
)
@click.option(
    "--all", "-a", "every", is_flag=True, help="With --list-version or --system-images: all versions."
)
@click.option("--version", "version", metavar="VERSION", help="With --system-images: this version's images.")
def command(
    name: str,
    node_specs: tuple[str, ...],
    ssh_key_path: str | None,
    vagrant_dir: str | None,
    vagrant_ssh_config: str | None,
    to_stdout: bool,
    force: bool,
    empty: bool,
    list_version: bool,
    system_images: bool,
    every: bool,
    version: str | None,
) -> None:
    """Write a commented cluster.yml (mode 0640) that rke-py up accepts; or, as `rke config`, list the
    Kubernetes versions rke-py knows (-l) and their system images (-s)."""
    if list_version or system_images:
        _print_versions(list_version, every, version)
        return
    if every or version:
        raise UsageError("--all and --version go with --list-version or --system-images")
    from_vagrant = vagrant_dir is not None or vagrant_ssh_config is not None
    sources = [
        flag
        for flag, given in (("--node", node_specs), ("--from-vagrant", from_vagrant), ("--empty", empty))
        if given
    ]
    if len(sources) > 1:
        raise UsageError(
            f"{', '.join(sources[:-1])} and {sources[-1]} each describe the nodes; use one of them"
        )
    if not to_stdout and not force and Path(name).exists():
        raise UsageError(
            f"{name} already exists; pass --force to overwrite it, or --name to write another file"
        )
    if empty:
        cluster = ClusterInput(
            ssh_key_path=ssh_key_path or defaults.SSH_KEY_PATH,
            written_by=_command_line("--empty", key=ssh_key_path),
        )
        _emit(name, render_cluster_yml([], cluster=cluster), to_stdout, force, "no nodes yet: add them")
        return
        return
    nodes, cluster = _describe(node_specs, vagrant_dir, vagrant_ssh_config, ssh_key_path, to_stdout)
    text = render_cluster_yml(nodes, cluster=cluster)
    try:
        loaded = cluster_config.load_text(text, name)
    except ConfigError as exc:
        # Positions in a file that was never written would mean nothing to the user: say what is wrong.
        problems = "\n".join(
            f"  {printable(p.message)}" + (f" — {p.hint}" if p.hint else "") for p in exc.problems
        )
        raise UsageError(
            f"these nodes do not make a cluster rke-py accepts; nothing was written:\n{problems}"
        ) from None
    for warning in loaded.warnings:
        click.echo(str(warning), err=True)
    _emit(name, text, to_stdout, force, summary(loaded.config))


def _emit(name: str, text: str, to_stdout: bool, force: bool, what: str) -> None:
    if to_stdout:
        click.echo(text, nl=False)
        return
    write_config_file(name, text, force=force)
    click.echo(f"Wrote {name} ({what}). Next: rke-py up --config {shlex.quote(name)}")


def _print_versions(list_version: bool, every: bool, version: str | None) -> None:
    """RKE's `config -l [-a]` and `config -s [-a] [--version V]`: versions one per line; images sorted and
    unique, each version's preceded by a line naming it when there are several."""
    if list_version:
        for line in kdm.latest_per_minor() if every else [kdm.DEFAULT_K8S_VERSION]:
            click.echo(line)
        return
    chosen = kdm.versions() if every else [version or kdm.DEFAULT_K8S_VERSION]
    for wanted in chosen:
        images = kdm.system_images(wanted)
        if images is None:
            raise UsageError(
                f"rke-py has no system images for {wanted}; `rke-py config -l -a` lists its versions' lines"
            )
        if every:
            click.echo(f"# images of {wanted}")
        for image in sorted(set(images.values())):
            click.echo(image)


def _describe(
    node_specs: tuple[str, ...],
    vagrant_dir: str | None,
    vagrant_ssh_config: str | None,
    ssh_key_path: str | None,
    to_stdout: bool,
) -> tuple[list[NodeInput], ClusterInput]:
    """The nodes and cluster settings, from whichever source the options name."""
    cluster = ClusterInput(ssh_key_path=ssh_key_path or defaults.SSH_KEY_PATH)
    if node_specs:
        cluster.written_by = _command_line(*(f"--node={spec}" for spec in node_specs), key=ssh_key_path)
        return [parse_node_option(spec) for spec in node_specs], cluster
    if vagrant_ssh_config is not None or vagrant_dir is not None:
        if vagrant_ssh_config is not None:
            text = _read_ssh_config(vagrant_ssh_config)
            cluster.written_by = _command_line(f"--vagrant-ssh-config={vagrant_ssh_config}", key=ssh_key_path)
        else:
            text = run_ssh_config(vagrant_dir or ".")
            cluster.written_by = _command_line(f"--from-vagrant={vagrant_dir}", key=ssh_key_path)
        return nodes_from_vagrant(parse_ssh_config(text), cluster_key=ssh_key_path is not None), cluster
    if not sys.stdin.isatty():
        raise UsageError(
            "rke-py config asks questions, but stdin is not a terminal: describe the nodes with"
            f" --node {NODE_SYNTAX} (once per node), or take them from a Vagrant lab with"
            " --from-vagrant [DIR]"
        )
    return _interview(cluster.ssh_key_path, err=to_stdout)


def _read_ssh_config(path: str) -> str:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_SSH_CONFIG + 1)
    except OSError as exc:
        raise UsageError(f"cannot read --vagrant-ssh-config {path}: {exc.strerror or exc}") from None
    try:
        if len(data) > MAX_SSH_CONFIG:
            raise ValueError
        return data.decode("utf-8")
    except ValueError:
        raise UsageError(f'--vagrant-ssh-config {path} is not the text "vagrant ssh-config" prints') from None


def _command_line(*args: str, key: str | None) -> str:
    return shlex.join(["rke-py", "config", *args, *([f"--ssh-key-path={key}"] if key else [])])


class _Prompter:
    """Asks like `rke config`: `[+] <question> [<default or none>]: `; an empty answer takes the default."""

    def __init__(self, err: bool):
        self.err = err  # with --print, questions go to stderr so stdout holds only the file

    def text(self, question: str, default: str = "", *, required: bool = False) -> str:
        def check(value: str) -> str:
            if required and not value.strip():
                raise click.BadParameter("an answer is needed")
            return value.strip()

        return self._prompt(question, default, value_proc=check)

    def number(self, question: str, default: int, low: int, high: int | None = None) -> int:
        return self._prompt(question, str(default), type=click.IntRange(low, high))

    def choice(self, question: str, default: str, choices: tuple[str, ...]) -> str:
        return self._prompt(question, default, type=click.Choice(choices, case_sensitive=False)).lower()

    def _prompt(self, question: str, default: str, **convert: Any) -> Any:
        return click.prompt(
            f"[+] {question} [{default or 'none'}]",
            default=default,
            show_default=False,
            show_choices=False,
            prompt_suffix=": ",
            err=self.err,
            **convert,
        )


def _interview(cluster_key: str, *, err: bool) -> tuple[list[NodeInput], ClusterInput]:
    """RKE's questions, in RKE's order, with rke-py's defaults (`[none]`: leave the key out).

    Two differences from `rke config`: the role questions default to `roles_by_count`, so pressing Enter
    throughout gives a valid cluster; and there is no question for an inline private key, which would end
    up in this 0640 file. Addon manifests are not asked for: rke-py does not deploy addons.
    """
    ask = _Prompter(err)
    cluster = ClusterInput(written_by="rke-py config (answers to its questions)")
    cluster.ssh_key_path = ask.text("Cluster Level SSH Private Key Path", cluster_key, required=True)
    count = ask.number("Number of Hosts", 1, 1)
    nodes = [_ask_node(ask, index, count) for index in range(count)]
    cluster.network_plugin = ask.choice(
        f"Network Plugin Type ({', '.join(NETWORK_PLUGINS)})", cluster.network_plugin, NETWORK_PLUGINS
    )
    cluster.authentication_strategy = ask.text("Authentication Strategy", cluster.authentication_strategy)
    cluster.authorization_mode = ask.choice(
        f"Authorization Mode ({', '.join(AUTHZ_MODES)})", cluster.authorization_mode, AUTHZ_MODES
    )
    cluster.kubernetes_version = ask.text("Kubernetes version", kdm.DEFAULT_K8S_VERSION, required=True)
    cluster.cluster_domain = ask.text("Cluster domain", cluster.cluster_domain, required=True)
    cluster.service_cluster_ip_range = ask.text(
        "Service Cluster IP Range", cluster.service_cluster_ip_range, required=True
    )
    cluster.cluster_cidr = ask.text("Cluster Network CIDR", cluster.cluster_cidr, required=True)
    cluster.cluster_dns_server = ask.text("Cluster DNS Service IP", cluster.cluster_dns_server, required=True)
    return nodes, cluster


def _ask_node(ask: _Prompter, index: int, count: int) -> NodeInput:
    address = ask.text(f"SSH Address of host ({index + 1})", required=True)
    port = ask.number(f"SSH Port of host ({index + 1})", int(defaults.SSH_PORT), 1, 65535)
    key = ask.text(f"SSH Private Key Path of host ({address})")
    user = ask.text(f"SSH User of host ({address})", DEFAULT_USER, required=True)
    suggested = roles_by_count(count)[index]
    questions = {
        "controlplane": f"Is host ({address}) a Control Plane host (y/n)?",
        "worker": f"Is host ({address}) a Worker host (y/n)?",
        "etcd": f"Is host ({address}) an etcd host (y/n)?",
    }
    while True:
        answers = {
            role: ask.choice(question, "y" if role in suggested else "n", ("y", "n"))
            for role, question in questions.items()
        }
        roles = [role for role in ROLES if answers[role] == "y"]
        if roles:
            break
        click.echo(f"[-] A host needs at least one role ({', '.join(ROLES)}); asking again.", err=ask.err)
    hostname = ask.text(f"Override Hostname of host ({address})")
    internal = ask.text(f"Internal IP of host ({address})")
    socket = ask.text(f"Docker socket path on host ({address})", defaults.DOCKER_SOCKET, required=True)
    return NodeInput(
        address=address,
        roles=roles,
        user=user,
        port=port,
        ssh_key_path=key,
        internal_address=internal,
        hostname_override=hostname,
        docker_socket="" if socket == defaults.DOCKER_SOCKET else socket,
    )
