"""`rke-py config` as a user runs it: exit codes, messages, the file it writes and its mode."""

from __future__ import annotations

import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from rke_py.cli import main
from rke_py.config import load
from rke_py.errors import ExitStatus


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def rke_py(capsys: pytest.CaptureFixture[str]):
    """Run the real entry point (exit codes as a shell sees them); stdin is not a terminal under pytest."""

    def run(*args: str) -> Run:
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        return Run(int(exit_info.value.code), captured.out, captured.err)

    return run


def test_nodes_from_options_make_a_valid_file_with_mode_0640(rke_py, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    result = rke_py(
        "config",
        "--name",
        str(path),
        "--node",
        "10.0.0.1:etcd,controlplane,worker",
        "--node",
        "10.0.0.2:worker@admin",
        "--ssh-key-path",
        "~/.ssh/id_ed25519",
    )
    assert result.code == ExitStatus.OK, result.err
    assert result.out == (
        f"Wrote {path} (2 nodes: 1 etcd, 1 controlplane, 2 worker). Next: rke-py up --config {path}\n"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    loaded = load(path)
    assert loaded.warnings == []
    config = loaded.config
    assert [(n.address, n.user, n.role) for n in config.nodes] == [
        ("10.0.0.1", "ubuntu", ["etcd", "controlplane", "worker"]),
        ("10.0.0.2", "admin", ["worker"]),
    ]
    assert config.ssh_key_path == "~/.ssh/id_ed25519"
    assert [n.ssh_key_path for n in config.nodes] == ["~/.ssh/id_ed25519"] * 2
    assert "# Written by `rke-py config --node=10.0.0.1:etcd,controlplane,worker" in path.read_text()


def test_default_name_is_cluster_yml_in_the_current_directory(rke_py, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rke_py("config", "--node", "10.0.0.1:etcd,controlplane,worker").code == ExitStatus.OK
    assert (tmp_path / "cluster.yml").is_file()


def test_existing_file_is_kept_without_force(rke_py, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text("# my cluster\n")
    result = rke_py("config", "--name", str(path), "--node", "10.0.0.1:etcd,controlplane,worker")
    assert result.code == ExitStatus.CONFIG
    assert "already exists; pass --force to overwrite it" in result.err
    assert path.read_text() == "# my cluster\n"


def test_force_overwrites_and_sets_mode_0640(rke_py, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_text("# my cluster\n")
    path.chmod(0o644)
    result = rke_py("config", "--force", "--name", str(path), "--node", "10.0.0.9:etcd,controlplane,worker")
    assert result.code == ExitStatus.OK, result.err
    assert load(path).config.nodes[0].address == "10.0.0.9"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_print_writes_the_file_to_stdout_only(rke_py, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cluster.yml").write_text("# my cluster\n")
    result = rke_py("config", "--print", "--node", "10.0.0.1:etcd,controlplane,worker")
    assert result.code == ExitStatus.OK
    assert result.out.startswith("# If you intended to deploy Kubernetes in an air-gapped environment,\n")
    assert "  - address: 10.0.0.1\n" in result.out
    assert result.err == ""
    assert (tmp_path / "cluster.yml").read_text() == "# my cluster\n"


def test_unknown_role_exits_2_listing_the_roles(rke_py, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    result = rke_py("config", "--name", str(path), "--node", "10.0.0.1:etcd,master")
    assert result.code == ExitStatus.CONFIG
    assert (
        result.err
        == 'error: unknown role "master" for 10.0.0.1; a role is one of etcd, controlplane, worker\n'
    )
    assert not path.exists()


def test_nodes_that_make_no_cluster_are_refused_and_nothing_is_written(rke_py, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    result = rke_py("config", "--name", str(path), "--node", "10.0.0.1:etcd", "--node", "10.0.0.1:worker")
    assert result.code == ExitStatus.CONFIG
    assert "nothing was written" in result.err
    assert "no node has the controlplane role" in result.err
    assert 'duplicate address "10.0.0.1"' in result.err
    assert not path.exists()


def test_an_even_etcd_count_is_written_with_the_loaders_warning(rke_py, tmp_path: Path):
    path = tmp_path / "cluster.yml"
    nodes = ["--node", "10.0.0.1:etcd,controlplane,worker", "--node", "10.0.0.2:etcd,worker"]
    result = rke_py("config", "--name", str(path), *nodes)
    assert result.code == ExitStatus.OK
    assert "warning: 2 etcd nodes" in result.err
    assert path.exists()


def test_without_a_terminal_the_questions_are_refused_naming_the_flags(rke_py, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = rke_py("config")
    assert result.code == ExitStatus.CONFIG
    assert "stdin is not a terminal" in result.err
    assert "--node ADDRESS:ROLE[,ROLE][@USER]" in result.err
    assert "--from-vagrant [DIR]" in result.err
    assert list(tmp_path.iterdir()) == []


def test_node_and_from_vagrant_exclude_each_other(rke_py, tmp_path: Path):
    result = rke_py(
        "config", "--name", str(tmp_path / "c.yml"), "--node", "10.0.0.1:worker", "--from-vagrant"
    )
    assert result.code == ExitStatus.CONFIG
    assert "--node and --from-vagrant" in result.err


def test_help_lists_every_option(rke_py):
    result = rke_py("config", "--help")
    assert result.code == ExitStatus.OK
    for option in ("--name", "--node", "--ssh-key-path", "--print", "--from-vagrant [DIR]", "--force"):
        assert option in result.out
