"""calico (routing with BGP) and what canal shares with it: calico-node's containers and volumes, calico's
CRDs and RBAC, calico-kube-controllers, object for object as RKE renders KDM's calico and canal templates
v3.26.1 to v3.28.1 (tests/kdm compares them), but for the CRDs' schemas (the README says why).
"""

from __future__ import annotations

from typing import Any

from rke_py.addons import k8s
from rke_py.addons.k8s import CNI_BIN, CNI_NET, READ, Obj, rule
from rke_py.config.kdm import version_key
from rke_py.config.schema import ClusterConfig

GROUP = "crd.projectcalico.org"
# (kind, plural, namespaced): what calico keeps in the Kubernetes API when it is its datastore
KINDS = (
    ("BGPConfiguration", "bgpconfigurations", False),
    ("BGPFilter", "bgpfilters", False),
    ("BGPPeer", "bgppeers", False),
    ("BlockAffinity", "blockaffinities", False),
    ("CalicoNodeStatus", "caliconodestatuses", False),
    ("ClusterInformation", "clusterinformations", False),
    ("FelixConfiguration", "felixconfigurations", False),
    ("GlobalNetworkPolicy", "globalnetworkpolicies", False),
    ("GlobalNetworkSet", "globalnetworksets", False),
    ("HostEndpoint", "hostendpoints", False),
    ("IPAMBlock", "ipamblocks", False),
    ("IPAMConfig", "ipamconfigs", False),
    ("IPAMHandle", "ipamhandles", False),
    ("IPPool", "ippools", False),
    ("IPReservation", "ipreservations", False),
    ("KubeControllersConfiguration", "kubecontrollersconfigurations", False),
    ("NetworkPolicy", "networkpolicies", True),
    ("NetworkSet", "networksets", True),
)
# The templates of a line differ outside their CRDs only in three hostPath volumes made when missing
# (v3.27.4 and v3.28.1): [from, to) of the Kubernetes versions that get those
DIRECTORY_OR_CREATE = (
    ("v1.28.13-rancher1-1", "v1.29.0-rancher1-1"),
    ("v1.29.8-rancher1-1", "v1.30.0-rancher1-1"),
    ("v1.30.4-rancher1-1", ""),
)
CRITICAL_TOLERATIONS = [
    {"effect": "NoSchedule", "operator": "Exists"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"effect": "NoExecute", "operator": "Exists"},
]
CRITICAL_POD = {"scheduler.alpha.kubernetes.io/critical-pod": ""}
KUBE_CONTROLLERS = "calico-kube-controllers"
CNI_ACCOUNT = "calico-cni-plugin"  # the account the CNI plugin's tokens are made for
SERVICES_ENDPOINT = [{"configMapRef": {"name": "kubernetes-services-endpoint", "optional": True}}]
# The CNI network list install-cni writes on every node (it fills the placeholders itself); IPAM differs
CNI_CONF = """{
  "name": "k8s-pod-network",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "calico",
      "log_level": "info",
      "log_file_path": "/var/log/calico/cni/cni.log",
      "datastore_type": "kubernetes",
      "nodename": "__KUBERNETES_NODE_NAME__",
      "mtu": __CNI_MTU__,
      "ipam": {
          IPAM
      },
      "policy": {
          "type": "k8s"
      },
      "kubernetes": {
          "kubeconfig": "__KUBECONFIG_FILEPATH__"
      }
    },
    {
      "type": "portmap",
      "snat": true,
      "capabilities": {"portMappings": true}
    },
    {
      "type": "bandwidth",
      "capabilities": {"bandwidth": true}
    }
  ]
}"""
CALICO_IPAM = '"type": "calico-ipam"'
DUAL_STACK_IPAM = '"type": "calico-ipam",\n          "assign_ipv4": "true",\n          "assign_ipv6": "true"'


def cni_conf(ipam: str) -> str:
    return CNI_CONF.replace("IPAM", ipam)


def crds() -> list[Obj]:
    return [k8s.crd(GROUP, kind, plural, namespaced) for kind, plural, namespaced in KINDS]


