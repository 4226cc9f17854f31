"""Pipelines rely on these: one run per cluster at a time, and a log file named when something fails."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from unittest import mock

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

import rke_py.cli as cli_module
from rke_py.cli import output
from rke_py.errors import ExitStatus, Terminated

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


@pytest.mark.parametrize(
    ("sig", "code", "said"),
    [
        (signal.SIGINT, ExitStatus.INTERRUPTED, "interrupted; run the command again to finish what it began"),
        (
            signal.SIGTERM,
            ExitStatus.TERMINATED,
            "terminated (SIGTERM); run the command again to finish what it began",
        ),
    ],
)
def test_a_run_stopped_by_a_signal_says_so_and_exits_with_its_code(tmp_path: Path, sig, code, said):
    """A cancelled CI job sends SIGTERM: the run stops as Ctrl-C stops it, not with Python's default death."""
    silent = socket.create_server(("127.0.0.1", 0))  # takes the connection, never says a word of SSH
    key = tmp_path / "id_ed25519"
    key.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption())
    )
    key.chmod(0o600)
    config = tmp_path / "cluster.yml"
    config.write_text(
        f"nodes:\n- address: 127.0.0.1\n  port: {silent.getsockname()[1]}\n  user: root\n"
        f"  ssh_key_path: {key}\n  role: [etcd, controlplane, worker]\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "rke_py", "up", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    with silent:
        for line in proc.stderr:
            if line.rstrip().endswith("phase: connecting to every host"):
                break
        proc.send_signal(sig)
        stderr = proc.stderr.read()
        assert proc.wait(timeout=30) == code, stderr
    assert "Traceback" not in stderr
    assert stderr.strip().splitlines()[-1] == said, stderr


def test_an_error_raised_while_a_signal_unwound_the_run_is_reported_as_the_signal(capsys):
    """A signal lands anywhere, even inside a lock's release; what that breaks on the way out is not the
    run's failure."""

    def broken_by_sigterm(*args, **kwargs):
        try:
            raise Terminated
        except Terminated:
            raise RuntimeError("release unlocked lock") from None

    with mock.patch.object(cli_module.cli, "main", broken_by_sigterm), pytest.raises(SystemExit) as stopped:
        cli_module.main(["version"])
    assert stopped.value.code == ExitStatus.TERMINATED
    assert capsys.readouterr().err.startswith("terminated (SIGTERM); run the command again")


def test_an_eof_error_escaping_a_command_is_not_reported_as_ctrl_c():
    """click turns any EOFError into the Abort it raises for Ctrl-C: one that escaped the SSH library
    (a host restarting) was told to the user as "interrupted" and exit 130, hiding where it came from."""
    with mock.patch.object(cli_module.cli, "invoke", side_effect=EOFError), pytest.raises(EOFError):
        cli_module.main(["version"])


def test_the_log_keeps_why_a_connection_failed_but_not_each_refused_probe(tmp_path: Path):
    log_file = tmp_path / "cluster.rke-py.log"
    output.setup_logging(log_file)
    try:
        transport = logging.getLogger("paramiko.transport")
        transport.error("Secsh channel 10 open FAILED: Connection refused: Connect failed")
        transport.error("Secsh channel 11 open FAILED: Administratively prohibited: open failed")
        transport.error("Socket exception: Connection reset by peer (104)")
    finally:
        output.setup_logging(None)
    text = log_file.read_text()
    assert "Connection refused" not in text
    assert "Administratively prohibited" in text
    assert "Connection reset by peer" in text
