"""`cluster.rkestate`: the CA, every certificate, and the last applied config, in RKE's own format.

The file is RKE's `FullState` (`rke:cluster/state.go`): `desiredState` and `currentState`, each with
`rkeConfig` (the cluster.yml model under its *json* names, camelCase), `certificatesBundle` and
`encryptionConfig`, indented two spaces. RKE and rke-py can take over each other's clusters. What rke-py
keeps beyond that (pinned SSH host keys, etcd members it is adding) sits under a top-level `rkePy` key,
which RKE's JSON decoder ignores.
"""

from __future__ import annotations

import functools
import json
import os
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import orjson

from rke_py.config import kdm, values
from rke_py.config.schema import ClusterConfig, Node, SystemImages, Taint
from rke_py.errors import ExitStatus, RkePyError
from rke_py.files import write_private_file
from rke_py.pki.bundle import KUBE_ADMIN, KUBE_NODE, SERVICE_ACCOUNT, Bundle, has_kubeconfig
from rke_py.pki.certs import CertKeyPair
from rke_py.pki.kubeconfig import component_kubeconfig
from rke_py.pki.paths import cert_path, key_path, kubeconfig_path

STATE_EXT = ".rkestate"
KUBECONFIG_PREFIX = "kube_config_"


class StateError(RkePyError):
    """cluster.rkestate exists but cannot be read, or the cluster's copy of it cannot."""

    exit_status = ExitStatus.CONFIG


@dataclass
class State:
    """One side of the state file (RKE's `State`): a config, its certificates, its encryption config."""

    rke_config: dict[str, Any] = field(default_factory=dict)  # RKE json names; see `rke_config_json`
    certificates: Bundle = field(default_factory=dict)
    encryption_config: str = ""


@dataclass
class ClusterState:
    """The whole file: what `up` is about to apply (`desired`) and what was last applied (`current`)."""

    desired: State = field(default_factory=State)
    current: State = field(default_factory=State)
    host_keys: dict[str, str] = field(default_factory=dict)  # "host:port" -> "<keytype> <base64>"
    etcd_members_added: list[str] = field(default_factory=list)  # etcd members that joined a running cluster
    # the snapshot etcd was restored from, until up restarts the add-ons' pods (their view of the API is old)
    restored_snapshot: str = ""
    # a restore is replacing the etcd members' data: until every member has the snapshot's, only running
    # the restore again may go on (an `up` would start etcd on a mix of old and restored members)
    restoring: bool = False


def state_path_for(config_path: str | os.PathLike[str]) -> Path:
    """`cluster.yml` -> `cluster.rkestate`, next to it (RKE `GetStateFilePath`)."""
    path = Path(config_path)
    return path.with_name(path.stem + STATE_EXT) if path.suffix else path.with_name(path.name + STATE_EXT)


def kubeconfig_path_for(config_path: str | os.PathLike[str]) -> Path:
    """`cluster.yml` -> `kube_config_cluster.yml`, next to it (RKE `GetLocalKubeConfig`)."""
    path = Path(config_path)
    return path.with_name(KUBECONFIG_PREFIX + path.name)


# --- cluster.yml model -> RKE json names ------------------------------------------------------------------

# Where RKE's json tag is not the camelCase of the YAML key.
_JSON_NAMES = {
    "calico_flexvol": "calicoFlexVol",
    "canal_flexvol": "canalFlexVol",
    "s3backupconfig": "s3BackupConfig",
    "aws_session_token": "awsAccessToken",
    "ignore_daemonsets": "ignoreDaemonSets",
}
# Maps whose keys are the user's (labels, flags, hostnames): copied with keys untouched.
_USER_MAPS = frozenset(
    {
        "labels",
        "options",
        "node_selector",
        "extra_args",
        "extra_args_array",
        "win_extra_args",
        "win_extra_args_array",
        "stubdomains",
        "virtual_center",
        "service_override",
    }
)
# Kubernetes API objects, already in their own camelCase form in cluster.yml: copied verbatim.
_K8S_OBJECTS = frozenset(
    {
        "tolerations",
        "update_strategy",
        "extra_envs",
        "extra_volumes",
        "extra_volume_mounts",
        "custom_config",
        "policy",
        "admission_configuration",
    }
)
_SKIPPED = frozenset(
    {"positions", "source", "encryption_provider"}
)  # rke-py's bookkeeping on ClusterConfig, not RKE fields