def node_rules(token_for: list[str]) -> list[dict[str, Any]]:
    """What calico-node reads and writes (the ClusterRole `calico` with canal, `calico-node` with calico)."""
    watched = [
        "globalfelixconfigs", "felixconfigurations", "bgppeers", "bgpfilters", "globalbgpconfigs",
        "bgpconfigurations", "ippools", "ipreservations", "ipamblocks", "globalnetworkpolicies",
        "globalnetworksets", "networkpolicies", "networksets", "clusterinformations", "hostendpoints",
        "blockaffinities", "caliconodestatuses",
    ]  # fmt: skip
    return [
        rule([""], ["serviceaccounts/token"], ["create"], resourceNames=token_for),
        rule([""], ["pods", "nodes", "namespaces"], ["get"]),
        rule(["discovery.k8s.io"], ["endpointslices"], ["watch", "list"]),
        rule([""], ["endpoints", "services"], ["watch", "list", "get"]),
        rule([""], ["configmaps"], ["get"]),
        rule([""], ["nodes/status"], ["patch", "update"]),
        rule(["networking.k8s.io"], ["networkpolicies"], ["watch", "list"]),
        rule([""], ["pods", "namespaces", "serviceaccounts"], ["list", "watch"]),
        rule([""], ["pods/status"], ["patch"]),
        rule([GROUP], watched, READ),
        rule([GROUP], ["ippools", "felixconfigurations", "clusterinformations"], ["create", "update"]),
        rule([GROUP], ["caliconodestatuses"], ["update"]),
        rule([""], ["nodes"], READ),
        rule([GROUP], ["bgpconfigurations", "bgppeers"], ["create", "update"]),
    ]


IPAM_WRITES = ["get", "list", "create", "update", "delete"]


def cni_plugin_rules(ipam: bool) -> list[dict[str, Any]]:
    """What the CNI plugin does with its token: with calico's IPAM it also hands out addresses."""
    rules = [rule([""], ["pods", "nodes", "namespaces"], ["get"]), rule([""], ["pods/status"], ["patch"])]
    if ipam:
        kinds = ["blockaffinities", "ipamblocks", "ipamhandles", "clusterinformations", "ippools"]
        rules.append(rule([GROUP], [*kinds, "ipreservations", "ipamconfigs"], IPAM_WRITES))
    return rules


def kube_controllers_rules() -> list[dict[str, Any]]:
    return [
        rule([""], ["nodes"], ["watch", "list", "get"]),
        rule([""], ["pods"], READ),
        rule([GROUP], ["ipreservations"], ["list"]),
        rule([GROUP], ["blockaffinities", "ipamblocks", "ipamhandles"], [*IPAM_WRITES, "watch"]),
        rule([GROUP], ["ippools"], ["list", "watch"]),
        rule([GROUP], ["hostendpoints"], IPAM_WRITES),
        rule([GROUP], ["clusterinformations"], ["get", "list", "create", "update", "watch"]),
        rule([GROUP], ["kubecontrollersconfigurations"], ["get", "create", "update", "watch"]),
    ]


def in_ranges(version: str, ranges: tuple[tuple[str, str], ...]) -> bool:
    """Whether `version` is in one of the [from, to) ranges ("" as `to`: no end)."""
    key = version_key(version)
    return any(version_key(low) <= key and (not high or key < version_key(high)) for low, high in ranges)


def install_cni(image: str, conf: str, config_map: str, first: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": "install-cni",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/cni/bin/install"],
        "envFrom": SERVICES_ENDPOINT,
        "env": [
            *first,
            {"name": "CNI_CONF_NAME", "value": conf},
            k8s.config_env("CNI_NETWORK_CONFIG", config_map, "cni_network_config"),
            k8s.field_env("KUBERNETES_NODE_NAME", "spec.nodeName"),
            k8s.config_env("CNI_MTU", config_map, "veth_mtu"),
            {"name": "SLEEP", "value": "false"},
        ],
        "volumeMounts": [
            k8s.mount("cni-bin-dir", "/host/opt/cni/bin"),
            k8s.mount("cni-net-dir", "/host/etc/cni/net.d"),
        ],
        "securityContext": {"privileged": True},
    }


