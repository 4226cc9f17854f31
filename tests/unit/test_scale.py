"""How rke-py's work grows with the cluster, counted on simulated hosts (the scale benchmark at small sizes):
calls, connections and hosts at once, never times."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import simulated

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"
SIZES = (12, 24)
CONCURRENCY = 4
LATENCY_MS = 2


@pytest.fixture(scope="module")
def rows() -> dict[tuple[int, str], dict[str, int]]:
    args = ["--nodes", *map(str, SIZES), "--latency-ms", str(LATENCY_MS), "--concurrency", str(CONCURRENCY)]
    done = subprocess.run(
        [sys.executable, str(BENCH), *args, "--output", "json"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return {(r["nodes"], r["operation"]): r for r in json.loads(done.stdout)}


def test_every_operation_is_measured_at_every_size(rows):
    operations = ("up", "noop-up", "plan", "status", "kubelet-change", "add-10", "remove-10")
    assert set(rows) == {(n, op) for n in SIZES for op in operations}
    for row in rows.values():
        assert set(row) >= {"wall_s", "cpu_s", "peak_rss_mib", "ssh_commands", "docker_calls", "api_requests"}


def test_one_ssh_connection_per_host_per_run(rows):
    for nodes in SIZES:
        for operation in ("up", "noop-up", "plan", "status", "kubelet-change"):
            assert rows[nodes, operation]["ssh_sessions"] == nodes
        # the ten new hosts join; the ten that left are still reached once, to be cleaned
        assert rows[nodes, "add-10"]["ssh_sessions"] == nodes + 10
        assert rows[nodes, "remove-10"]["ssh_sessions"] == nodes + 10


def test_no_more_hosts_at_once_than_concurrency_allows(rows):
    """Hosts prepared in the background and the plane being changed share the one bound."""
    assert max(r["peak_hosts"] for r in rows.values()) == CONCURRENCY


def test_a_no_op_up_asks_the_api_the_same_whatever_the_node_count(rows):
    small, large = (rows[n, "noop-up"] for n in SIZES)
    assert small["api_requests"] == large["api_requests"]
    assert rows[SIZES[1], "plan"]["api_requests"] == rows[SIZES[0], "plan"]["api_requests"]


def test_a_no_op_up_only_reads_the_hosts(rows):
    """Two Docker reads a host (containers, images), as `plan` makes: nothing is created or pulled, and
    Docker's version is the one it told at connect."""
    for nodes in SIZES:
        assert rows[nodes, "noop-up"]["docker_calls"] == rows[nodes, "plan"]["docker_calls"] == 2 * nodes


def test_the_kubelet_change_cordons_and_uncordons_each_node_once(rows):
    """Per Node: a cordon, then a Ready read and an uncordon; the rest of the run does not grow with it."""
    small, large = (rows[n, "kubelet-change"]["api_requests"] for n in SIZES)
    assert large - small == 3 * (SIZES[1] - SIZES[0])


def test_the_floor_is_below_the_wall_time_and_above_the_logins_alone(rows):
    """The floor is what the round trips allow: never more than the run took, never less than logging in
    to every host, `--concurrency` at a time, costs."""
    for (nodes, operation), row in rows.items():
        assert 0 < row["floor_s"] <= row["wall_s"], (nodes, operation)
        assert row["x_floor"] >= 1
    for nodes in SIZES:
        waves = -(-nodes // CONCURRENCY)
        logins = waves * simulated.ROUND_TRIPS["connect"] * LATENCY_MS / 1000
        assert rows[nodes, "noop-up"]["floor_s"] >= logins
