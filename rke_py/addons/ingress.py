"""The NGINX ingress controller, object for object as RKE renders KDM's templates
`nginxingress-v1.8.1-rancher1` to `-v1.11.2-rancher2` (tests/kdm compares them): a DaemonSet on every
Linux worker, its validating admission webhook with the two Jobs that make its certificate and hand the
CA to the webhook, the IngressClass `nginx`, and the default backend when `ingress.default_backend` asks
for it.

`ingress.options` become the controller's ConfigMap, `extra_args` its flags (after the template's own, as
in RKE), `tolerations` apply to the default backend only: the controller tolerates every taint.
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.addons.k8s import READ, Obj, rule
from rke_py.config.kdm import version_key
from rke_py.config.schema import ClusterConfig

NS = "ingress-nginx"
NAME = "nginx-ingress-controller"
ADMISSION = "ingress-nginx-admission"  # the webhook, its certificate's Secret, the Jobs' account
WEBHOOK_SERVICE = "ingress-nginx-controller-admission"
BACKEND = "default-http-backend"
CLASS = "nginx"
# The ingress-nginx release each KDM template is based on, from the first Kubernetes version that gets it
# (cluster.yml's image may differ; RKE picks the template by Kubernetes version), and whether it turns
# the controller's metrics off. Kubernetes versions before the first get the first.
TEMPLATES = (
    ("v1.27.0-rancher1-1", (1, 8, 1), False),
    ("v1.27.8-rancher2-1", (1, 9, 4), False),
    ("v1.28.6-rancher1-1", (1, 9, 6), False),
    ("v1.28.13-rancher1-1", (1, 11, 2), True),
    ("v1.28.14-rancher1-1", (1, 11, 2), False),
    ("v1.29.0-rancher1-1", (1, 9, 6), False),
    ("v1.29.8-rancher1-1", (1, 11, 2), True),
    ("v1.29.9-rancher1-1", (1, 11, 2), False),
    ("v1.30.0-rancher1-1", (1, 10, 1), True),
    ("v1.30.4-rancher1-1", (1, 11, 2), True),
    ("v1.30.5-rancher1-1", (1, 11, 2), False),
)
NETWORK_POLICY_FROM = (1, 9, 4)  # the admission Jobs' NetworkPolicy
# from here on: part-of labels everywhere, no Helm hook annotations, the Jobs' account mounts its token and
# the controller may list namespaces
V1_11 = (1, 11, 0)
HELM_HOOK = "pre-install,pre-upgrade,post-install,post-upgrade"
HOOK_DELETE = {"helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}
CERTIFICATES = "/usr/local/certificates"
INSTANCE = {"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/instance": "ingress-nginx"}


def template_for(kubernetes_version: str) -> tuple[tuple[int, int, int], bool]:
    """(ingress-nginx release, metrics off) of the template RKE renders for `kubernetes_version`."""
    key = version_key(kubernetes_version)
    chosen = TEMPLATES[0]
    for entry in TEMPLATES:
        if version_key(entry[0]) <= key:
            chosen = entry
    return chosen[1], chosen[2]


def image_release(image: str) -> str:
    """The release in the controller image's tag as RKE reads it: `0.21.0-rancher3` or
    `nginx-1.9.6-rancher1`."""
    parts = image.rsplit(":", 1)[-1].split("-")
    return parts[1] if len(parts) > 2 else parts[0]


class _Labels:
    """The app.kubernetes.io labels each object of the template carries."""

    def __init__(self, release: tuple[int, int, int]) -> None:
        self.version = ".".join(map(str, release))
        self.v1_11 = release >= V1_11

    def __call__(self, component: str = "", part_of: bool | None = None) -> dict[str, str]:
        out = dict(INSTANCE)
        if self.v1_11 if part_of is None else part_of:
            out["app.kubernetes.io/part-of"] = "ingress-nginx"
        out["app.kubernetes.io/version"] = self.version
        if component:
            out["app.kubernetes.io/component"] = component
        return out


def _leader(default_class: bool) -> str:
    """The controller's leader-election lease (`<election-id>-<class>` for the default class)."""
    return "ingress-controller-leader-nginx" if default_class else "ingress-controller-leader"


