"""What the real kube-apiserver refuses in the kinds add-ons are made of, so the stand-in refuses it too:
a workload whose selector does not select its pods, a pod without containers or images, a Service port
without a number, a CRD named other than `<plural>.<group>`, a binding without a roleRef, changes to
fields Kubernetes keeps immutable (a workload's selector, a Job's pod template, a binding's roleRef), and
a Secret over 1 MiB."""

from typing import Any

Problem = str
MAX_SECRET_SIZE = 1024 * 1024  # the sum of a Secret's keys and decoded (base64) values


def problems(kind: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> list[Problem]:
    """Field errors as the apiserver words them (`spec.selector: Invalid value: ...`); [] when valid."""
    spec = new.get("spec") or {}
    found: list[Problem] = []
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "ReplicaSet"):
        found += _workload(spec)
        if old is not None and (old.get("spec") or {}).get("selector") != spec.get("selector"):
            found.append("spec.selector: Invalid value: field is immutable")
    elif kind == "Service":
        for index, port in enumerate(spec.get("ports") or []):
            if not isinstance(port.get("port"), int) or not 0 < port["port"] < 65536:
                found.append(f"spec.ports[{index}].port: Required value")
    elif kind == "CustomResourceDefinition":
        names = spec.get("names") or {}
        expected = f"{names.get('plural', '')}.{spec.get('group', '')}"
        if new["metadata"].get("name") != expected:
            found.append(
                f'metadata.name: Invalid value: "{new["metadata"].get("name")}": '
                'must be spec.names.plural+"."+spec.group'
            )
        if not spec.get("versions"):
            found.append(
                "spec.versions: Invalid value: must have exactly one version marked as storage version"
            )
    elif kind == "Secret":
        size = sum(len(k) + len(v) * 3 // 4 - v.count("=") for k, v in (new.get("data") or {}).items())
        if size > MAX_SECRET_SIZE:
            found.append(f"data: Too long: must have at most {MAX_SECRET_SIZE} bytes")
    elif kind == "Job":
        if old is not None and (old.get("spec") or {}).get("template") != spec.get("template"):
            found.append("spec.template: Invalid value: field is immutable")
    elif kind in ("ClusterRoleBinding", "RoleBinding"):
        if not (new.get("roleRef") or {}).get("name"):
            found.append("roleRef.name: Required value")
        if old is not None and old.get("roleRef") != new.get("roleRef"):
            found.append("roleRef: Invalid value: cannot change roleRef")
    return found


def _workload(spec: dict[str, Any]) -> list[Problem]:
    found = []
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    template = spec.get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if not selector:
        found.append("spec.selector: Required value")
    elif any(labels.get(k) != v for k, v in selector.items()):
        found.append(
            "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
        )
    containers = (template.get("spec") or {}).get("containers") or []
    if not containers:
        found.append("spec.template.spec.containers: Required value")
    for part in ("initContainers", "containers"):
        for index, container in enumerate((template.get("spec") or {}).get(part) or []):
            for field in ("name", "image"):
                if not container.get(field):
                    found.append(f"spec.template.spec.{part}[{index}].{field}: Required value")
    return found
