"""metrics-server: node and pod metrics for `kubectl top` and autoscalers, served through the aggregated
API `v1beta1.metrics.k8s.io`. `monitoring.options` become its flags, as in RKE."""

from __future__ import annotations

from rke_py.addons import k8s
from rke_py.addons.k8s import Obj, rule
from rke_py.config.schema import ClusterConfig

NAME = "metrics-server"
LABELS = {"k8s-app": NAME}
READ = ["get", "list", "watch"]


def objects(config: ClusterConfig) -> list[Obj]:
    monitoring = config.monitoring
    if monitoring.provider != "metrics-server":
        return []
    args = {
        "cert-dir": "/tmp",
        "secure-port": "10250",
        "kubelet-preferred-address-types": "InternalIP,Hostname,ExternalIP",
        "kubelet-use-node-status-port": "",
        "metric-resolution": "15s",
        # kubelets serve self-signed certificates unless generate_serving_certificate is set
        "kubelet-insecure-tls": "",
        **monitoring.options,
    }
    container = k8s.container(
        NAME,
        config.system_images.metrics_server,
        args=[f"--{key}={value}" if value else f"--{key}" for key, value in sorted(args.items())],
        ports=[{"name": "https", "containerPort": 10250, "protocol": "TCP"}],
        readinessProbe={
            "httpGet": {"path": "/readyz", "port": "https", "scheme": "HTTPS"},
            "periodSeconds": 10,
        },
        livenessProbe={
            "httpGet": {"path": "/livez", "port": "https", "scheme": "HTTPS"},
            "periodSeconds": 10,
        },
        resources={"requests": {"cpu": "100m", "memory": "200Mi"}},
        securityContext={"readOnlyRootFilesystem": True, "runAsNonRoot": True, "runAsUser": 1000},
        volumeMounts=[k8s.mount("tmp-dir", "/tmp")],
    )
    pod = k8s.pod_spec(
        [container],
        account=NAME,
        node_selector=monitoring.node_selector,
        tolerations_=k8s.tolerations(monitoring.tolerations, k8s.CRITICAL_TOLERATIONS),
        priority_class=monitoring.metrics_server_priority_class_name or "system-cluster-critical",
        volumes=[{"name": "tmp-dir", "emptyDir": {}}],
    )
    reader = k8s.cluster_role(
        "system:aggregated-metrics-reader",
        [rule(["metrics.k8s.io"], ["pods", "nodes"], READ)],
        {f"rbac.authorization.k8s.io/aggregate-to-{r}": "true" for r in ("view", "edit", "admin")},
    )
    api_service = k8s.obj(
        "apiregistration.k8s.io/v1",
        "APIService",
        "v1beta1.metrics.k8s.io",
        spec={
            "group": "metrics.k8s.io",
            "version": "v1beta1",
            "service": {"name": NAME, "namespace": k8s.SYSTEM},
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": True,
        },
    )
    return [
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
        k8s.service(NAME, LABELS, [k8s.port("https", 443, target="https")]),
        k8s.workload(
            "Deployment",
            NAME,
            LABELS,
            pod,
            strategy=monitoring.update_strategy,
            replicas=monitoring.replicas or 1,
        ),
        api_service,
    ]
