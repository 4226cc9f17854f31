"""RKE's command line, flag for flag: a pipeline that calls `rke` works when it calls `rke-py`.

The flag table is RKE v1.5.14's (tests/fixtures/cli/rke-v1.5.14-flags.tsv); every row must parse with the
meaning RKE gives it, and the flags that change what a run does are run on in-memory hosts.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from rke_py.cli import cli, main
from rke_py.cli.goflags import normalize
from rke_py.deploy.desired import prepare
from rke_py.deploy.session import Options, SSHConnector
from rke_py.deploy.targets import ssh_target
from rke_py.errors import ExitStatus, UsageError
from rke_py.state import kubeconfig_path_for, read_state, state_path_for
from tests.unit.fakehost import FakeHost
from tests.unit.test_deploy_fake import FIVE_NODES, Cluster

TABLE = Path(__file__).parents[1] / "fixtures" / "cli" / "rke-v1.5.14-flags.tsv"
ONE_NODE = "nodes:\n  - {address: 192.0.2.1, user: root, role: [etcd, controlplane, worker]}\n"


@dataclass(frozen=True)
class Flag:
    command: tuple[str, ...]
    names: tuple[str, ...]  # long first, as RKE declares them
    takes: str  # bool, string or slice
    env: str

    def __str__(self) -> str:
        return f"{' '.join(self.command) or 'rke'} --{self.names[0]}"


def rke_flags() -> list[Flag]:
    rows = [line.split("\t") for line in TABLE.read_text().splitlines() if line and not line.startswith("#")]
    assert rows[0] == ["command", "flag", "takes", "env"]
    return [
        Flag(tuple(c.split()) if c != "-" else (), tuple(f.split(",")), t, "" if e == "-" else e)
        for c, f, t, e in rows[1:]
    ]


FLAGS = rke_flags()
# Values a flag's type accepts here; any other string for the rest.
VALUES = {"service": "etcd", "s3-endpoint-ca": "FILE", "version": "v1.28.7-rancher1-1"}
REQUIRED = {("etcd", "snapshot-restore"): ["--name", "snap"]}


def command_of(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, f"rke-py has no command {' '.join(path)}"
        command = found
    return command


def parse(path: tuple[str, ...], args: list[str]) -> click.Context:
    """`args` parsed by the command `path` as `rke-py` parses a command line, without running it."""
    command = command_of(path)
    args = normalize([*path, *args], cli)[len(path) :]
    return command.make_context(" ".join(path) or "rke-py", [*REQUIRED.get(path, []), *args])


def test_the_table_names_every_rke_command_rke_py_must_answer():
    assert {f.command for f in FLAGS} == {
        (),
        ("up",),
        ("remove",),
        ("version",),
        ("config",),
        ("etcd", "snapshot-save"),
        ("etcd", "snapshot-restore"),
        ("cert", "rotate"),
        ("cert", "generate-csr"),
        ("encrypt", "rotate-key"),
        ("util", "get-state-file"),
        ("util", "get-kubeconfig"),
    }


@pytest.mark.parametrize(
    "flag, name",
    [(f, n) for f in FLAGS if f.command and f.names[0] not in ("local", "dind") for n in f.names],
    ids=lambda x: str(x),
)
def test_every_rke_flag_is_accepted_and_sets_what_rke_means(flag: Flag, name: str, tmp_path: Path):
    """Long and short names; a value flag's value reaches the option that carries RKE's meaning."""
    dash = "--" if len(name) > 1 else "-"
    if flag.takes == "bool":
        args = [f"{dash}{name}"]
    else:
        value = VALUES.get(flag.names[0], str(tmp_path / "given"))
        if value == "FILE":
            value = str(tmp_path / "ca.pem")
            Path(value).write_text("x")
        args = [f"{dash}{name}", value]
    default = parse(flag.command, []).params
    given = parse(flag.command, args).params
    changed = {k: v for k, v in given.items() if v != default[k]}
    assert len(changed) == 1, f"{flag}: {changed}"
    (got,) = changed.values()
    if flag.takes == "bool":
        assert got is True
    else:
        assert got in (args[1], (args[1],)), f"{flag}: {got!r}"


@pytest.mark.parametrize("flag", [f for f in FLAGS if not f.command], ids=str)
def test_rkes_global_flags_are_accepted_before_the_command(flag: Flag, capsys):
    for name in flag.names:
        dash = "--" if len(name) > 1 else "-"
        with pytest.raises(SystemExit) as done:
            main([f"{dash}{name}", "config", "--list-version"])
        assert done.value.code == 0
        out = capsys.readouterr().out
        if flag.names[0] in ("help", "version"):
            assert out.startswith("Usage: rke-py" if flag.names[0] == "help" else "rke-py, version")
        else:
            assert out == "v1.30.4-rancher1-1\n"


@pytest.mark.parametrize("flag", [f for f in FLAGS if f.names[0] in ("local", "dind")], ids=str)
def test_rkes_local_and_dind_modes_are_refused_in_one_line_naming_what_to_use(flag: Flag):
    with pytest.raises(UsageError) as refused:
        parse(flag.command, [f"--{flag.names[0]}"])
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"--{flag.names[0]} is not supported: ") and "`rke-py lab up --nodes" in message


@pytest.mark.parametrize("flag", [f for f in FLAGS if f.env], ids=str)
def test_the_environment_variables_rke_reads_are_read(flag: Flag, monkeypatch):
    monkeypatch.setenv(flag.env, "/from/the/environment.yml")
    assert parse(flag.command, []).params["config_path"] == "/from/the/environment.yml"


def test_gos_flag_syntax_is_taken_as_rke_takes_it():
    """Go's flag package: a long flag after one dash, a boolean with a value, `=` or a separate value."""
    assert normalize(["up", "-config", "a.yml", "--update-only=true", "-init=false"], cli) == [
        "up",
        "--config",
        "a.yml",
        "--update-only",
    ]
    assert normalize(["etcd", "snapshot-save", "-name=-x", "-s3", "--folder", "-f"], cli) == [
        "etcd",
        "snapshot-save",
        "--name=-x",
        "--s3",
        "--folder",
        "-f",
    ]
    assert normalize(["-debug", "config", "-n", "x.yml", "-empty"], cli) == [
        "--debug",
        "config",
        "-n",
        "x.yml",
        "--empty",
    ]
    assert normalize(["up", "--update-only=maybe", "--", "-config"], cli) == [
        "up",
        "--update-only=maybe",
        "--",
        "-config",
    ]
    assert parse(("up",), ["--update-only=false"]).params["update_only"] is False


