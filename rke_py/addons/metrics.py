"""metrics-server: node and pod metrics for `kubectl top` and autoscalers, served through the aggregated
API `v1beta1.metrics.k8s.io`, object for object as RKE renders KDM's templates `metricsserver-v0.6.1` and
`-v0.7.0` (tests/kdm compares them). `monitoring.options` are appended to its flags, as in RKE."""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.addons.k8s import READ, Obj, rule
from rke_py.config.kdm import version_key
from rke_py.config.schema import ClusterConfig

NAME = "metrics-server"
LABELS = {"k8s-app": NAME}
V0_7_FROM = (1, 28, 6)  # KDM's metricsserver-v0.7.0 template from here on, v0.6.1 before
DEFAULT_ROLLING = {"maxUnavailable": "25%", "maxSurge": "25%"}  # RKE's setDeploymentAddonDefaults


def _labelled(item: Obj) -> Obj:
    item["metadata"]["labels"] = {**LABELS, **item["metadata"].get("labels", {})}
    return item


def objects(config: ClusterConfig) -> list[Obj]:
    monitoring = config.monitoring
    if monitoring.provider != "metrics-server":
        return []
    v0_7 = version_key(config.kubernetes_version)[:3] >= V0_7_FROM
    port = 10250 if v0_7 else 4443
    security: dict[str, Any] = {"allowPrivilegeEscalation": False}
    if v0_7:
        security["capabilities"] = {"drop": ["ALL"]}
    security |= {"readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 1000}
    if v0_7:
        security["seccompProfile"] = {"type": "RuntimeDefault"}
    container = k8s.container(
        NAME,
        config.system_images.metrics_server,
        imagePullPolicy="IfNotPresent",
        livenessProbe={
            "failureThreshold": 3,
            "httpGet": {"path": "/livez", "port": "https", "scheme": "HTTPS"},
            "periodSeconds": 10,
        },
        args=[
            "--cert-dir=/tmp",
            f"--secure-port={port}",
            "--kubelet-insecure-tls",  # kubelets serve self-signed certificates (RKE's choice)
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
            "--metric-resolution=15s",
            *[f"--{key}={value}" for key, value in sorted(monitoring.options.items())],
        ],
        ports=[{"containerPort": port, "name": "https", "protocol": "TCP"}],
        readinessProbe={
            "failureThreshold": 3,
            "httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
            "initialDelaySeconds": 20,
            "periodSeconds": 10,
        },
        resources={"requests": {"cpu": "100m", "memory": "200Mi"}},
        securityContext=security,
        volumeMounts=[{"mountPath": "/tmp", "name": "tmp-dir"}],
    )
    rbac = config.authorization.mode == "rbac"
    pod: dict[str, Any] = {
        "affinity": {"nodeAffinity": k8s.LINUX_WORKER_AFFINITY},
        **({"nodeSelector": dict(monitoring.node_selector)} if monitoring.node_selector else {}),
        "serviceAccountName": NAME,
        "tolerations": k8s.tolerations(monitoring.tolerations, k8s.TOLERATE_ALL),
        "volumes": [{"emptyDir": {}, "name": "tmp-dir"}],
        "priorityClassName": monitoring.metrics_server_priority_class_name or "system-cluster-critical",
        "containers": [container],
    }
    deployment = k8s.workload(
        "Deployment",
        NAME,
        LABELS,
        pod,
        replicas=monitoring.replicas if monitoring.replicas is not None else 1,
    )
    deployment["spec"]["strategy"] = k8s.deployment_strategy(
        monitoring.update_strategy, DEFAULT_ROLLING, tuple(DEFAULT_ROLLING), blank_is_rolling=False
    )
    deployment["spec"]["template"]["metadata"]["name"] = NAME
    aggregate = {f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in ("admin", "edit", "view")}
    reader = k8s.cluster_role(
        "system:aggregated-metrics-reader", [rule(["metrics.k8s.io"], ["pods", "nodes"], READ)], aggregate
    )
    rbac_objects = [
        k8s.service_account(NAME),
        reader,
        *k8s.bound_role(
            "system:metrics-server",
            [rule([""], ["nodes/metrics"], ["get"]), rule([""], ["pods", "nodes"], READ)],
            NAME,
        ),
        k8s.role_binding(
            "metrics-server-auth-reader",
            k8s.SYSTEM,
            "Role",
            "extension-apiserver-authentication-reader",
            [k8s.sa_subject(NAME)],
        ),
        k8s.cluster_role_binding(
            "metrics-server:system:auth-delegator", "system:auth-delegator", [k8s.sa_subject(NAME)]
        ),
    ]
    api_service = k8s.obj(
        "apiregistration.k8s.io/v1",
        "APIService",
        "v1beta1.metrics.k8s.io",
        spec={
            "group": "metrics.k8s.io",
            "groupPriorityMinimum": 100,
            "insecureSkipTLSVerify": True,
            "service": {"name": NAME, "namespace": k8s.SYSTEM},
            "version": "v1beta1",
            "versionPriority": 100,
        },
    )
    return [
        *[_labelled(item) for item in rbac_objects if rbac],
        _labelled(k8s.service(NAME, LABELS, [k8s.port("https", 443, target="https")])),
        deployment,
        _labelled(api_service),
    ]
