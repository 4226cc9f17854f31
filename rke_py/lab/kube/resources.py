"""The API surface: which resources exist, where they live in etcd, discovery documents and tables."""

import calendar
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rke_py.lab.kube import VERSION

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    store: str = ""  # the etcd key segment, when it is not the plural (nodes live under "minions")
    subresources: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    generic: bool = field(default=False, compare=False)

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``leases.coordination.k8s.io``, as Kubernetes names a resource in its error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def key(self, prefix: str, namespace: str = "", name: str = "") -> str:
        store = self.store or (f"{self.group}/{self.plural}" if self.generic else self.plural)
        parts = [prefix.rstrip("/"), store]
        if namespace:
            parts.append(namespace)
        return "/".join(parts) + "/" + name


def _r(group: str, version: str, spec: str, namespaced: bool = True, **extra: object) -> Resource:
    plural, kind, *short = spec.split()
    return Resource(group, version, plural, kind, namespaced, tuple(short), **extra)


_STATUS = ("status",)
_ALL = ("all",)
RESOURCES: list[Resource] = [
    _r("", "v1", "configmaps ConfigMap cm"),
    _r("", "v1", "endpoints Endpoints ep", store="services/endpoints"),
    _r("", "v1", "events Event ev"),
    _r("", "v1", "limitranges LimitRange limits"),
    _r("", "v1", "namespaces Namespace ns", False, subresources=_STATUS),
    _r("", "v1", "nodes Node no", False, store="minions", subresources=_STATUS),
    _r("", "v1", "persistentvolumeclaims PersistentVolumeClaim pvc", subresources=_STATUS),
    _r("", "v1", "persistentvolumes PersistentVolume pv", False, subresources=_STATUS),
    _r("", "v1", "pods Pod po", subresources=("status", "eviction"), categories=_ALL),
    _r("", "v1", "replicationcontrollers ReplicationController rc", subresources=_STATUS, categories=_ALL),
    _r("", "v1", "resourcequotas ResourceQuota quota", subresources=_STATUS),
    _r("", "v1", "secrets Secret"),
    _r("", "v1", "serviceaccounts ServiceAccount sa"),
    _r("", "v1", "services Service svc", store="services/specs", subresources=_STATUS, categories=_ALL),
    _r(
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations MutatingWebhookConfiguration",
        False,
    ),
    _r(
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations ValidatingWebhookConfiguration",
        False,
    ),
    _r("apiextensions.k8s.io", "v1", "customresourcedefinitions CustomResourceDefinition crd crds", False),
    _r("apiregistration.k8s.io", "v1", "apiservices APIService", False, subresources=_STATUS),
    _r("apps", "v1", "controllerrevisions ControllerRevision"),
    _r("authorization.k8s.io", "v1", "subjectaccessreviews SubjectAccessReview", False),
    _r("apps", "v1", "daemonsets DaemonSet ds", subresources=_STATUS, categories=_ALL),
    _r("apps", "v1", "deployments Deployment deploy", subresources=_STATUS, categories=_ALL),
    _r("apps", "v1", "replicasets ReplicaSet rs", subresources=_STATUS, categories=_ALL),
    _r("apps", "v1", "statefulsets StatefulSet sts", subresources=_STATUS, categories=_ALL),
    _r(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers HorizontalPodAutoscaler hpa",
        subresources=_STATUS,
        categories=_ALL,
    ),
    _r("batch", "v1", "cronjobs CronJob cj", subresources=_STATUS, categories=_ALL),
    _r("batch", "v1", "jobs Job", subresources=_STATUS, categories=_ALL),
    _r("coordination.k8s.io", "v1", "leases Lease"),
    _r("discovery.k8s.io", "v1", "endpointslices EndpointSlice"),
    _r("networking.k8s.io", "v1", "ingressclasses IngressClass", False),
    _r("networking.k8s.io", "v1", "ingresses Ingress ing", subresources=_STATUS),
    _r("networking.k8s.io", "v1", "networkpolicies NetworkPolicy netpol"),
    _r("policy", "v1", "poddisruptionbudgets PodDisruptionBudget pdb", subresources=_STATUS),
    _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings ClusterRoleBinding", False),
    _r("rbac.authorization.k8s.io", "v1", "clusterroles ClusterRole", False),
    _r("rbac.authorization.k8s.io", "v1", "rolebindings RoleBinding"),
    _r("rbac.authorization.k8s.io", "v1", "roles Role"),
    _r("scheduling.k8s.io", "v1", "priorityclasses PriorityClass pc", False),
    _r("storage.k8s.io", "v1", "csidrivers CSIDriver", False),
    _r("storage.k8s.io", "v1", "storageclasses StorageClass sc", False),
]
_BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
GROUP_VERSIONS: dict[str, list[str]] = {}
for _res in RESOURCES:
    if _res.group and _res.version not in GROUP_VERSIONS.setdefault(_res.group, []):
        GROUP_VERSIONS[_res.group].append(_res.version)


