"""Small builders for the Kubernetes objects the add-ons are made of, so each template reads as its facts.

Every object carries rke-py's labels: `managed-by` says who keeps it, `rke-py.io/addon` which add-on it
belongs to, so an add-on switched off is found (by label) and removed.
"""

from __future__ import annotations

from typing import Any

from rke_py.config.schema import Toleration

Obj = dict[str, Any]

MANAGED_BY = "app.kubernetes.io/managed-by"
ADDON_LABEL = "rke-py.io/addon"
RBAC = "rbac.authorization.k8s.io/v1"
SYSTEM = "kube-system"
LINUX = {"kubernetes.io/os": "linux"}
READ = ["get", "list", "watch"]
CNI_BIN, CNI_NET = "/opt/cni/bin", "/etc/cni/net.d"  # where the network plugins install CNI on a node
# Add-ons that keep the cluster running tolerate every taint, as RKE's templates do.
TOLERATE_ALL: list[dict[str, Any]] = [
    {"effect": "NoExecute", "operator": "Exists"},
    {"effect": "NoSchedule", "operator": "Exists"},
]
# Node affinity terms of RKE's add-on templates: not on Windows nodes; only on nodes with the worker role.
NOT_WINDOWS_TERM = {"key": "beta.kubernetes.io/os", "operator": "NotIn", "values": ["windows"]}
WORKER_TERM = {"key": "node-role.kubernetes.io/worker", "operator": "Exists"}


def obj(api_version: str, kind: str, name: str, namespace: str = "", **fields: Any) -> Obj:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


def identity(item: Obj) -> tuple[str, str, str, str]:
    """apiVersion, kind, namespace ("" when cluster-scoped) and name: what tells two objects apart."""
    meta = item["metadata"]
    return item["apiVersion"], item["kind"], meta.get("namespace") or "", meta["name"]


def object_ref(item: Obj) -> str:
    """kind/name or kind/namespace/name, e.g. daemonset/kube-system/canal."""
    _, kind, namespace, name = identity(item)
    return f"{kind.lower()}/{namespace}/{name}" if namespace else f"{kind.lower()}/{name}"


def label_selector(labels: dict[str, str]) -> str:
    """`labels` as the API's labelSelector query parameter reads them."""
    return ",".join(f"{k}={v}" for k, v in labels.items())


def labelled(item: Obj, addon: str) -> Obj:
    """`item` with rke-py's labels added (its own labels kept)."""
    metadata = dict(item.get("metadata") or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), MANAGED_BY: "rke-py", ADDON_LABEL: addon}
    return {**item, "metadata": metadata}


def namespace(name: str) -> Obj:
    return obj("v1", "Namespace", name)


def service_account(name: str, ns: str = SYSTEM) -> Obj:
    return obj("v1", "ServiceAccount", name, ns)


def config_map(name: str, data: dict[str, str], ns: str = SYSTEM) -> Obj:
    return obj("v1", "ConfigMap", name, ns, data=data)


def rule(groups: list[str], resources: list[str], verbs: list[str], **extra: Any) -> dict[str, Any]:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs, **extra}


def cluster_role(name: str, rules: list[dict[str, Any]], labels: dict[str, str] | None = None) -> Obj:
    item = obj(RBAC, "ClusterRole", name, rules=rules)
    if labels:
        item["metadata"]["labels"] = labels
    return item


def role(name: str, ns: str, rules: list[dict[str, Any]]) -> Obj:
    return obj(RBAC, "Role", name, ns, rules=rules)


def rbac_ref(kind: str, name: str) -> dict[str, str]:
    """A roleRef, or a User or Group subject."""
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def sa_subject(name: str, ns: str = SYSTEM) -> dict[str, str]:
    return {"kind": "ServiceAccount", "name": name, "namespace": ns}


def cluster_role_binding(name: str, role_name: str, subjects: list[dict[str, str]]) -> Obj:
    return obj(
        RBAC, "ClusterRoleBinding", name, roleRef=rbac_ref("ClusterRole", role_name), subjects=subjects
    )


def role_binding(name: str, ns: str, role_kind: str, role_name: str, subjects: list[dict[str, str]]) -> Obj:
    return obj(RBAC, "RoleBinding", name, ns, roleRef=rbac_ref(role_kind, role_name), subjects=subjects)


def bound_role(name: str, rules: list[dict[str, Any]], account: str, ns: str = SYSTEM) -> list[Obj]:
    """A ClusterRole and its binding to one ServiceAccount, both named `name`."""
    return [cluster_role(name, rules), cluster_role_binding(name, name, [sa_subject(account, ns)])]


def service(
    name: str, selector: dict[str, str], ports: list[dict[str, Any]], ns: str = SYSTEM, **spec: Any
) -> Obj:
    return obj("v1", "Service", name, ns, spec={"selector": selector, "ports": ports, **spec})


