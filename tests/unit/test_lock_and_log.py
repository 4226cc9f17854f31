"""Pipelines rely on these: one run per cluster at a time, and a log file named when something fails."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from rke_py.errors import ExitStatus

HOLD = """
import sys, time
from pathlib import Path
from rke_py.lock import cluster_lock
with cluster_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def rke_py(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rke_py", *args], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )


def test_a_second_run_on_the_same_cluster_exits_with_the_lock_message(tmp_path: Path):
    config = tmp_path / "cluster.yml"
    config.write_text((Path(__file__).parents[2] / "cluster.yml.example").read_text())
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        run = rke_py("up", "--config", str(config))
        assert run.returncode == ExitStatus.LOCKED
        assert f"another rke-py run is working on {config}" in run.stderr
        assert f"pid {holder.pid}" in run.stderr
        assert time.monotonic() - started < 10  # refused at once, no host contacted
        assert not (tmp_path / "cluster.rkestate").exists()  # nothing written
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_released_when_its_holder_dies(tmp_path: Path):
    config = tmp_path / "cluster.yml"
    config.write_text("nodes: []\n")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(config)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    run = rke_py("up", "--config", str(config))
    assert run.returncode == ExitStatus.CONFIG  # past the lock, stopped by the empty node list
    assert "log file:" in run.stderr


def test_a_failed_run_names_its_log_file_and_the_log_has_the_detail(tmp_path: Path):
    config = tmp_path / "cluster.yml"
    config.write_text("nodes:\n- address: 10.0.0.1\n  role: [etcd, controlplane, worker]\n")
    run = rke_py("up", "--config", str(config))
    log = tmp_path / "cluster.rke-py.log"
    assert run.returncode == ExitStatus.CONFIG
    assert f"log file: {log}" in run.stderr
    text = log.read_text()
    assert "rke-py up --config" in text
    assert "has no user" in text  # the problem itself, not only that the run failed


def test_the_log_file_is_private_and_never_written_through_a_link(tmp_path: Path):
    config = tmp_path / "cluster.yml"
    config.write_text("nodes: []\n")
    log = tmp_path / "cluster.rke-py.log"
    log.write_text("an earlier run\n")
    log.chmod(0o644)
    run = rke_py("up", "--config", str(config))
    assert run.returncode == ExitStatus.CONFIG
    assert log.stat().st_mode & 0o777 == 0o600  # narrowed, and the earlier runs are still there
    assert log.read_text().startswith("an earlier run\n")

    log.unlink()
    elsewhere = tmp_path / "elsewhere"
    log.symlink_to(elsewhere)
    run = rke_py("up", "--config", str(config))
    assert run.returncode == ExitStatus.CONFIG
    assert f"{log} is a symbolic link" in run.stderr
    assert not elsewhere.exists()


def test_the_lock_file_is_never_opened_through_a_link(tmp_path: Path):
    config = tmp_path / "cluster.yml"
    config.write_text("nodes: []\n")
    target = tmp_path / "target"
    (tmp_path / ".cluster.yml.rke-py.lock").symlink_to(target)
    run = rke_py("up", "--config", str(config), "--log-file", str(tmp_path / "run.log"))
    assert run.returncode == ExitStatus.CONFIG
    assert "is a symbolic link" in run.stderr
    assert not target.exists()