def lookup(group: str, version: str, plural: str, namespaced: bool) -> Resource | None:
    """The resource at this path; under a served group version, any other plural is stored generically
    (so a manifest of a kind the lab does not model still applies), with the scope the path implies."""
    found = _BY_PATH.get((group, version, plural))
    if found or not group or version not in GROUP_VERSIONS.get(group, []):
        return found
    kind = plural[:-1].capitalize() if plural.endswith("s") else plural.capitalize()
    return Resource(group, version, plural, kind, namespaced, generic=True)


# ---- discovery -------------------------------------------------------------------------------------


def api_versions(server_address: str) -> dict:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str) -> dict:
    versions = [{"groupVersion": f"{name}/{v}", "version": v} for v in GROUP_VERSIONS[name]]
    return {"name": name, "versions": versions, "preferredVersion": versions[0]}


def api_group_list() -> dict:
    groups = [_group(name) for name in GROUP_VERSIONS]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(name: str) -> dict | None:
    if name not in GROUP_VERSIONS:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name)}


def resource_list(group: str, version: str) -> dict | None:
    entries = []
    for res in RESOURCES:
        if (res.group, res.version) != (group, version):
            continue
        entry = {
            "name": res.plural,
            "singularName": res.kind.lower(),
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": VERBS,
        }
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        if res.categories:
            entry["categories"] = list(res.categories)
        entries.append(entry)
        for sub in res.subresources:
            entry = {"name": f"{res.plural}/{sub}", "singularName": "", "namespaced": res.namespaced}
            if sub == "eviction":  # as the real discovery document: a policy/v1 Eviction is created
                entry |= {"group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}
            else:
                entry |= {"kind": res.kind, "verbs": ["get", "patch", "update"]}
            entries.append(entry)
    if not entries:
        return None
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": entries}


def version_info() -> dict:
    major, minor = VERSION[1:].split(".")[:2]
    return {
        "major": major,
        "minor": minor,
        "gitVersion": VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "python3",
        "compiler": "cpython",
        "platform": "linux/amd64",
    }


# ---- selectors ---------------------------------------------------------------------------------------


class SelectorError(ValueError):
    """A selector the lab cannot evaluate; answered with 400 like the real apiserver."""


_REQUIREMENT = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9_.-]*))?\s*$")


def label_matcher(selector: str) -> Callable[[dict], bool]:
    """Equality-based label selector (``a=b,c!=d,e,!f``)."""
    tests = []
    for part in filter(None, (p.strip() for p in selector.split(","))):
        match = _REQUIREMENT.match(part)
        if not match or (match.group(1) and match.group(3)):
            raise SelectorError(f"unable to parse requirement: {part!r}")
        negate, key, op, value = match.groups()
        tests.append((negate, key, op, value))

    def matches(obj: dict) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        for negate, key, op, value in tests:
            if op in ("=", "=="):
                ok = labels.get(key) == value
            elif op == "!=":
                ok = labels.get(key) != value
            else:
                ok = (key in labels) != bool(negate)
            if not ok:
                return False
        return True

    return matches


_FIELDS = {
    "Pod": {
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    },
    "Node": {"spec.unschedulable"},
    "Event": {
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
        "reason", "reportingComponent", "source", "type",
    },
    "Secret": {"type"},
    "Namespace": {"status.phase"},
}  # fmt: skip


def _field(obj: dict, path: str) -> str:
    value: object = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def field_matcher(selector: str, kind: str = "") -> Callable[[dict], bool]:
    """Field selectors on the fields the real apiserver supports for ``kind`` (metadata.name and
    metadata.namespace everywhere); any other field is refused as the real one refuses it."""
    supported = {"metadata.name", "metadata.namespace"} | _FIELDS.get(kind, set())
    tests = []
    for part in filter(None, (p.strip() for p in selector.split(","))):
        match = re.match(r"^([^!=]+)(==|=|!=)(.*)$", part)
        key = match.group(1) if match else part
        if not match or key not in supported:
            raise SelectorError(f'field label not supported: "{key}"')
        tests.append((key, match.group(2) == "!=", match.group(3)))

    def matches(obj: dict) -> bool:
        return all((_field(obj, key) == value) != negate for key, negate, value in tests)

    return matches


# ---- tables (kubectl get) -----------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    if h < 24 * 8:
        return f"{h // 24}d{h % 24}h" if h % 24 else f"{h // 24}d"
    if h < 24 * 365 * 2:
        return f"{h // 24}d"
    if h < 24 * 365 * 8:
        return f"{h // 24 // 365}y{(h // 24) % 365}d"
    return f"{h // 24 // 365}y"


def parse_time(text: str | None) -> float | None:
    """RFC 3339 (``...Z``, optionally with fractional seconds) to epoch seconds."""
    if not text:
        return None
    main, _, frac = text.rstrip("Z").partition(".")
    try:
        base = calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return None
    return base + (float("0." + frac) if frac.isdigit() else 0.0)


