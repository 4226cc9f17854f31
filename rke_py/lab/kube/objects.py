"""Object helpers shared by the components: timestamps, merge and JSON patches, Status errors."""

import copy
import time

MICRO_FORMAT = "%Y-%m-%dT%H:%M:%S"


def now_rfc3339() -> str:
    """metav1.Time: seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def now_micro() -> str:
    """metav1.MicroTime (``2006-01-02T15:04:05.000000Z``), as Leases carry it."""
    now = time.time()
    return time.strftime(MICRO_FORMAT, time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}Z"


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# The patchMergeKey of the built-in list fields kubectl's strategic merge patches touch.
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "conditions": "type",
    "addresses": "type",
    "ownerReferences": "uid",
}


def _merge_key(field: str, items: list) -> str | None:
    if field == "ports":  # container ports merge on containerPort, service ports on port
        return "containerPort" if any("containerPort" in i for i in items if isinstance(i, dict)) else "port"
    return MERGE_KEYS.get(field)


def _strip(value: object) -> object:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _merge_list(original: list, patch: list, key: str, order: list | None) -> list:
    merged = copy.deepcopy(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError(f"strategic merge patch: list item without merge key {key!r}")
        index = next(
            (i for i, old in enumerate(merged) if isinstance(old, dict) and old.get(key) == item[key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(_strip(item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    if order:
        rank = {entry.get(key): n for n, entry in enumerate(order) if isinstance(entry, dict)}
        merged.sort(key=lambda entry: rank.get(entry.get(key), len(rank)))
    return merged


def strategic_merge_patch(target: object, patch: object) -> object:
    """Kubernetes' strategic merge patch for built-in kinds: lists with a merge key (containers by name,
    node conditions by type, ...) merge item by item, honouring ``$patch``, ``$setElementOrder``,
    ``$deleteFromPrimitiveList`` and ``$retainKeys``; other lists are replaced."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return _strip(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        merge_key = _merge_key(key, value) if isinstance(value, list) else None
        if value is None:
            result.pop(key, None)
        elif merge_key and all(isinstance(i, dict) for i in value) and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, merge_key, patch.get(f"$setElementOrder/{key}"))
        elif isinstance(value, dict):
            result[key] = strategic_merge_patch(result.get(key), value)
        else:
            result[key] = _strip(value)
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/") and isinstance(result.get(key.split("/", 1)[1]), list):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result[field] if item not in value]
    if isinstance(patch.get("$retainKeys"), list):
        result = {k: v for k, v in result.items() if k in patch["$retainKeys"]}
    return result


class PatchError(ValueError):
    """A JSON patch that does not apply to the object."""


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: object, parts: list[str]) -> tuple[object, str]:
    for part in parts[:-1]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc, parts[-1]


def json_patch(doc: object, ops: list[dict]) -> object:
    """RFC 6902 JSON patch (add, remove, replace, move, copy, test)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        try:
            kind, parts = op["op"], _pointer(op["path"])
            if kind in ("move", "copy"):
                src_parent, src_key = _parent(doc, _pointer(op["from"]))
                value = src_parent[int(src_key)] if isinstance(src_parent, list) else src_parent[src_key]
                if kind == "move":
                    json_patch_remove(src_parent, src_key)
                kind, op = "add", {"value": copy.deepcopy(value)}
            if not parts:
                if kind == "test":
                    if doc != op["value"]:
                        raise PatchError("test operation failed")
                    continue
                doc = copy.deepcopy(op.get("value"))
                continue
            parent, key = _parent(doc, parts)
            if kind == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if key == "-" else int(key), op["value"])
                else:
                    parent[key] = op["value"]
            elif kind == "remove":
                json_patch_remove(parent, key)
            elif kind == "replace":
                if isinstance(parent, list):
                    parent[int(key)] = op["value"]
                elif key in parent:
                    parent[key] = op["value"]
                else:
                    raise PatchError(f"replace operation does not apply: doc is missing key: {op['path']}")
            elif kind == "test":
                current = parent[int(key)] if isinstance(parent, list) else parent.get(key)
                if current != op["value"]:
                    raise PatchError(f"test operation failed at {op['path']}")
            else:
                raise PatchError(f"unknown patch operation {kind!r}")
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            if isinstance(exc, PatchError):
                raise
            raise PatchError(f"the patch does not apply: {exc}") from None
    return doc


def json_patch_remove(parent: object, key: str) -> None:
    if isinstance(parent, list):
        del parent[int(key)]
    else:
        del parent[key]


def status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    """A metav1.Status failure, the body every Kubernetes API error carries."""
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body