def json_name(key: str) -> str:
    """RKE's json tag for a YAML key: `service_cluster_ip_range` -> `serviceClusterIpRange`."""
    if key in _JSON_NAMES:
        return _JSON_NAMES[key]
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _convert_data(value: Any, key: str = "", parent: str = "") -> Any:
    """Plain data from cluster.yml (dicts and lists) under RKE's json names."""
    if key in _K8S_OBJECTS or (parent == "event_rate_limit" and key == "configuration"):
        return value
    if isinstance(value, dict):
        if key in _USER_MAPS:
            return dict(value)
        return {json_name(k): _convert_data(v, k, key) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_convert_data(v, "", key) for v in value]
    return value


def _is_pointer(hint: Any) -> bool:
    """`bool | None` and friends: Go pointers, where an explicit false must be written."""
    return isinstance(hint, types.UnionType) and type(None) in typing.get_args(hint)


@functools.cache
def _json_fields(kind: type) -> tuple[tuple[str, str, bool], ...]:
    """(field name, json name, whether it is a Go pointer) of a config dataclass, but rke-py's own fields:
    worked out once a class, as a state of 1,000 nodes converts 1,000 Nodes."""
    hints = typing.get_type_hints(kind)
    return tuple(
        (f.name, json_name(f.name), _is_pointer(hints[f.name]))
        for f in fields(kind)
        if f.name not in _SKIPPED
    )


def _convert_dataclass(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kind: Any = type(obj)
    for name, key, pointer in _json_fields(kind):
        value = getattr(obj, name)
        if name == "extra" and isinstance(value, dict):  # Network.extra: provider sections, same level
            out.update(_convert_data(value, "", "network"))
            continue
        if value is None or (not pointer and value in ("", 0, False, [], {})):
            continue  # Go's omitempty; a dataclass never compares equal to these
        if is_dataclass(value):
            out[key] = _convert_dataclass(value)
        elif isinstance(value, list) and value and is_dataclass(value[0]):
            out[key] = [_convert_dataclass(v) for v in value]
        else:
            out[key] = _convert_data(value, name)
    return out


def rke_config_json(config: ClusterConfig) -> dict[str, Any]:
    """`config` as RKE stores it in the state file (`rkeConfig`, json tags, empty values left out)."""
    return _convert_dataclass(config)


def nodes_from_rke_json(rke_config: dict[str, Any]) -> list[Node]:
    """The nodes of a state's `rkeConfig` (RKE's or rke-py's), e.g. to see which hosts were removed."""
    names = {json_name(f.name): f.name for f in fields(Node)}
    nodes = []
    for entry in rke_config.get("nodes") or []:
        kwargs = {names[k]: v for k, v in entry.items() if k in names}
        kwargs["taints"] = [
            Taint(key=t.get("key", ""), value=t.get("value", ""), effect=t.get("effect", ""))
            for t in kwargs.get("taints") or []
        ]
        kwargs["role"] = list(kwargs.get("role") or [])
        kwargs["labels"] = dict(kwargs.get("labels") or {})
        nodes.append(Node(**kwargs))
    return nodes


def recorded_images(rke_config: dict[str, Any]) -> kdm.Recorded:
    """The version a state's `rkeConfig` ran and the images it ran it on (RKE records every image it
    used). Only well-formed image references are taken: they reach `docker run` on the hosts."""
    names = {json_name(f.name): f.name for f in fields(SystemImages) if f.name != "extra"}
    given = rke_config.get("systemImages") or {}
    images = {
        names[key]: image
        for key, image in given.items()
        if key in names and isinstance(image, str) and image and values.image(image) is None
    }
    return kdm.Recorded(str(rke_config.get("kubernetesVersion") or ""), images)


# --- certificates bundle ----------------------------------------------------------------------------------


def _env_name(name: str) -> str:
    return name.upper().replace("-", "_")


def _cert_entry(pair: CertKeyPair) -> dict[str, str]:
    """RKE's `CertificatePKI` json for one certificate; names and paths as RKE's `ToCertObject` sets them."""
    name = pair.name
    env = _env_name(name)
    kubeconfig = has_kubeconfig(name)
    common_name = {KUBE_NODE: "system:node", KUBE_ADMIN: KUBE_ADMIN, SERVICE_ACCOUNT: SERVICE_ACCOUNT}
    organization = {KUBE_NODE: "system:nodes", KUBE_ADMIN: "system:masters"}
    return {
        "certificatePEM": pair.cert_pem,
        "keyPEM": pair.key_pem,
        # kube-admin's config is the local kubeconfig with embedded data, written to its own file instead.
        "config": component_kubeconfig(name) if kubeconfig and name != KUBE_ADMIN else "",
        "name": name,
        "commonName": common_name.get(name, f"system:{name}"),
        "ouName": organization.get(name, ""),
        "envName": env,
        "path": cert_path(name),
        "keyEnvName": f"{env}_KEY",
        "keyPath": key_path(name),
        "configEnvName": f"KUBECFG_{env}" if kubeconfig else "",
        "configPath": kubeconfig_path(name) if kubeconfig and name != KUBE_ADMIN else "",
    }


def _state_json(state: State) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if state.rke_config:
        out["rkeConfig"] = state.rke_config
    if state.certificates:
        out["certificatesBundle"] = {
            name: _cert_entry(state.certificates[name]) for name in sorted(state.certificates)
        }
    if state.encryption_config:
        out["encryptionConfig"] = state.encryption_config
    return out


def _state_from_json(data: Any, where: str) -> State:
    if not data:
        return State()
    if not isinstance(data, dict):
        raise StateError(f"{where}: expected an object")
    bundle: Bundle = {}
    for name, entry in (data.get("certificatesBundle") or {}).items():
        if not isinstance(entry, dict):
            raise StateError(f"{where}.certificatesBundle.{name}: expected an object")
        bundle[name] = CertKeyPair(name, entry.get("certificatePEM") or "", entry.get("keyPEM") or "")
    return State(
        rke_config=data.get("rkeConfig") or {},
        certificates=bundle,
        encryption_config=data.get("encryptionConfig") or "",
    )


def state_to_json(state: ClusterState, *, compact: bool = False) -> str:
    """The file's text, indented; `compact` as RKE writes it into the cluster (no spaces: a Secret holds
    at most 1 MiB, and a thousand nodes' state nearly fills it indented)."""
    doc: dict[str, Any] = {
        "desiredState": _state_json(state.desired),
        "currentState": _state_json(state.current),
    }
    if state.host_keys or state.etcd_members_added or state.restored_snapshot:
        doc["rkePy"] = {
            "hostKeys": dict(sorted(state.host_keys.items())),
            "etcdMembersAdded": list(state.etcd_members_added),
            **({"restoredSnapshot": state.restored_snapshot} if state.restored_snapshot else {}),
            **({"restoring": True} if state.restoring else {}),
        }
    try:  # orjson writes a thousand nodes' state in milliseconds; json's indenting encoder took 0.1 s
        text = orjson.dumps(doc, option=0 if compact else orjson.OPT_INDENT_2).decode()
    except TypeError:  # what orjson does not write (an integer beyond 64 bits in a user's YAML): json does
        layout: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 2}
        text = json.dumps(doc, ensure_ascii=False, **layout)
    return text if compact else text + "\n"