def mount_bpffs(image: str) -> dict[str, Any]:
    """Mounts the BPF filesystem and cgroup2 for calico-node, best effort (iptables mode needs neither)."""
    both = {"mountPropagation": "Bidirectional"}
    return {
        "name": "mount-bpffs",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["calico-node", "-init", "-best-effort"],
        "volumeMounts": [
            {**k8s.mount("sys-fs", "/sys/fs"), **both},
            {**k8s.mount("var-run-calico", "/var/run/calico"), **both},
            k8s.mount("nodeproc", "/nodeproc", read_only=True),
        ],
        "securityContext": {"privileged": True},
    }


def node_container(image: str, env: list[dict[str, Any]], checks: tuple[str, ...]) -> dict[str, Any]:
    """calico-node; `checks` are the health flags beyond felix's (`bird` when it routes with BGP)."""
    writable = {"readOnly": False}
    logging = {
        "FELIX_LOGFILEPATH": "none",
        "FELIX_LOGSEVERITYSYS": "",
        "FELIX_LOGSEVERITYSCREEN": "Warning",
        "FELIX_HEALTHENABLED": "true",
        "FELIX_IPTABLESBACKEND": "auto",
    }
    return {
        "name": "calico-node",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "envFrom": SERVICES_ENDPOINT,
        "env": [*env, *({"name": k, "value": v} for k, v in logging.items())],
        "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "250m"}},
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/calico-node", "-shutdown"]}}},
        "livenessProbe": {
            "exec": {"command": ["/bin/calico-node", "-felix-live", *(f"-{c}-live" for c in checks)]},
            "periodSeconds": 10,
            "initialDelaySeconds": 10,
            "failureThreshold": 6,
            "timeoutSeconds": 10,
        },
        "readinessProbe": {
            **(
                {"exec": {"command": ["/bin/calico-node", "-felix-ready", *(f"-{c}-ready" for c in checks)]}}
                if checks
                else {"httpGet": {"path": "/readiness", "port": 9099, "host": "localhost"}}
            ),
            "periodSeconds": 10,
            "timeoutSeconds": 10,
        },
        "volumeMounts": [
            {**k8s.mount("cni-net-dir", "/host/etc/cni/net.d"), **writable},
            k8s.mount("lib-modules", "/lib/modules", read_only=True),
            {**k8s.mount("xtables-lock", "/run/xtables.lock"), **writable},
            {**k8s.mount("var-run-calico", "/var/run/calico"), **writable},
            {**k8s.mount("var-lib-calico", "/var/lib/calico"), **writable},
            k8s.mount("policysync", "/var/run/nodeagent"),
            k8s.mount("bpffs", "/sys/fs/bpf"),
            k8s.mount("cni-log-dir", "/var/log/calico/cni", read_only=True),
        ],
    }