def write(tmp_path: Path, text: str = ONE_NODE) -> str:
    path = tmp_path / "cluster.yml"
    path.write_text(text)
    return str(path)


def test_up_init_writes_the_state_and_touches_no_host(tmp_path: Path, capsys):
    """192.0.2.1 answers nothing: a run that tried to connect would fail with exit 3."""
    path = write(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["up", "--init", "--config", path])
    assert done.value.code == ExitStatus.OK
    state = read_state(state_path_for(path))
    assert state is not None and "kube-ca" in state.desired.certificates and not state.current.rke_config
    assert capsys.readouterr().out.startswith(f"state written to {state_path_for(path)}")
    before = state_path_for(path).read_text()
    with pytest.raises(SystemExit):
        main(["up", "--init", "--config", path])
    assert state_path_for(path).read_text() == before  # the certificates are kept, as RKE's init keeps them


def test_quiet_prints_only_errors_and_json_stays_one_document(tmp_path: Path, capsys):
    path = write(tmp_path)
    with pytest.raises(SystemExit) as done:
        main(["--quiet", "up", "--init", "--config", path])
    assert done.value.code == 0
    assert capsys.readouterr() == ("", "")
    with pytest.raises(SystemExit):
        main(["-q", "up", "--init", "--config", path, "--output", "json"])
    assert json.loads(capsys.readouterr().out)["ok"] is True
    with pytest.raises(SystemExit) as failed:
        main(["-q", "up", "--init", "--config", str(tmp_path / "missing.yml")])
    assert failed.value.code == ExitStatus.CONFIG
    out, err = capsys.readouterr()
    assert out == "" and "missing.yml" in err