def port(name: str, number: int, protocol: str = "TCP", target: int | str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "port": number, "protocol": protocol}
    if target is not None:
        out["targetPort"] = target
    return out


def crd(group: str, kind: str, plural: str, namespaced: bool = False, version: str = "v1") -> Obj:
    """A CustomResourceDefinition that stores its objects as given (the project's own validation lives in
    its controllers; the schema only has to be structural)."""
    return obj(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        f"{plural}.{group}",
        spec={
            "group": group,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "scope": "Namespaced" if namespaced else "Cluster",
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    )


def env(**values: str) -> list[dict[str, Any]]:
    """Environment entries; an empty value is left out, as the API stores it."""
    return [{"name": name, "value": value} if value else {"name": name} for name, value in values.items()]


def field_env(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def config_env(name: str, config_map_name: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"configMapKeyRef": {"name": config_map_name, "key": key}}}


def host_volume(name: str, path: str, kind: str = "") -> dict[str, Any]:
    host: dict[str, str] = {"path": path}
    if kind:
        host["type"] = kind
    return {"name": name, "hostPath": host}


def mount(name: str, path: str, read_only: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "mountPath": path}
    if read_only:
        out["readOnly"] = True
    return out


def container(name: str, image: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **{k: v for k, v in fields.items() if v not in (None, [], {})}}


def tolerations(configured: list[Toleration], default: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The configured tolerations replace the template's, as in RKE."""
    if not configured:
        return default
    out = []
    for item in configured:
        toleration: dict[str, Any] = {
            key: value for key in ("key", "operator", "value", "effect") if (value := getattr(item, key))
        }
        if item.tolerationSeconds is not None:
            toleration["tolerationSeconds"] = item.tolerationSeconds
        out.append(toleration)
    return out


def node_affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    """A nodeAffinity that requires every one of `terms`."""
    required = {"nodeSelectorTerms": [{"matchExpressions": list(terms)}]}
    return {"requiredDuringSchedulingIgnoredDuringExecution": required}


# kube-dns's, metrics-server's and the ingress controller's: a Linux worker
LINUX_WORKER_AFFINITY = node_affinity(NOT_WINDOWS_TERM, WORKER_TERM)


def strategy_fields(given: dict[str, Any]) -> dict[str, Any]:
    """cluster.yml's `{strategy, rollingUpdate}` as Kubernetes' `{type, rollingUpdate}`, each only when
    given, as RKE copies them."""
    out: dict[str, Any] = {"type": given["strategy"]} if given.get("strategy") else {}
    return out | ({"rollingUpdate": dict(given["rollingUpdate"])} if given.get("rollingUpdate") else {})


def deployment_strategy(
    given: dict[str, Any], default: dict[str, Any], kept: tuple[str, ...], blank_is_rolling: bool = True
) -> dict[str, Any]:
    """RKE's set(DNS)DeploymentAddonDefaults: `default` when no strategy is given; a given rolling update
    gets the `kept` fields of `default` it lacks; any other strategy is taken as given. The DNS add-ons
    count a strategy left blank as a rolling update, metrics-server does not (`blank_is_rolling`)."""
    fields = strategy_fields(given)
    rolling = ("", "RollingUpdate") if blank_is_rolling else ("RollingUpdate",)
    if given and given.get("strategy", "") not in rolling:
        return fields
    if "rollingUpdate" not in fields:
        return {"type": "RollingUpdate", "rollingUpdate": dict(default)}
    fields["rollingUpdate"] = {**{key: default[key] for key in kept}, **fields["rollingUpdate"]}
    return fields


def daemonset_strategy(given: dict[str, Any]) -> dict[str, Any]:
    """RKE's setDaemonsetAddonDefaults: any strategy other than RollingUpdate (a blank one too) is taken as
    given; a rolling update without maxUnavailable is replaced by RKE's default, one node at a time."""
    if given and given.get("strategy", "") != "RollingUpdate":
        return strategy_fields(given)
    if (given.get("rollingUpdate") or {}).get("maxUnavailable") is None:
        return {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}
    return strategy_fields(given)


def workload(
    kind: str,
    name: str,
    labels: dict[str, str],
    pod: dict[str, Any],
    *,
    ns: str = SYSTEM,
    pod_annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Obj:
    """A DaemonSet or Deployment whose pods carry (and are selected by) `labels`."""
    template: dict[str, Any] = {"metadata": {"labels": labels}, "spec": pod}
    if pod_annotations:
        template["metadata"]["annotations"] = pod_annotations
    body = {"selector": {"matchLabels": labels}, "template": template, **spec}
    item = obj("apps/v1", kind, name, ns, spec=body)
    item["metadata"]["labels"] = dict(labels)
    return item