def node_volumes(
    config: ClusterConfig, before_cni: list[dict[str, Any]], after_cni: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    made = "DirectoryOrCreate" if in_ranges(config.kubernetes_version, DIRECTORY_OR_CREATE) else ""
    return [
        k8s.host_volume("lib-modules", "/lib/modules"),
        k8s.host_volume("var-run-calico", "/var/run/calico", made),
        k8s.host_volume("var-lib-calico", "/var/lib/calico", made),
        k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
        k8s.host_volume("sys-fs", "/sys/fs/", "DirectoryOrCreate"),
        k8s.host_volume("bpffs", "/sys/fs/bpf", "Directory"),
        k8s.host_volume("nodeproc", "/proc"),
        *before_cni,
        k8s.host_volume("cni-bin-dir", CNI_BIN, made),
        k8s.host_volume("cni-net-dir", CNI_NET),
        k8s.host_volume("cni-log-dir", "/var/log/calico/cni"),
        *after_cni,
        k8s.host_volume("policysync", "/var/run/nodeagent", "DirectoryOrCreate"),
    ]


def node_pod(
    config: ClusterConfig, account: str, priority: str, containers: dict[str, list[Any]]
) -> dict[str, Any]:
    """The pod of calico-node's DaemonSet: on every Linux node, tolerating every taint."""
    return {
        "nodeSelector": {**k8s.LINUX, **config.network.node_selector},
        "hostNetwork": True,
        "tolerations": CRITICAL_TOLERATIONS,
        **({"serviceAccountName": account} if config.authorization.mode == "rbac" else {}),
        "terminationGracePeriodSeconds": 0,
        "priorityClassName": config.network.options.get(priority) or "system-node-critical",
        **containers,
    }


def node_daemonset(config: ClusterConfig, name: str, pod: dict[str, Any], annotations: dict[str, str]) -> Obj:
    template: dict[str, Any] = {"metadata": {"labels": {"k8s-app": name}}, "spec": pod}
    if annotations:
        template["metadata"]["annotations"] = annotations
    spec = {
        "selector": {"matchLabels": {"k8s-app": name}},
        "updateStrategy": k8s.daemonset_strategy(config.network.update_strategy),
        "template": template,
    }
    item = k8s.obj("apps/v1", "DaemonSet", name, k8s.SYSTEM, spec=spec)
    item["metadata"]["labels"] = {"k8s-app": name}
    return item


def kube_controllers(
    config: ClusterConfig, image: str, tolerations: list[dict[str, Any]], annotations: dict[str, str]
) -> list[Obj]:
    """calico-kube-controllers (its node controller frees what calico kept for deleted nodes) with its
    PodDisruptionBudget; `network.tolerations` replace the template's `tolerations`."""
    rbac = config.authorization.mode == "rbac"
    labels = {"k8s-app": KUBE_CONTROLLERS}
    probe = {"periodSeconds": 10, "initialDelaySeconds": 10, "failureThreshold": 6, "timeoutSeconds": 10}
    container = {
        "name": KUBE_CONTROLLERS,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "env": [
            {"name": "ENABLED_CONTROLLERS", "value": "node"},
            {"name": "DATASTORE_TYPE", "value": "kubernetes"},
        ],
        "livenessProbe": {"exec": {"command": ["/usr/bin/check-status", "-l"]}, **probe},
        "readinessProbe": {"exec": {"command": ["/usr/bin/check-status", "-r"]}, "periodSeconds": 10},
    }
    priority = config.network.options.get("calico_kube_controllers_priority_class_name")
    pod = {
        "nodeSelector": dict(k8s.LINUX),
        "tolerations": k8s.tolerations(config.network.tolerations, tolerations),
        **({"serviceAccountName": KUBE_CONTROLLERS} if rbac else {}),
        "priorityClassName": priority or "system-cluster-critical",
        "containers": [container],
    }
    meta: dict[str, Any] = {"name": KUBE_CONTROLLERS, "namespace": k8s.SYSTEM, "labels": labels}
    if annotations:
        meta["annotations"] = annotations
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "strategy": {"type": "Recreate"},
        "template": {"metadata": meta, "spec": pod},
    }
    deployment = k8s.obj("apps/v1", "Deployment", KUBE_CONTROLLERS, k8s.SYSTEM, spec=spec)
    budget_spec = {"maxUnavailable": 1, "selector": {"matchLabels": labels}}
    budget = k8s.obj("policy/v1", "PodDisruptionBudget", KUBE_CONTROLLERS, k8s.SYSTEM, spec=budget_spec)
    for item in (deployment, budget):
        item["metadata"]["labels"] = dict(labels)
    return [deployment, *([k8s.service_account(KUBE_CONTROLLERS)] if rbac else []), budget]


