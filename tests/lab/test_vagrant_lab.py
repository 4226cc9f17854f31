"""vagrant/Vagrantfile checked by Vagrant itself, and `--from-vagrant` against the real `vagrant` program.

No VM is started: there is no hypervisor here. `vagrant validate --ignore-provider` loads the Vagrantfile
and checks every machine's configuration (unknown settings, provisioner options) without a provider.
Debian's package: `apt-get install --no-install-recommends vagrant`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rke_py.cli import main
from rke_py.errors import ExitStatus

pytestmark = pytest.mark.lab

VAGRANTFILE = Path(__file__).parents[2] / "vagrant" / "Vagrantfile"
VAGRANT = shutil.which("vagrant")
needs_vagrant = pytest.mark.skipif(
    VAGRANT is None, reason="vagrant is not installed (apt-get install --no-install-recommends vagrant)"
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the lab's Vagrantfile, so Vagrant's state (.vagrant/, ~/.vagrant.d) stays in tmp_path."""
    directory = tmp_path / "lab"
    directory.mkdir()
    shutil.copy(VAGRANTFILE, directory / "Vagrantfile")
    return directory


def vagrant(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "VAGRANT_HOME": str(project.parent / "vagrant.d"), **env}
    environment.pop("VAGRANT_CWD", None)
    return subprocess.run(
        [VAGRANT or "vagrant", *args],
        cwd=project,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_vagrantfile_is_valid_ruby():
    result = subprocess.run(["ruby", "-c", str(VAGRANTFILE)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Syntax OK"


@needs_vagrant
@pytest.mark.parametrize("nodes", ["1", "3", "5"])
def test_vagrant_validates_the_lab(project: Path, nodes: str):
    result = vagrant(project, "validate", "--ignore-provider", RKE_PY_NODES=nodes)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Vagrantfile validated successfully." in result.stdout
    machines = [line for line in result.stdout.splitlines() if "Ignoring provider config" in line]
    assert [line.split(":")[0] for line in machines] == [f"==> node-{i}" for i in range(1, int(nodes) + 1)]


@needs_vagrant
def test_cpus_may_be_given_by_machine(project: Path):
    result = vagrant(project, "validate", "--ignore-provider", RKE_PY_CPUS="2,1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Vagrantfile validated successfully." in result.stdout


@needs_vagrant
def test_a_missing_public_key_does_not_stop_validate_or_destroy(project: Path, tmp_path: Path):
    # Only `up`, `provision` and `reload` need the key (a trigger stops them early with a message).
    result = vagrant(project, "validate", "-p", RKE_PY_SSH_PUBKEY=str(tmp_path / "missing.pub"))
    assert result.returncode == 0, result.stderr


@needs_vagrant
@pytest.mark.parametrize("setting", ["RKE_PY_NODES", "RKE_PY_MEMORY", "RKE_PY_CPUS"])
def test_a_bad_number_in_the_environment_is_named(project: Path, setting: str):
    result = vagrant(project, "validate", "-p", **{setting: "two"})
    assert result.returncode != 0
    assert f'{setting}="two" is not a positive whole number' in result.stderr


@needs_vagrant
@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("RKE_PY_LIBVIRT_DRIVER", "xen", 'RKE_PY_LIBVIRT_DRIVER="xen": use kvm or qemu'),
        ("RKE_PY_INSECURE_REGISTRY", "a b:5000", 'RKE_PY_INSECURE_REGISTRY="a b:5000" is not host:port'),
        ("RKE_PY_POD_NETWORK", "flannel", 'RKE_PY_POD_NETWORK="flannel": use bridge, or leave it unset'),
        ("RKE_PY_CPUS", "2,x", 'RKE_PY_CPUS="2,x" is not a positive whole number, nor a list of them'),
        ("RKE_PY_CPUS", "2,", 'RKE_PY_CPUS="2," is not a positive whole number, nor a list of them'),
    ],
)
def test_a_bad_setting_is_named(project: Path, setting: str, value: str, message: str):
    # These reach a shell on the machines (daemon.json, the CNI config): only known shapes pass.
    result = vagrant(project, "validate", "-p", **{setting: value})
    assert result.returncode != 0
    assert message in result.stderr


@needs_vagrant
def test_from_vagrant_reports_what_vagrant_says_when_no_machine_runs(project: Path, capsys, monkeypatch):
    monkeypatch.setenv("VAGRANT_HOME", str(project.parent / "vagrant.d"))
    with pytest.raises(SystemExit) as exit_info:
        main(["config", "--print", "--from-vagrant", str(project)])
    err = capsys.readouterr().err
    assert exit_info.value.code == ExitStatus.ERROR
    assert f"`vagrant ssh-config` in {project} failed; are the machines running (`vagrant up` there)?" in err
    assert "Vagrant says: " in err
