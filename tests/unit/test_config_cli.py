"""`rke-py validate` and `rke-py version` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from rke_py import __version__
from rke_py.cli import cli
from rke_py.errors import ConfigError, ExitStatus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "config"
EXAMPLE = Path(__file__).parents[2] / "cluster.yml.example"
NO_USER = "nodes:\n  - address: 192.0.2.11\n    role: [etcd, controlplane, worker]\n"
TYPO = "clustr_name: x\n" + NO_USER.replace("    role:", "    user: u\n    role:")


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cluster.yml"
    path.write_text(text)
    return str(path)


def test_validate_summarises_a_valid_file():
    result = invoke("validate", "--config", str(EXAMPLE))
    assert result.exit_code == 0
    assert result.stdout == f"{EXAMPLE}: valid (5 nodes: 3 etcd, 3 controlplane, 2 worker)\n"
    assert result.stderr == ""


def test_validate_prints_warnings_on_stderr_and_still_passes(tmp_path: Path):
    path = write(tmp_path, TYPO)
    result = invoke("validate", "--config", path)
    assert result.exit_code == 0
    assert result.stderr == (
        f'{path}:1:1: warning: unknown key "clustr_name" at the top level is ignored'
        ' — remove it or check the spelling (did you mean "cluster_name"?)\n'
    )
    assert result.stdout.endswith(": valid (1 node: 1 etcd, 1 controlplane, 1 worker)\n")


def test_validate_strict_fails_on_warnings(tmp_path: Path):
    result = invoke("validate", "--strict", "--config", write(tmp_path, TYPO))
    assert isinstance(result.exception, ConfigError)
    assert result.exception.exit_status == ExitStatus.CONFIG
    assert "unknown key" in str(result.exception)


def test_validate_raises_every_problem_for_main_to_print(tmp_path: Path):
    path = write(tmp_path, NO_USER + "network:\n  plugin: nope\n")
    result = invoke("validate", "--config", path)
    assert isinstance(result.exception, ConfigError)
    assert [p.line for p in result.exception.problems] == [2, 5]


def test_validate_json_for_a_valid_file():
    result = invoke("validate", "-o", "json", "--config", str(EXAMPLE))
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"valid": True, "problems": [], "nodes": 5}


def test_validate_json_for_an_invalid_file(tmp_path: Path):
    path = write(tmp_path, NO_USER)
    result = invoke("validate", "--output", "json", "--config", path)
    assert isinstance(result.exception, ConfigError)
    assert json.loads(result.stdout) == {
        "valid": False,
        "problems": [
            {
                "file": path,
                "line": 2,
                "col": 5,
                "severity": "error",
                "message": "nodes[0] (192.0.2.11) has no user",
                "hint": 'add "user: <SSH user>", e.g. "user: ubuntu"',
            }
        ],
        "nodes": 0,
    }


def test_version_names_rke_py_and_the_default_kubernetes():
    result = invoke("version")
    assert result.exit_code == 0
    assert result.stdout == f"rke-py {__version__}\ndefault Kubernetes version: v1.30.4-rancher1-1\n"


def test_version_json():
    result = invoke("version", "--output", "json")
    info = json.loads(result.stdout)
    assert info["rke_py"] == __version__
    assert info["default_kubernetes_version"] == "v1.30.4-rancher1-1"


def run_module(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "rke_py", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_main_exits_2_and_prints_every_problem(tmp_path: Path):
    (tmp_path / "cluster.yml").write_text(NO_USER + "network:\n  plugin: flanel\n")
    result = run_module("validate", cwd=tmp_path)
    assert result.returncode == ExitStatus.CONFIG
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        'cluster.yml:2:5: nodes[0] (192.0.2.11) has no user — add "user: <SSH user>", e.g. "user: ubuntu"',
        'cluster.yml:5:3: unknown network plugin "flanel" — use one of canal, flannel, calico, none'
        ' (did you mean "flannel"?)',
    ]


def test_main_exits_2_when_the_file_is_missing(tmp_path: Path):
    result = run_module("validate", "--config", "missing.yml", cwd=tmp_path)
    assert result.returncode == ExitStatus.CONFIG
    assert result.stderr == (
        'missing.yml: config file not found — run "rke-py config" to write one, or pass --config PATH\n'
    )