def _age(obj: dict) -> str:
    created = parse_time(obj.get("metadata", {}).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(time.time() - created)


def _node_status(node: dict) -> str:
    ready = "NotReady"
    for cond in node.get("status", {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            ready = "Ready"
    if node.get("spec", {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    return ready


def _node_roles(node: dict) -> str:
    roles = set()
    for key, value in (node.get("metadata", {}).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key.split("/", 1)[1]:
            roles.add(key.split("/", 1)[1])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    return ",".join(sorted(roles)) or "<none>"


def _address(node: dict, kind: str) -> str:
    for addr in node.get("status", {}).get("addresses") or []:
        if addr.get("type") == kind:
            return addr.get("address", "")
    return "<none>"


def _column(name: str, description: str, priority: int = 0, fmt: str = "") -> dict:
    return {"name": name, "type": "string", "format": fmt, "description": description, "priority": priority}


_NAME = _column("Name", "Name must be unique within a namespace.", fmt="name")
_AGE = _column(
    "Age", "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def _columns(kind: str) -> tuple[list[dict], object]:
    if kind == "Node":
        info = lambda n, k: n.get("status", {}).get("nodeInfo", {}).get(k, "<unknown>")  # noqa: E731
        columns = [
            _NAME,
            _column("Status", "The status of the node"),
            _column("Roles", "The roles of the node"),
            _AGE,
            _column("Version", "Kubelet Version reported by the node."),
            _column("Internal-IP", "List of internal IPs.", 1),
            _column("External-IP", "List of external IPs.", 1),
            _column("OS-Image", "OS image reported by the node.", 1),
            _column("Kernel-Version", "Kernel version reported by the node.", 1),
            _column("Container-Runtime", "Container runtime reported by the node.", 1),
        ]
        return columns, lambda n: [
            n["metadata"]["name"],
            _node_status(n),
            _node_roles(n),
            _age(n),
            info(n, "kubeletVersion"),
            _address(n, "InternalIP"),
            _address(n, "ExternalIP"),
            info(n, "osImage"),
            info(n, "kernelVersion"),
            info(n, "containerRuntimeVersion"),
        ]
    if kind == "Lease":
        holder = _column("Holder", "HolderIdentity contains the identity of the holder of a current lease.")
        return [_NAME, holder, _AGE], lambda o: [
            o["metadata"]["name"],
            o.get("spec", {}).get("holderIdentity", ""),
            _age(o),
        ]
    if kind == "Service":
        columns = [
            _NAME,
            _column("Type", "Type of the service."),
            _column("Cluster-IP", "IP of the service."),
            _column("External-IP", "External IPs of the service."),
            _column("Port(s)", "Ports of the service."),
            _AGE,
        ]
        return columns, lambda o: [
            o["metadata"]["name"],
            o.get("spec", {}).get("type", "ClusterIP"),
            o.get("spec", {}).get("clusterIP", "<none>"),
            ",".join(o.get("spec", {}).get("externalIPs") or []) or "<none>",
            ",".join(
                f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in o.get("spec", {}).get("ports") or []
            )
            or "<none>",
            _age(o),
        ]
    if kind == "Namespace":
        status = _column("Status", "The status of the namespace")
        return [_NAME, status, _AGE], lambda o: [
            o["metadata"]["name"],
            o.get("status", {}).get("phase", ""),
            _age(o),
        ]
    return [_NAME, _AGE], lambda o: [o["metadata"]["name"], _age(o)]


def table(kind: str, items: list[dict], resource_version: str, include: str) -> dict:
    """A meta.k8s.io/v1 Table, which ``kubectl get`` asks for and prints as columns."""
    columns, cells = _columns(kind)
    rows = []
    for obj in items:
        row: dict = {"cells": cells(obj)}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            meta = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
            row["object"] = meta
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": rows,
    }


# ---- OpenAPI (only what kubectl needs to validate and apply) ---------------------------------------------


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_v3_root() -> dict:
    """The OpenAPI v3 index; kubectl reads it to learn that the server validates fields itself."""
    paths = {}
    for group, version in {(r.group, r.version) for r in RESOURCES}:
        gv = _gv_path(group, version)
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={VERSION}"}
    return {"paths": paths}


def openapi_v3_group_version(group: str, version: str) -> dict | None:
    """A PATCH operation per kind carrying the ``fieldValidation`` query parameter and the GVK
    extension: enough for kubectl's server-side field validation check. Schemas are not modelled."""
    paths = {}
    for res in RESOURCES:
        if (res.group, res.version) != (group, version):
            continue
        scope = "namespaces/{namespace}/" if res.namespaced else ""
        gvk = {"group": group, "version": version, "kind": res.kind}
        patch = {
            "operationId": f"patch{res.kind}",
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "OK"}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[f"/{_gv_path(group, version)}/{scope}{res.plural}/{{name}}"] = {"patch": patch}
    if not paths:
        return None
    info = {"title": "Kubernetes", "version": VERSION}
    return {"openapi": "3.0.0", "info": info, "paths": paths, "components": {}}


def openapi_v2() -> dict:
    """An OpenAPI v2 document without schemas: clients find no schema and skip client-side validation."""
    return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": VERSION}, "paths": {}}