def state_from_json(text: str, source: str = "cluster.rkestate") -> ClusterState:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise StateError(f"{source}: not valid JSON (line {e.lineno}): {e.msg}") from e
    if not isinstance(doc, dict):
        raise StateError(f"{source}: expected a JSON object")
    extras = doc.get("rkePy") or {}
    return ClusterState(
        desired=_state_from_json(doc.get("desiredState"), f"{source}: desiredState"),
        current=_state_from_json(doc.get("currentState"), f"{source}: currentState"),
        host_keys=dict(extras.get("hostKeys") or {}),
        etcd_members_added=list(extras.get("etcdMembersAdded") or []),
        restored_snapshot=str(extras.get("restoredSnapshot") or ""),
        restoring=extras.get("restoring") is True,
    )


def read_state(path: str | os.PathLike[str]) -> ClusterState | None:
    """The state at `path`, or None when there is none yet (a new cluster)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StateError(f"{path}: cannot read: {e.strerror}") from e
    try:
        return state_from_json(text, str(path))
    except StateError as e:
        what = f"{path}: empty" if not text.strip() else str(e)
        raise StateError(
            f"{what}: the file is damaged. `rke-py util get-state-file` (with the same --config) writes it "
            "again from the copy the cluster keeps, setting this one aside"
        ) from e


def write_state(path: str | os.PathLike[str], state: ClusterState) -> None:
    """Write atomically with mode 0600: it holds every private key of the cluster."""
    write_private_file(path, state_to_json(state))