def test_get_kubeconfig_writes_the_admin_kubeconfig_back_from_the_state(tmp_path: Path, capsys):
    cluster = Cluster(tmp_path)
    cluster.up()
    kubeconfig = kubeconfig_path_for(cluster.path)
    written = kubeconfig.read_text()
    kubeconfig.unlink()
    with pytest.raises(SystemExit) as done:
        main(["util", "get-kubeconfig", "--config", str(cluster.path)])
    assert done.value.code == 0
    assert kubeconfig.read_text() == written and kubeconfig.stat().st_mode & 0o777 == 0o600
    assert capsys.readouterr().out == f"kubeconfig written to {kubeconfig}\n"
    kubeconfig.write_text("edited")
    with pytest.raises(SystemExit):
        main(["util", "get-kubeconfig", "--config", str(cluster.path), "-o", "json"])
    doc = json.loads(capsys.readouterr().out)
    assert kubeconfig.read_text() == written and Path(doc["previous"]).read_text() == "edited"


def test_get_kubeconfig_without_a_running_cluster_says_what_to_do(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as done:
        main(["util", "get-kubeconfig", "--config", write(tmp_path)])
    assert done.value.code == ExitStatus.CONFIG  # the local state says there is nothing to read
    assert "records no running cluster: run `rke-py up`" in capsys.readouterr().err


def test_update_only_leaves_the_clusters_hosts_alone_and_deploys_new_workers(tmp_path: Path):
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    changed = textwrap.dedent(FIVE_NODES) + (
        "  - {address: 10.0.0.6, user: root, role: [worker]}\nservices: {kubelet: {extra_args: {v: '3'}}}\n"
    )
    cluster.write(changed)
    FakeHost(cluster.world, cluster.desired().config.nodes[5])
    cluster.world.events.clear()
    done = cluster.up(Options(verify=False, update_only=True))
    touched = {event.split()[0] for event in cluster.world.events if event[0].isdigit()}
    assert touched == {"10.0.0.6"}
    assert [a for address, acts in done.host_actions.items() if address != "10.0.0.6" for a in acts] == []
    assert {c.name for c in cluster.host("10.0.0.6").docker.by_id.values()} >= {"kubelet", "nginx-proxy"}
    replaced = cluster.plan().host_actions  # the kubelet flag is still to come, as with RKE
    assert all(any(a.kind == "replace" for a in replaced[f"10.0.0.{i}"]) for i in range(1, 6))


def test_update_only_refuses_a_new_controlplane_host_before_changing_anything(tmp_path: Path):
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up()
    cluster.write(textwrap.dedent(FIVE_NODES) + "  - {address: 10.0.0.6, user: root, role: [controlplane]}\n")
    FakeHost(cluster.world, cluster.desired().config.nodes[5])
    cluster.world.events.clear()
    with pytest.raises(UsageError, match=r"10\.0\.0\.6 is a new controlplane host; nothing was changed"):
        cluster.up(Options(verify=False, update_only=True))
    assert [e for e in cluster.world.events if e[0].isdigit() and "exec" not in e] == []


def test_update_only_on_a_new_cluster_builds_all_of_it(tmp_path: Path):
    cluster = Cluster(tmp_path, FIVE_NODES)
    cluster.up(Options(verify=False, update_only=True))
    assert cluster.plan().host_actions == {f"10.0.0.{i}": [] for i in range(1, 6)}


def test_ssh_agent_auth_asks_the_agent_first_on_every_host_and_the_bastion(tmp_path: Path):
    path = write(tmp_path, ONE_NODE + "bastion_host: {address: 192.0.2.9, user: jump}\n")
    desired = prepare(path)
    plain, agent = (SSHConnector(desired, Options(ssh_agent_auth=flag)) for flag in (False, True))
    assert not ssh_target(desired.config.nodes[0], plain.config).ssh_agent_auth
    assert ssh_target(desired.config.nodes[0], agent.config).ssh_agent_auth
    assert agent.connections.bastion_target.ssh_agent_auth
    assert not desired.config.ssh_agent_auth  # the file's setting is not changed for later commands