def _selector(component: str) -> dict[str, str]:
    return {**INSTANCE, "app.kubernetes.io/component": component}


def _meta(item: Obj, labels: dict[str, str], annotations: dict[str, str] | None = None) -> Obj:
    item["metadata"]["labels"] = labels
    if annotations:
        item["metadata"]["annotations"] = annotations
    return item


def objects(config: ClusterConfig) -> list[Obj]:
    ingress = config.ingress
    if ingress.provider != "nginx":
        return []
    release, metrics_off = template_for(config.kubernetes_version)
    labels = _Labels(release)
    rbac = config.authorization.mode == "rbac"
    hook = {} if labels.v1_11 else {"helm.sh/hook": HELM_HOOK, **HOOK_DELETE}
    out = [_meta(k8s.namespace(NS), dict(INSTANCE))]
    if rbac:
        out += _rbac(labels, hook, bool(ingress.default_ingress_class))
    out += [
        _meta(
            k8s.obj(
                "v1",
                "ConfigMap",
                "ingress-nginx-controller",
                NS,
                **({"data": dict(ingress.options)} if ingress.options else {}),
            ),
            labels("controller"),
        ),
        k8s.obj("v1", "ConfigMap", "tcp-services", NS),
        k8s.obj("v1", "ConfigMap", "udp-services", NS),
        _meta(
            k8s.service(
                WEBHOOK_SERVICE,
                _selector("controller"),
                [{"name": "https-webhook", "port": 443, "targetPort": "webhook", "appProtocol": "https"}],
                NS,
                type="ClusterIP",
            ),
            labels("controller"),
        ),
        _daemonset(config, labels, metrics_off, rbac),
        _meta(
            k8s.obj(
                "networking.k8s.io/v1", "IngressClass", CLASS, spec={"controller": "k8s.io/ingress-nginx"}
            ),
            labels("controller"),
            {"ingressclass.kubernetes.io/is-default-class": "true"}
            if ingress.default_ingress_class
            else None,
        ),
    ]
    if release >= NETWORK_POLICY_FROM:
        policy = {
            "egress": [{}],
            "podSelector": {"matchLabels": _selector("admission-webhook")},
            "policyTypes": ["Ingress", "Egress"],
        }
        out.append(
            _meta(
                k8s.obj("networking.k8s.io/v1", "NetworkPolicy", ADMISSION, NS, spec=policy),
                labels("admission-webhook", part_of=True),
            )
        )
    out.append(_webhook(labels))
    out += _jobs(config, labels, hook)
    if ingress.default_backend:
        out += _default_backend(config)
    return out