def objects(config: ClusterConfig) -> list[Obj]:
    """calico with BGP (bird), calico's IPAM from the pod network (both ranges when dual-stack)."""
    images, network = config.system_images, config.network
    rbac = config.authorization.mode == "rbac"
    cidrs = config.services.kube_controller.cluster_cidr.split(",")
    dual = len(cidrs) == 2
    data = {
        "typha_service_name": "none",
        "calico_backend": "bird",
        "veth_mtu": str(network.mtu or 1440),
        "cni_network_config": cni_conf(DUAL_STACK_IPAM if dual else CALICO_IPAM),
    }
    mtu = "calico-config", "veth_mtu"
    backend = k8s.config_env("CALICO_NETWORKING_BACKEND", "calico-config", "calico_backend")
    pools = (
        {"CALICO_IPV4POOL_CIDR": cidrs[0], "CALICO_IPV6POOL_CIDR": cidrs[1]}
        if dual
        else {"CALICO_IPV4POOL_CIDR": cidrs[0]}
    )
    ipv6 = (
        {"FELIX_IPV6SUPPORT": "true", "IP6": "autodetect", "CALICO_IPV6POOL_NAT_OUTGOING": "true"}
        if dual
        else {"FELIX_IPV6SUPPORT": "false"}
    )
    env = [
        {"name": "DATASTORE_TYPE", "value": "kubernetes"},
        {"name": "WAIT_FOR_DATASTORE", "value": "true"},
        k8s.field_env("NODENAME", "spec.nodeName"),
        backend,
        *k8s.env(CLUSTER_TYPE="k8s,bgp", IP="autodetect"),
        *(
            {"name": name, "value": value}
            for name, value in (
                ("CALICO_IPV4POOL_IPIP", "Always"),
                ("CALICO_IPV4POOL_VXLAN", "Never"),
                ("CALICO_IPV6POOL_VXLAN", "Never"),
            )
        ),
        *(k8s.config_env(name, *mtu) for name in ("FELIX_IPINIPMTU", "FELIX_VXLANMTU", "FELIX_WIREGUARDMTU")),
        *({"name": k, "value": v} for k, v in pools.items()),
        {"name": "CALICO_DISABLE_FILE_LOGGING", "value": "true"},
        {"name": "FELIX_DEFAULTENDPOINTTOHOSTACTION", "value": "ACCEPT"},
        *({"name": k, "value": v} for k, v in ipv6.items()),
    ]
    upgrade_ipam = {
        "name": "upgrade-ipam",
        "image": images.calico_cni,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/cni/bin/calico-ipam", "-upgrade"],
        "envFrom": SERVICES_ENDPOINT,
        "env": [k8s.field_env("KUBERNETES_NODE_NAME", "spec.nodeName"), backend],
        "volumeMounts": [
            k8s.mount("host-local-net-dir", "/var/lib/cni/networks"),
            k8s.mount("cni-bin-dir", "/host/opt/cni/bin"),
        ],
        "securityContext": {"privileged": True},
    }
    containers = {
        "initContainers": [
            upgrade_ipam,
            install_cni(images.calico_cni, "10-calico.conflist", "calico-config", []),
            mount_bpffs(images.calico_node),
        ],
        "containers": [node_container(images.calico_node, env, ("bird",))],
        "volumes": node_volumes(config, [], [k8s.host_volume("host-local-net-dir", "/var/lib/cni/networks")]),
    }
    pod = node_pod(config, "calico-node", "calico_node_priority_class_name", containers)
    controllers_tolerations = [
        *CRITICAL_TOLERATIONS[:2],
        {"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"},
    ]
    roles = [
        *k8s.bound_role(KUBE_CONTROLLERS, kube_controllers_rules(), KUBE_CONTROLLERS),
        k8s.cluster_role(
            "calico-node",
            [
                *node_rules([CNI_ACCOUNT]),
                rule([GROUP], ["blockaffinities", "ipamblocks", "ipamhandles"], IPAM_WRITES),
                rule([GROUP], ["ipamconfigs"], ["get", "create"]),
                rule([GROUP], ["blockaffinities"], ["watch"]),
                rule(["apps"], ["daemonsets"], ["get"]),
            ],
        ),
        k8s.cluster_role_binding("calico-node", "calico-node", [k8s.sa_subject("calico-node")]),
    ]
    return [
        k8s.config_map("calico-config", data),
        *crds(),
        k8s.cluster_role(CNI_ACCOUNT, cni_plugin_rules(ipam=True)),
        *(roles if rbac else []),
        k8s.cluster_role_binding(CNI_ACCOUNT, CNI_ACCOUNT, [k8s.sa_subject(CNI_ACCOUNT)]),
        node_daemonset(config, "calico-node", pod, CRITICAL_POD),
        *([k8s.service_account("calico-node"), k8s.service_account(CNI_ACCOUNT)] if rbac else []),
        *kube_controllers(config, images.calico_controllers, controllers_tolerations, CRITICAL_POD),
    ]
