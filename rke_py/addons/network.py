"""Network plugins: canal (calico policy over flannel's VXLAN, RKE's default), flannel and calico.

Names and selectors are the ones RKE's templates used (DaemonSet `canal`, `kube-flannel`, `calico-node`
selected by `k8s-app`), so a cluster RKE built is taken over in place: a selector cannot change.
"""

from __future__ import annotations

import json
from typing import Any

from rke_py.addons import k8s
from rke_py.addons.k8s import Obj, rule
from rke_py.config.kdm import version_key
from rke_py.config.schema import ClusterConfig

CNI_BIN, CNI_NET = "/opt/cni/bin", "/etc/cni/net.d"
CALICO_GROUP = "crd.projectcalico.org"
# (kind, plural, namespaced): what calico keeps in the Kubernetes API when it is its datastore
CALICO_KINDS = (
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
READ = ["get", "list", "watch"]


def objects(config: ClusterConfig) -> list[Obj]:
    plugin = config.network.plugin
    return {"canal": canal, "flannel": flannel, "calico": calico}.get(plugin, lambda _: [])(config)


def _option(config: ClusterConfig, key: str) -> str:
    return config.network.options.get(f"{config.network.plugin}_{key}", "")


def _flannel_rules() -> list[dict[str, Any]]:
    return [
        rule([""], ["pods"], ["get"]),
        rule([""], ["nodes"], READ),
        rule([""], ["nodes/status"], ["patch"]),
    ]


def _calico_node_rules() -> list[dict[str, Any]]:
    return [
        rule([""], ["pods", "nodes", "namespaces"], ["get"]),
        rule(["discovery.k8s.io"], ["endpointslices"], ["watch", "list"]),
        rule([""], ["endpoints", "services"], ["watch", "list", "get"]),
        rule([""], ["configmaps"], ["get"]),
        rule([""], ["nodes/status"], ["patch", "update"]),
        rule(["networking.k8s.io"], ["networkpolicies"], ["watch", "list"]),
        rule([""], ["pods", "namespaces", "serviceaccounts"], ["list", "watch"]),
        rule([""], ["pods/status"], ["patch"]),
        rule([CALICO_GROUP], [plural for _, plural, _ in CALICO_KINDS], READ),
        rule([CALICO_GROUP], ["ippools", "felixconfigurations", "clusterinformations"], ["create", "update"]),
        rule([CALICO_GROUP], ["caliconodestatuses"], ["update"]),
        rule([""], ["nodes"], READ),
        rule([CALICO_GROUP], ["bgpconfigurations", "bgppeers"], ["create", "update"]),
        rule(
            [CALICO_GROUP],
            ["blockaffinities", "ipamblocks", "ipamhandles"],
            ["get", "list", "create", "update", "delete"],
        ),
        rule([CALICO_GROUP], ["ipamconfigs"], ["get", "create"]),
        rule(["apps"], ["daemonsets"], ["get"]),
    ]


def _crds() -> list[Obj]:
    return [k8s.crd(CALICO_GROUP, kind, plural, namespaced) for kind, plural, namespaced in CALICO_KINDS]


def _cni_config(config: ClusterConfig, ipam: dict[str, Any]) -> str:
    """The CNI network list calico's install-cni writes on every node (placeholders it fills itself)."""
    calico: dict[str, Any] = {
        "type": "calico",
        "log_level": "info",
        "datastore_type": "kubernetes",
        "nodename": "__KUBERNETES_NODE_NAME__",
        "ipam": ipam,
        "policy": {"type": "k8s"},
        "kubernetes": {"kubeconfig": "__KUBECONFIG_FILEPATH__"},
    }
    if config.network.mtu:
        calico["mtu"] = config.network.mtu
    conf = {
        "name": "k8s-pod-network",
        "cniVersion": "0.3.1",
        "plugins": [calico, {"type": "portmap", "snat": True, "capabilities": {"portMappings": True}}],
    }
    return json.dumps(conf, indent=2)


def _install_cni(image: str, conf_name: str, config_map: str) -> dict[str, Any]:
    return k8s.container(
        "install-cni",
        image,
        command=["/opt/cni/bin/install"],
        env=[
            *k8s.env(CNI_CONF_NAME=conf_name),
            k8s.config_env("CNI_NETWORK_CONFIG", config_map, "cni_network_config"),
            k8s.field_env("KUBERNETES_NODE_NAME", "spec.nodeName"),
            *k8s.env(SLEEP="false"),
        ],
        securityContext={"privileged": True},
        volumeMounts=[
            k8s.mount("cni-bin-dir", "/host/opt/cni/bin"),
            k8s.mount("cni-net-dir", "/host/etc/cni/net.d"),
        ],
    )


def _flexvol(image: str) -> dict[str, Any]:
    return k8s.container(
        "flexvol-driver",
        image,
        securityContext={"privileged": True},
        volumeMounts=[k8s.mount("flexvol-driver-host", "/host/driver")],
    )


def _calico_node(image: str, environment: list[dict[str, Any]]) -> dict[str, Any]:
    return k8s.container(
        "calico-node",
        image,
        env=[
            *k8s.env(DATASTORE_TYPE="kubernetes", WAIT_FOR_DATASTORE="true"),
            k8s.field_env("NODENAME", "spec.nodeName"),
            *environment,
            *k8s.env(
                CALICO_DISABLE_FILE_LOGGING="true",
                FELIX_DEFAULTENDPOINTTOHOSTACTION="ACCEPT",
                FELIX_IPV6SUPPORT="false",
                FELIX_HEALTHENABLED="true",
            ),
        ],
        securityContext={"privileged": True},
        resources={"requests": {"cpu": "250m"}},
        livenessProbe={
            "exec": {"command": ["/bin/calico-node", "-felix-live"]},
            "periodSeconds": 10,
            "failureThreshold": 6,
        },
        readinessProbe={"exec": {"command": ["/bin/calico-node", "-felix-ready"]}, "periodSeconds": 10},
        volumeMounts=[
            k8s.mount("lib-modules", "/lib/modules", read_only=True),
            k8s.mount("xtables-lock", "/run/xtables.lock"),
            k8s.mount("var-run-calico", "/var/run/calico"),
            k8s.mount("var-lib-calico", "/var/lib/calico"),
            k8s.mount("policysync", "/var/run/nodeagent"),
        ],
    )


def _node_volumes(flexvol_dir: str) -> list[dict[str, Any]]:
    return [
        k8s.host_volume("lib-modules", "/lib/modules"),
        k8s.host_volume("var-run-calico", "/var/run/calico"),
        k8s.host_volume("var-lib-calico", "/var/lib/calico"),
        k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
        k8s.host_volume("cni-bin-dir", CNI_BIN),
        k8s.host_volume("cni-net-dir", CNI_NET),
        k8s.host_volume("policysync", "/var/run/nodeagent", "DirectoryOrCreate"),
        k8s.host_volume("flexvol-driver-host", flexvol_dir, "DirectoryOrCreate"),
    ]


def _node_daemonset(config: ClusterConfig, name: str, account: str, pod: dict[str, Any]) -> Obj:
    network = config.network
    spec = k8s.pod_spec(
        account=account,
        node_selector=network.node_selector,
        tolerations_=k8s.tolerations(network.tolerations, k8s.CRITICAL_TOLERATIONS),
        priority_class="system-node-critical",
        hostNetwork=True,
        terminationGracePeriodSeconds=0,
        **pod,
    )
    return k8s.workload("DaemonSet", name, {"k8s-app": name}, spec, strategy=network.update_strategy)


# KDM's canal templates differ outside their CRDs only in three hostPath volumes made when missing
# (canal-v3.27.4 and -v3.28.1); [from, to) of the Kubernetes versions that get those
CANAL_DIRECTORY_OR_CREATE = (
    ("v1.28.13-rancher1-1", "v1.29.0-rancher1-1"),
    ("v1.29.8-rancher1-1", "v1.30.0-rancher1-1"),
    ("v1.30.4-rancher1-1", ""),
)
CANAL_CNI_CONF = """{
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
          "type": "host-local",
          "subnet": "usePodCidr"
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
CALICO_CRITICAL_TOLERATIONS = [
    {"effect": "NoSchedule", "operator": "Exists"},
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"effect": "NoExecute", "operator": "Exists"},
]
KUBE_CONTROLLERS = "calico-kube-controllers"


def _in_ranges(version: str, ranges: tuple[tuple[str, str], ...]) -> bool:
    key = version_key(version)
    return any(version_key(low) <= key and (not high or key < version_key(high)) for low, high in ranges)


def _canal_config(config: ClusterConfig) -> Obj:
    cidr = config.services.kube_controller.cluster_cidr.split(",")[0]
    backend = _option(config, "flannel_backend_type")
    net_conf = f'{{\n  "Network": "{cidr}",\n  "Backend": {{\n    "Type": "{backend}"\n  }}\n}}\n'
    data = {
        "typha_service_name": "none",
        "canal_iface": _option(config, "iface"),
        "masquerade": "true",
        "veth_mtu": str(config.network.mtu or 1450),
        "cni_network_config": CANAL_CNI_CONF,
        "net-conf.json": net_conf,
    }
    return k8s.config_map("canal-config", data)


def _canal_rules() -> list[dict[str, Any]]:
    """RKE's `calico` ClusterRole for canal's calico-node."""
    watched = [
        "globalfelixconfigs", "felixconfigurations", "bgppeers", "bgpfilters", "globalbgpconfigs",
        "bgpconfigurations", "ippools", "ipreservations", "ipamblocks", "globalnetworkpolicies",
        "globalnetworksets", "networkpolicies", "networksets", "clusterinformations", "hostendpoints",
        "blockaffinities", "caliconodestatuses",
    ]  # fmt: skip
    return [
        rule([""], ["serviceaccounts/token"], ["create"], resourceNames=["canal", "calico-cni-plugin"]),
        rule([""], ["pods", "nodes", "namespaces"], ["get"]),
        rule(["discovery.k8s.io"], ["endpointslices"], ["watch", "list"]),
        rule([""], ["endpoints", "services"], ["watch", "list", "get"]),
        rule([""], ["configmaps"], ["get"]),
        rule([""], ["nodes/status"], ["patch", "update"]),
        rule(["networking.k8s.io"], ["networkpolicies"], ["watch", "list"]),
        rule([""], ["pods", "namespaces", "serviceaccounts"], ["list", "watch"]),
        rule([""], ["pods/status"], ["patch"]),
        rule([CALICO_GROUP], watched, READ),
        rule([CALICO_GROUP], ["ippools", "felixconfigurations", "clusterinformations"], ["create", "update"]),
        rule([CALICO_GROUP], ["caliconodestatuses"], ["update"]),
        rule([""], ["nodes"], READ),
        rule([CALICO_GROUP], ["bgpconfigurations", "bgppeers"], ["create", "update"]),
    ]


def _kube_controllers_rules() -> list[dict[str, Any]]:
    return [
        rule([""], ["nodes"], ["watch", "list", "get"]),
        rule([""], ["pods"], READ),
        rule([CALICO_GROUP], ["ipreservations"], ["list"]),
        rule(
            [CALICO_GROUP],
            ["blockaffinities", "ipamblocks", "ipamhandles"],
            ["get", "list", "create", "update", "delete", "watch"],
        ),
        rule([CALICO_GROUP], ["ippools"], ["list", "watch"]),
        rule([CALICO_GROUP], ["hostendpoints"], ["get", "list", "create", "update", "delete"]),
        rule([CALICO_GROUP], ["clusterinformations"], ["get", "list", "create", "update", "watch"]),
        rule([CALICO_GROUP], ["kubecontrollersconfigurations"], ["get", "create", "update", "watch"]),
    ]


def _canal_pod(config: ClusterConfig, rbac: bool) -> dict[str, Any]:
    images, network = config.system_images, config.network
    services_endpoint = [{"configMapRef": {"name": "kubernetes-services-endpoint", "optional": True}}]
    cni_account = k8s.field_env("CALICO_CNI_SERVICE_ACCOUNT", "spec.serviceAccountName")
    install = {
        "name": "install-cni",
        "image": images.canal_cni,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/cni/bin/install"],
        "envFrom": services_endpoint,
        "env": [
            cni_account,
            {"name": "CNI_CONF_NAME", "value": "10-canal.conflist"},
            k8s.config_env("CNI_NETWORK_CONFIG", "canal-config", "cni_network_config"),
            k8s.field_env("KUBERNETES_NODE_NAME", "spec.nodeName"),
            k8s.config_env("CNI_MTU", "canal-config", "veth_mtu"),
            {"name": "SLEEP", "value": "false"},
        ],
        "volumeMounts": [
            k8s.mount("cni-bin-dir", "/host/opt/cni/bin"),
            k8s.mount("cni-net-dir", "/host/etc/cni/net.d"),
        ],
        "securityContext": {"privileged": True},
    }
    bidirectional = {"mountPropagation": "Bidirectional"}
    bpffs = {
        "name": "mount-bpffs",
        "image": images.canal_node,
        "imagePullPolicy": "IfNotPresent",
        "command": ["calico-node", "-init", "-best-effort"],
        "volumeMounts": [
            {**k8s.mount("sys-fs", "/sys/fs"), **bidirectional},
            {**k8s.mount("var-run-calico", "/var/run/calico"), **bidirectional},
            k8s.mount("nodeproc", "/nodeproc", read_only=True),
        ],
        "securityContext": {"privileged": True},
    }
    environment = {
        "DATASTORE_TYPE": "kubernetes",
        "USE_POD_CIDR": "true",
        "WAIT_FOR_DATASTORE": "true",
    }
    later = {
        "CALICO_NETWORKING_BACKEND": "none",
        "CLUSTER_TYPE": "k8s,canal",
        "FELIX_IPTABLESREFRESHINTERVAL": "60",
        "IP": "",
        "CALICO_DISABLE_FILE_LOGGING": "true",
        "FELIX_DEFAULTENDPOINTTOHOSTACTION": "ACCEPT",
        "FELIX_IPV6SUPPORT": "false",
        "FELIX_LOGFILEPATH": "none",
        "FELIX_LOGSEVERITYSYS": "",
        "FELIX_LOGSEVERITYSCREEN": "Warning",
        "FELIX_HEALTHENABLED": "true",
        "FELIX_IPTABLESBACKEND": "auto",
    }
    writable = {"readOnly": False}
    node = {
        "name": "calico-node",
        "image": images.canal_node,
        "imagePullPolicy": "IfNotPresent",
        "envFrom": services_endpoint,
        "env": [
            *({"name": k, "value": v} for k, v in environment.items()),
            k8s.field_env("NODENAME", "spec.nodeName"),
            cni_account,
            *({"name": k, "value": v} for k, v in later.items()),
        ],
        "securityContext": {"privileged": True},
        "resources": {"requests": {"cpu": "250m"}},
        "lifecycle": {"preStop": {"exec": {"command": ["/bin/calico-node", "-shutdown"]}}},
        "livenessProbe": {
            "exec": {"command": ["/bin/calico-node", "-felix-live"]},
            "periodSeconds": 10,
            "initialDelaySeconds": 10,
            "failureThreshold": 6,
            "timeoutSeconds": 10,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readiness", "port": 9099, "host": "localhost"},
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
    flanneld = {
        "name": "kube-flannel",
        "image": images.canal_flannel,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/opt/bin/flanneld", "--ip-masq", "--kube-subnet-mgr"],
        "securityContext": {"privileged": True},
        "env": [
            k8s.field_env("POD_NAME", "metadata.name"),
            k8s.field_env("POD_NAMESPACE", "metadata.namespace"),
            k8s.config_env("FLANNELD_IFACE", "canal-config", "canal_iface"),
            k8s.config_env("FLANNELD_IP_MASQ", "canal-config", "masquerade"),
        ],
        "volumeMounts": [
            {**k8s.mount("xtables-lock", "/run/xtables.lock"), **writable},
            k8s.mount("flannel-cfg", "/etc/kube-flannel/"),
        ],
    }
    made = "DirectoryOrCreate" if _in_ranges(config.kubernetes_version, CANAL_DIRECTORY_OR_CREATE) else ""
    volumes = [
        k8s.host_volume("lib-modules", "/lib/modules"),
        k8s.host_volume("var-run-calico", "/var/run/calico", made),
        k8s.host_volume("var-lib-calico", "/var/lib/calico", made),
        k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
        k8s.host_volume("sys-fs", "/sys/fs/", "DirectoryOrCreate"),
        k8s.host_volume("bpffs", "/sys/fs/bpf", "Directory"),
        k8s.host_volume("nodeproc", "/proc"),
        {"name": "flannel-cfg", "configMap": {"name": "canal-config"}},
        k8s.host_volume("cni-bin-dir", CNI_BIN, made),
        k8s.host_volume("cni-net-dir", CNI_NET),
        k8s.host_volume("cni-log-dir", "/var/log/calico/cni"),
        k8s.host_volume("policysync", "/var/run/nodeagent", "DirectoryOrCreate"),
    ]
    return {
        "nodeSelector": {**k8s.LINUX, **network.node_selector},
        "hostNetwork": True,
        "tolerations": CALICO_CRITICAL_TOLERATIONS,
        **({"serviceAccountName": "canal"} if rbac else {}),
        "terminationGracePeriodSeconds": 0,
        "priorityClassName": network.options.get("canal_priority_class_name") or "system-node-critical",
        "initContainers": [install, bpffs],
        "containers": [node, flanneld],
        "volumes": volumes,
    }


def _kube_controllers(config: ClusterConfig, image: str, rbac: bool, priority_option: str) -> list[Obj]:
    """calico-kube-controllers (its node controller frees what calico kept for deleted nodes) and its
    PodDisruptionBudget, as RKE runs them with canal and calico."""
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
    pod = {
        "nodeSelector": dict(k8s.LINUX),
        "tolerations": k8s.tolerations(config.network.tolerations, CALICO_CRITICAL_TOLERATIONS),
        **({"serviceAccountName": KUBE_CONTROLLERS} if rbac else {}),
        "priorityClassName": config.network.options.get(priority_option) or "system-cluster-critical",
        "containers": [container],
    }
    template = {
        "metadata": {"name": KUBE_CONTROLLERS, "namespace": k8s.SYSTEM, "labels": labels},
        "spec": pod,
    }
    spec = {
        "replicas": 1,
        "selector": {"matchLabels": labels},
        "strategy": {"type": "Recreate"},
        "template": template,
    }
    deployment = k8s.obj("apps/v1", "Deployment", KUBE_CONTROLLERS, k8s.SYSTEM, spec=spec)
    budget = k8s.obj(
        "policy/v1", "PodDisruptionBudget", KUBE_CONTROLLERS, k8s.SYSTEM,
        spec={"maxUnavailable": 1, "selector": {"matchLabels": labels}},
    )  # fmt: skip
    for item in (deployment, budget):
        item["metadata"]["labels"] = dict(labels)
    return [deployment, *([k8s.service_account(KUBE_CONTROLLERS)] if rbac else []), budget]


def canal(config: ClusterConfig) -> list[Obj]:
    """Object for object as RKE renders KDM's canal templates v3.26.1 to v3.28.1 (tests/kdm), but for
    the CRDs' schemas (the README says why)."""
    rbac = config.authorization.mode == "rbac"
    canal_sa = [k8s.sa_subject("canal")]
    cni_sa = [k8s.sa_subject("calico-cni-plugin")]
    roles = [
        *k8s.bound_role(KUBE_CONTROLLERS, _kube_controllers_rules(), KUBE_CONTROLLERS),
        k8s.cluster_role("calico", _canal_rules()),
        k8s.cluster_role(
            "calico-cni-plugin",
            [rule([""], ["pods", "nodes", "namespaces"], ["get"]), rule([""], ["pods/status"], ["patch"])],
        ),
        k8s.cluster_role(
            "flannel",
            [
                rule([""], ["pods"], ["get"]),
                rule([""], ["nodes"], ["list", "watch"]),
                rule([""], ["nodes/status"], ["patch"]),
            ],
        ),
        k8s.cluster_role_binding("canal-flannel", "flannel", canal_sa),
        k8s.cluster_role_binding("canal-calico", "calico", canal_sa),
    ]
    daemonset = k8s.obj(
        "apps/v1",
        "DaemonSet",
        "canal",
        k8s.SYSTEM,
        spec={
            "selector": {"matchLabels": {"k8s-app": "canal"}},
            "updateStrategy": k8s.daemonset_strategy(config.network.update_strategy),
            "template": {"metadata": {"labels": {"k8s-app": "canal"}}, "spec": _canal_pod(config, rbac)},
        },
    )
    daemonset["metadata"]["labels"] = {"k8s-app": "canal"}
    return [
        _canal_config(config),
        *_crds(),
        *(roles if rbac else []),
        k8s.cluster_role_binding("calico-cni-plugin", "calico-cni-plugin", cni_sa),
        daemonset,
        *([k8s.service_account("canal"), k8s.service_account("calico-cni-plugin")] if rbac else []),
        *_kube_controllers(
            config,
            config.system_images.canal_controllers,
            rbac,
            "calico_kube_controllers_priority_class_name",
        ),
    ]


# KDM's flannel templates for the lines rke-py carries: v0.21.4 before v1.28.6, v0.24.2 (labels on its
# RBAC objects and ConfigMap), v0.25.1 from v1.29 (nftables off in net-conf.json, no clustercidrs rule)
FLANNEL_V0_24_FROM, FLANNEL_V0_25_FROM = "v1.28.6-rancher1-1", "v1.29.0-rancher1-1"
FLANNEL_CNI_CONF = """{
  "name": "cbr0",
  "cniVersion": "0.3.1",
  "plugins": [
    {
      "type": "flannel",
      "delegate": {
        "forceAddress": true,
        "hairpinMode": true,
        "isDefaultGateway": true
      }
    },
    {
      "type": "portmap",
      "capabilities": {
        "portMappings": true
      }
    }
  ]
}
"""


def _flannel_net_conf(config: ClusterConfig, nftables_key: bool) -> str:
    """net-conf.json as RKE's template writes it: the pod network, then the backend from network.options."""
    network = config.services.kube_controller.cluster_cidr.split(",")[0]
    lines = ["{", f'  "Network": "{network}",']
    if nftables_key:
        lines.append('  "EnableNFTables": false,')
    lines += [
        '  "Backend": {',
        f'    "Type": "{_option(config, "backend_type")}",',
        f'    "VNI": {int(_option(config, "backend_vni"))},',
        f'    "Port": {int(_option(config, "backend_port"))}',
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def flannel(config: ClusterConfig) -> list[Obj]:
    """Object for object as RKE renders KDM's `flannel-v0.21.4`, `-v0.24.2` and `-v0.25.1` (tests/kdm)."""
    images, network, version = config.system_images, config.network, version_key(config.kubernetes_version)
    v0_24 = version >= version_key(FLANNEL_V0_24_FROM)
    labels = {"tier": "node", "k8s-app": "flannel"}
    install = {
        "name": "install-cni",
        "image": images.flannel_cni,
        "command": ["/install-cni.sh"],
        "env": [
            k8s.config_env("CNI_NETWORK_CONFIG", "kube-flannel-cfg", "cni-conf.json"),
            {"name": "CNI_CONF_NAME", "value": "10-flannel.conflist"},
        ],
        "volumeMounts": [
            k8s.mount("cni", "/host/etc/cni/net.d"),
            k8s.mount("host-cni-bin", "/host/opt/cni/bin/"),
        ],
    }
    flanneld = {
        "name": "kube-flannel",
        "image": images.flannel,
        "command": ["/opt/bin/flanneld"],
        "args": [
            "--ip-masq",
            "--kube-subnet-mgr",
            *([f"--iface={iface}"] if (iface := _option(config, "iface")) else []),
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}},
        "securityContext": {
            "seLinuxOptions": {"type": "rke_network_t"},
            "privileged": False,
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
        },
        "env": [
            k8s.field_env("POD_NAME", "metadata.name"),
            k8s.field_env("POD_NAMESPACE", "metadata.namespace"),
            {"name": "EVENT_QUEUE_DEPTH", "value": "5000"},
        ],
        "volumeMounts": [
            k8s.mount("run", "/run/flannel"),
            k8s.mount("flannel-cfg", "/etc/kube-flannel/"),
            k8s.mount("xtables-lock", "/run/xtables.lock"),
        ],
    }
    linux = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    pod = {
        "affinity": {"nodeAffinity": k8s.node_affinity(linux)},
        **({"nodeSelector": dict(network.node_selector)} if network.node_selector else {}),
        "hostNetwork": True,
        "priorityClassName": network.options.get("kube_flannel_priority_class_name")
        or "system-node-critical",
        "tolerations": [
            {"operator": "Exists", "effect": "NoSchedule"},
            {"operator": "Exists", "effect": "NoExecute"},
        ],
        "serviceAccountName": "flannel",
        "containers": [install, flanneld],
        "volumes": [
            k8s.host_volume("run", "/run/flannel"),
            k8s.host_volume("host-cni-bin", CNI_BIN),
            k8s.host_volume("cni", CNI_NET),
            {"name": "flannel-cfg", "configMap": {"name": "kube-flannel-cfg"}},
            k8s.host_volume("xtables-lock", "/run/xtables.lock", "FileOrCreate"),
        ],
    }
    spec = {
        "selector": {"matchLabels": {"k8s-app": "flannel"}},
        "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        "updateStrategy": k8s.daemonset_strategy(network.update_strategy),
    }
    daemonset = k8s.obj("apps/v1", "DaemonSet", "kube-flannel", k8s.SYSTEM, spec=spec)
    daemonset["metadata"]["labels"] = dict(labels)
    v0_25 = version >= version_key(FLANNEL_V0_25_FROM)
    rules = _flannel_rules()
    if not v0_25:
        rules.append(rule(["networking.k8s.io"], ["clustercidrs"], ["list", "watch"]))
    rbac = [
        k8s.cluster_role("flannel", rules),
        k8s.cluster_role_binding("flannel", "flannel", [k8s.sa_subject("flannel")]),
        k8s.service_account("flannel"),
    ]
    if v0_24:
        for item in rbac:
            item["metadata"]["labels"] = {"k8s-app": "flannel"}
    net_conf = _flannel_net_conf(config, nftables_key=v0_25)
    config_map = k8s.config_map(
        "kube-flannel-cfg", {"cni-conf.json": FLANNEL_CNI_CONF, "net-conf.json": net_conf}
    )
    config_map["metadata"]["labels"] = {**(labels if v0_24 else {"tier": "node"}), "app": "flannel"}
    return [*(rbac if config.authorization.mode == "rbac" else []), config_map, daemonset]


def calico(config: ClusterConfig) -> list[Obj]:
    images = config.system_images
    ipam = {"type": "calico-ipam"}
    pod_cidr = config.services.kube_controller.cluster_cidr.split(",")[0]
    flexvol_dir = _option(config, "flex_volume_plugin_dir")
    node = _calico_node(
        images.calico_node,
        [
            k8s.config_env("CALICO_NETWORKING_BACKEND", "calico-config", "calico_backend"),
            *k8s.env(
                CLUSTER_TYPE="k8s,bgp",
                IP="autodetect",
                CALICO_IPV4POOL_IPIP="Always",
                CALICO_IPV4POOL_CIDR=pod_cidr,
            ),
            k8s.config_env("FELIX_IPINIPMTU", "calico-config", "veth_mtu"),
        ],
    )
    node["volumeMounts"].append(k8s.mount("cni-net-dir", "/host/etc/cni/net.d"))
    pod = {
        "initContainers": [
            _install_cni(images.calico_cni, "10-calico.conflist", "calico-config"),
            _flexvol(images.calico_flexvol),
        ],
        "containers": [node],
        "volumes": _node_volumes(flexvol_dir),
    }
    controllers_pod = k8s.pod_spec(
        [
            k8s.container(
                "calico-kube-controllers",
                images.calico_controllers,
                env=k8s.env(ENABLED_CONTROLLERS="node", DATASTORE_TYPE="kubernetes"),
                readinessProbe={"exec": {"command": ["/usr/bin/check-status", "-r"]}},
            )
        ],
        account="calico-kube-controllers",
        node_selector=config.network.node_selector,
        tolerations_=k8s.tolerations(config.network.tolerations, k8s.CRITICAL_TOLERATIONS),
        priority_class="system-cluster-critical",
    )
    controllers_rules = [
        rule([""], ["nodes"], ["watch", "list", "get"]),
        rule([""], ["pods"], ["get"]),
        rule([CALICO_GROUP], ["ipreservations"], ["list"]),
        rule(
            [CALICO_GROUP],
            ["blockaffinities", "ipamblocks", "ipamhandles"],
            ["get", "list", "create", "update", "delete", "watch"],
        ),
        rule([CALICO_GROUP], ["hostendpoints"], ["get", "list", "create", "update", "delete"]),
        rule([CALICO_GROUP], ["clusterinformations"], ["get", "list", "create", "update", "watch"]),
        rule([CALICO_GROUP], ["kubecontrollersconfigurations"], ["get", "create", "update", "watch"]),
    ]
    return [
        *_crds(),
        k8s.service_account("calico-node"),
        k8s.service_account("calico-kube-controllers"),
        *k8s.bound_role("calico-node", _calico_node_rules(), "calico-node"),
        *k8s.bound_role("calico-kube-controllers", controllers_rules, "calico-kube-controllers"),
        k8s.config_map(
            "calico-config",
            {
                "typha_service_name": "none",
                "calico_backend": "bird",
                "veth_mtu": str(config.network.mtu or 1440),
                "cni_network_config": _cni_config(config, ipam),
            },
        ),
        _node_daemonset(config, "calico-node", "calico-node", pod),
        k8s.workload(
            "Deployment",
            "calico-kube-controllers",
            {"k8s-app": "calico-kube-controllers"},
            controllers_pod,
            replicas=1,
            strategy={"strategy": "Recreate"},
        ),
    ]
