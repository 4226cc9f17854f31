"""The NGINX ingress controller on every node (DaemonSet `nginx-ingress-controller` in `ingress-nginx`),
its IngressClass `nginx`, and the default backend when `ingress.default_backend` asks for it.

`ingress.options` become the controller's ConfigMap, `extra_args` its flags. The admission webhook of
upstream's manifest is left out: it needs certificate Jobs that rke-py does not run.
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.addons.k8s import Obj, rule
from rke_py.config.schema import ClusterConfig

NS = "ingress-nginx"
NAME = "nginx-ingress-controller"
LABELS = {"app": "ingress-nginx"}
BACKEND = "default-http-backend"
READ = ["get", "list", "watch"]
CLASS = "nginx"


def objects(config: ClusterConfig) -> list[Obj]:
    ingress = config.ingress
    if ingress.provider != "nginx":
        return []
    args = {
        "election-id": "ingress-controller-leader",
        "controller-class": "k8s.io/ingress-nginx",
        "ingress-class": CLASS,
        "configmap": f"{NS}/ingress-nginx-controller",
        "watch-ingress-without-class": "true",
        "http-port": "80",
        "https-port": "443",
        **({"default-backend-service": f"{NS}/{BACKEND}"} if ingress.default_backend else {}),
        **ingress.extra_args,
    }
    ports: list[dict[str, Any]] = [
        {"name": "http", "containerPort": 80, "protocol": "TCP"},
        {"name": "https", "containerPort": 443, "protocol": "TCP"},
    ]
    if ingress.network_mode == "hostPort":
        ports[0]["hostPort"], ports[1]["hostPort"] = ingress.http_port, ingress.https_port
    elif ingress.network_mode == "hostNetwork":  # the controller binds the node's ports itself
        args["http-port"], args["https-port"] = str(ingress.http_port), str(ingress.https_port)
        ports[0]["containerPort"], ports[1]["containerPort"] = ingress.http_port, ingress.https_port
    probe = {"httpGet": {"path": "/healthz", "port": 10254, "scheme": "HTTP"}, "periodSeconds": 10}
    container = k8s.container(
        "controller",
        config.system_images.ingress,
        args=["/nginx-ingress-controller", *(f"--{key}={value}" for key, value in sorted(args.items()))],
        env=[
            k8s.field_env("POD_NAME", "metadata.name"),
            k8s.field_env("POD_NAMESPACE", "metadata.namespace"),
            *ingress.extra_envs,
        ],
        ports=ports,
        livenessProbe={**probe, "initialDelaySeconds": 10, "failureThreshold": 5},
        readinessProbe=probe,
        securityContext={
            "allowPrivilegeEscalation": True,
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]},
            "runAsUser": 101,
        },
        volumeMounts=ingress.extra_volume_mounts,
    )
    pod = k8s.pod_spec(
        [container],
        account="ingress-nginx",
        node_selector=ingress.node_selector,
        tolerations_=k8s.tolerations(ingress.tolerations, []),
        priority_class=ingress.nginx_ingress_controller_priority_class_name,
        hostNetwork=True if ingress.network_mode == "hostNetwork" else None,
        dnsPolicy=ingress.dns_policy
        or ("ClusterFirstWithHostNet" if ingress.network_mode == "hostNetwork" else None),
        terminationGracePeriodSeconds=300,
        volumes=ingress.extra_volumes,
    )
    ingress_class = k8s.obj(
        "networking.k8s.io/v1", "IngressClass", CLASS, spec={"controller": "k8s.io/ingress-nginx"}
    )
    if ingress.default_ingress_class:
        ingress_class["metadata"]["annotations"] = {"ingressclass.kubernetes.io/is-default-class": "true"}
    cluster_rules = [
        rule([""], ["configmaps", "endpoints", "nodes", "pods", "secrets", "namespaces"], ["list", "watch"]),
        rule(["coordination.k8s.io"], ["leases"], ["list", "watch"]),
        rule([""], ["nodes"], ["get"]),
        rule([""], ["services"], READ),
        rule(["networking.k8s.io"], ["ingresses", "ingressclasses"], READ),
        rule(["networking.k8s.io"], ["ingresses/status"], ["update"]),
        rule([""], ["events"], ["create", "patch"]),
        rule(["discovery.k8s.io"], ["endpointslices"], READ),
    ]
    namespaced_rules = [
        rule([""], ["namespaces"], ["get"]),
        rule([""], ["configmaps", "pods", "secrets", "endpoints"], READ),
        rule([""], ["services"], READ),
        rule(["networking.k8s.io"], ["ingresses", "ingressclasses"], READ),
        rule(["networking.k8s.io"], ["ingresses/status"], ["update"]),
        rule(
            ["coordination.k8s.io"],
            ["leases"],
            ["get", "update"],
            resourceNames=["ingress-controller-leader"],
        ),
        rule(["coordination.k8s.io"], ["leases"], ["create"]),
        rule([""], ["events"], ["create", "patch"]),
        rule(["discovery.k8s.io"], ["endpointslices"], READ),
    ]
    out = [
        k8s.namespace(NS),
        k8s.service_account("ingress-nginx", NS),
        k8s.config_map("ingress-nginx-controller", dict(ingress.options), NS),
        k8s.cluster_role("ingress-nginx", cluster_rules),
        k8s.cluster_role_binding("ingress-nginx", "ingress-nginx", [k8s.sa_subject("ingress-nginx", NS)]),
        k8s.role("ingress-nginx", NS, namespaced_rules),
        k8s.role_binding("ingress-nginx", NS, "Role", "ingress-nginx", [k8s.sa_subject("ingress-nginx", NS)]),
        ingress_class,
        k8s.workload("DaemonSet", NAME, LABELS, pod, ns=NS, strategy=ingress.update_strategy),
    ]
    if ingress.default_backend:
        out += _default_backend(config)
    return out


def _default_backend(config: ClusterConfig) -> list[Obj]:
    labels = {"app": BACKEND}
    container = k8s.container(
        BACKEND,
        config.system_images.ingress_backend,
        ports=[{"containerPort": 8080, "protocol": "TCP"}],
        livenessProbe={
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 30,
        },
        resources={"limits": {"cpu": "10m", "memory": "20Mi"}, "requests": {"cpu": "10m", "memory": "20Mi"}},
    )
    pod = k8s.pod_spec(
        [container],
        account="ingress-nginx",
        node_selector=config.ingress.node_selector,
        tolerations_=k8s.tolerations(config.ingress.tolerations, []),
        priority_class=config.ingress.default_http_backend_priority_class_name,
        terminationGracePeriodSeconds=60,
    )
    return [
        k8s.workload("Deployment", BACKEND, labels, pod, ns=NS, replicas=1),
        k8s.service(BACKEND, labels, [k8s.port("http", 80, target=8080)], ns=NS),
    ]