def _rbac(labels: _Labels, hook: dict[str, str], default_class: bool) -> list[Obj]:
    sa = k8s.sa_subject("ingress-nginx", NS)
    admission_sa = k8s.sa_subject(ADMISSION, NS)
    leader = _leader(default_class)
    cluster_listed = ["configmaps", "endpoints", "nodes", "pods", "secrets"]
    if labels.v1_11:
        cluster_listed.append("namespaces")
    cluster_rules = [
        rule([""], cluster_listed, ["list", "watch"]),
        rule(["coordination.k8s.io"], ["leases"], ["list", "watch"]),
        rule([""], ["nodes"], ["get"]),
        rule([""], ["services"], READ),
        rule(["networking.k8s.io"], ["ingresses"], READ),
        rule([""], ["events"], ["create", "patch"]),
        rule(["networking.k8s.io"], ["ingresses/status"], ["update"]),
        rule(["networking.k8s.io"], ["ingressclasses"], READ),
        rule(["discovery.k8s.io"], ["endpointslices"], ["list", "watch", "get"]),
    ]
    namespaced_rules = [
        rule([""], ["namespaces"], ["get"]),
        rule([""], ["configmaps", "pods", "secrets", "endpoints"], READ),
        rule([""], ["services"], READ),
        rule(["networking.k8s.io"], ["ingresses"], READ),
        rule(["networking.k8s.io"], ["ingresses/status"], ["update"]),
        rule(["networking.k8s.io"], ["ingressclasses"], READ),
        rule(["coordination.k8s.io"], ["leases"], ["get", "update"], resourceNames=[leader]),
        rule(["coordination.k8s.io"], ["leases"], ["create"]),
        rule([""], ["events"], ["create", "patch"]),
        rule(["discovery.k8s.io"], ["endpointslices"], ["list", "watch", "get"]),
    ]
    controller, admission = labels("controller"), labels("admission-webhook")
    account = k8s.service_account("ingress-nginx", NS)
    account["automountServiceAccountToken"] = True
    admission_account = k8s.service_account(ADMISSION, NS)
    if labels.v1_11:
        admission_account["automountServiceAccountToken"] = True
    return [
        _meta(account, controller),
        _meta(k8s.cluster_role("ingress-nginx", cluster_rules), labels()),
        _meta(k8s.cluster_role_binding("ingress-nginx", "ingress-nginx", [sa]), labels()),
        _meta(k8s.role("ingress-nginx", NS, namespaced_rules), controller),
        _meta(k8s.role_binding("ingress-nginx", NS, "Role", "ingress-nginx", [sa]), controller),
        _meta(admission_account, admission, hook),
        _meta(
            k8s.cluster_role(
                ADMISSION,
                [
                    rule(
                        ["admissionregistration.k8s.io"],
                        ["validatingwebhookconfigurations"],
                        ["get", "update"],
                    )
                ],
            ),
            admission,
            hook,
        ),
        _meta(k8s.cluster_role_binding(ADMISSION, ADMISSION, [admission_sa]), admission, hook),
        _meta(k8s.role(ADMISSION, NS, [rule([""], ["secrets"], ["get", "create"])]), admission, hook),
        _meta(k8s.role_binding(ADMISSION, NS, "Role", ADMISSION, [admission_sa]), admission, hook),
    ]


def _flags(config: ClusterConfig, metrics_off: bool) -> list[str]:
    ingress = config.ingress
    flags = ["/nginx-ingress-controller"]
    if ingress.default_backend:
        flags.append(f"--default-backend-service=$(POD_NAMESPACE)/{BACKEND}")
    flags += [
        f"--election-id={_leader(bool(ingress.default_ingress_class))}",
        "--controller-class=k8s.io/ingress-nginx",
        "--configmap=$(POD_NAMESPACE)/ingress-nginx-controller",
        "--tcp-services-configmap=$(POD_NAMESPACE)/tcp-services",
        "--udp-services-configmap=$(POD_NAMESPACE)/udp-services",
        "--validating-webhook=:8443",
        f"--validating-webhook-certificate={CERTIFICATES}/cert",
        f"--validating-webhook-key={CERTIFICATES}/key",
    ]
    if metrics_off:
        flags.append("--enable-metrics=false")
    extra = dict(ingress.extra_args)
    if image_release(config.system_images.ingress) >= "1.1.0":  # RKE compares the text, so do we
        extra.setdefault("watch-ingress-without-class", "true")
    return flags + [f"--{key}" + (f"={value}" if value != "" else "") for key, value in sorted(extra.items())]


def _ports(config: ClusterConfig) -> list[dict[str, Any]]:
    """http and https as RKE's template writes them: in hostPort mode on the node's http_port and
    https_port; in the pod on extra_args' http-port and https-port (80 and 443 when not given), but on 80
    and 443 whatever they say with hostNetwork. Then the webhook's."""
    ingress = config.ingress
    ports: list[dict[str, Any]] = []
    for name, default, host_port in (("http", 80, ingress.http_port), ("https", 443, ingress.https_port)):
        entry: dict[str, Any] = {"name": name, "containerPort": default}
        if ingress.network_mode in ("hostPort", "none"):
            entry["containerPort"] = int(ingress.extra_args.get(f"{name}-port") or default)
        if ingress.network_mode == "hostPort":
            entry["hostPort"] = host_port
        ports.append({**entry, "protocol": "TCP"})
    return [*ports, {"name": "webhook", "containerPort": 8443, "protocol": "TCP"}]


def _daemonset(config: ClusterConfig, labels: _Labels, metrics_off: bool, rbac: bool) -> Obj:
    ingress = config.ingress
    probe = {
        "httpGet": {"path": "/healthz", "port": 10254, "scheme": "HTTP"},
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
        "successThreshold": 1,
        "timeoutSeconds": 1,
    }
    security: dict[str, Any] = {"runAsUser": 101, "allowPrivilegeEscalation": True}
    if ingress.network_mode != "none":
        security["capabilities"] = {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    container = {
        "name": "controller",
        "image": config.system_images.ingress,
        "imagePullPolicy": "IfNotPresent",
        "lifecycle": {"preStop": {"exec": {"command": ["/wait-shutdown"]}}},
        "args": _flags(config, metrics_off),
        "securityContext": security,
        "env": [
            k8s.field_env("POD_NAME", "metadata.name"),
            k8s.field_env("POD_NAMESPACE", "metadata.namespace"),
            {"name": "LD_PRELOAD", "value": "/usr/local/lib/libmimalloc.so"},
            *ingress.extra_envs,
        ],
        "livenessProbe": {**probe, "failureThreshold": 5},
        "readinessProbe": {**probe, "failureThreshold": 3},
        "ports": _ports(config),
        "volumeMounts": [
            {"name": "webhook-cert", "mountPath": f"{CERTIFICATES}/", "readOnly": True},
            *ingress.extra_volume_mounts,
        ],
    }
    pod: dict[str, Any] = {
        **({"dnsPolicy": ingress.dns_policy} if ingress.dns_policy else {}),
        "affinity": {"nodeAffinity": k8s.LINUX_WORKER_AFFINITY},
        **({"hostNetwork": True} if ingress.network_mode == "hostNetwork" else {}),
        "tolerations": k8s.TOLERATE_ALL,
        "containers": [container],
        **({"nodeSelector": dict(ingress.node_selector)} if ingress.node_selector else {}),
        **(
            {"priorityClassName": ingress.nginx_ingress_controller_priority_class_name}
            if ingress.nginx_ingress_controller_priority_class_name
            else {}
        ),
        **({"serviceAccountName": "ingress-nginx"} if rbac else {}),
        "terminationGracePeriodSeconds": 300,
        "volumes": [{"name": "webhook-cert", "secret": {"secretName": ADMISSION}}, *ingress.extra_volumes],
    }
    pod_labels = {"app": "ingress-nginx", **_selector("controller")}
    if labels.v1_11:
        pod_labels["app.kubernetes.io/part-of"] = "ingress-nginx"
    spec = {
        "selector": {"matchLabels": {"app": "ingress-nginx"}},
        "updateStrategy": k8s.daemonset_strategy(ingress.update_strategy),
        "revisionHistoryLimit": 10,
        "minReadySeconds": 0,
        "template": {"metadata": {"labels": pod_labels}, "spec": pod},
    }
    return _meta(k8s.obj("apps/v1", "DaemonSet", NAME, NS, spec=spec), labels("controller"))


def _webhook(labels: _Labels) -> Obj:
    webhook = {
        "name": "validate.nginx.ingress.kubernetes.io",
        "matchPolicy": "Equivalent",
        "rules": [
            {
                "apiGroups": ["networking.k8s.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["ingresses"],
            }
        ],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {"namespace": NS, "name": WEBHOOK_SERVICE, "path": "/networking/v1/ingresses"}
        },
    }
    item = k8s.obj("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", ADMISSION)
    item["webhooks"] = [webhook]
    return _meta(item, labels("admission-webhook"))


def _jobs(config: ClusterConfig, labels: _Labels, hook: dict[str, str]) -> list[Obj]:
    """certgen's `create` (a CA and a serving certificate in the Secret) and `patch` (the CA into the
    webhook), as RKE runs them on every `up` that changes them."""
    service_names = f"{WEBHOOK_SERVICE},{WEBHOOK_SERVICE}.$(POD_NAMESPACE).svc"
    steps = {
        "create": (
            [
                "create",
                f"--host={service_names}",
                "--namespace=$(POD_NAMESPACE)",
                f"--secret-name={ADMISSION}",
            ],
            {"helm.sh/hook": "pre-install,pre-upgrade"},
        ),
        "patch": (
            [
                "patch",
                f"--webhook-name={ADMISSION}",
                "--namespace=$(POD_NAMESPACE)",
                "--patch-mutating=false",
                f"--secret-name={ADMISSION}",
                "--patch-failure-policy=Fail",
            ],
            {"helm.sh/hook": "post-install,post-upgrade"},
        ),
    }
    jobs = []
    for step, (args, step_hook) in steps.items():
        name = f"{ADMISSION}-{step}"
        container = {
            "name": step,
            "image": config.system_images.ingress_webhook,
            "imagePullPolicy": "IfNotPresent",
            "args": args,
            "env": [k8s.field_env("POD_NAMESPACE", "metadata.namespace")],
            "securityContext": {"allowPrivilegeEscalation": False},
        }
        pod = {
            "tolerations": k8s.TOLERATE_ALL,
            "containers": [container],
            "restartPolicy": "OnFailure",
            "serviceAccountName": ADMISSION,
            "nodeSelector": {**k8s.LINUX, **config.ingress.node_selector},
            "securityContext": {"runAsNonRoot": True, "runAsUser": 2000},
        }
        template = {"metadata": {"name": name, "labels": labels("admission-webhook")}, "spec": pod}
        job = k8s.obj("batch/v1", "Job", name, NS, spec={"template": template})
        jobs.append(_meta(job, labels("admission-webhook"), {**step_hook, **HOOK_DELETE} if hook else None))
    return jobs


def _default_backend(config: ClusterConfig) -> list[Obj]:
    selector = {"app": BACKEND}
    container = {
        "name": BACKEND,
        "image": config.system_images.ingress_backend,
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 30,
            "timeoutSeconds": 5,
        },
        "ports": [{"containerPort": 8080}],
        "resources": {
            "limits": {"cpu": "10m", "memory": "20Mi"},
            "requests": {"cpu": "10m", "memory": "20Mi"},
        },
    }
    priority = config.ingress.default_http_backend_priority_class_name
    pod = {
        "affinity": {"nodeAffinity": k8s.LINUX_WORKER_AFFINITY},
        "terminationGracePeriodSeconds": 60,
        **({"priorityClassName": priority} if priority else {}),
        "tolerations": k8s.tolerations(config.ingress.tolerations, k8s.TOLERATE_ALL),
        "containers": [container],
    }
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": selector},
        "template": {"metadata": {"labels": selector}, "spec": pod},
    }
    deployment = _meta(k8s.obj("apps/v1", "Deployment", BACKEND, NS, spec=spec), dict(selector))
    service = _meta(
        k8s.obj(
            "v1",
            "Service",
            BACKEND,
            NS,
            spec={"ports": [{"port": 80, "targetPort": 8080}], "selector": selector},
        ),
        dict(selector),
    )
    return [deployment, service]
