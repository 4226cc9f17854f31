"""Command-line flags of each component, by their real names.

The real binaries (cobra/pflag) refuse any flag they do not know with ``Error: unknown flag: --x`` and
exit 1; these tables make the lab components just as strict, so a flag rke-py renders wrongly fails in the
lab too. Values use pflag's syntax: ``--flag=value``, ``--flag value``, and a bare ``--flag`` for booleans.
"""

import re
from dataclasses import dataclass, field

from rke_py.lab.kube import VERSION

STR, BOOL, INT, DURATION, FLOAT = "string", "bool", "int", "duration", "float"

# Flags every Kubernetes component gets from klog and component-base.
_COMMON = {
    "v": INT,
    "vmodule": STR,
    "log-flush-frequency": DURATION,
    "logging-format": STR,
    "help": BOOL,
    "version": BOOL,
}

_SERVING = {
    "bind-address": STR,
    "secure-port": INT,
    "cert-dir": STR,
    "tls-cert-file": STR,
    "tls-private-key-file": STR,
    "tls-cipher-suites": STR,
    "tls-min-version": STR,
    "authentication-kubeconfig": STR,
    "authorization-kubeconfig": STR,
    "authorization-always-allow-paths": STR,
    "client-ca-file": STR,
    "requestheader-client-ca-file": STR,
    "requestheader-allowed-names": STR,
    "requestheader-extra-headers-prefix": STR,
    "requestheader-group-headers": STR,
    "requestheader-username-headers": STR,
    "profiling": BOOL,
    "contention-profiling": BOOL,
    "kubeconfig": STR,
    "master": STR,
    "kube-api-qps": FLOAT,
    "kube-api-burst": INT,
    "kube-api-content-type": STR,
}

_LEADER_ELECTION = {
    "leader-elect": BOOL,
    "leader-elect-lease-duration": DURATION,
    "leader-elect-renew-deadline": DURATION,
    "leader-elect-retry-period": DURATION,
    "leader-elect-resource-lock": STR,
    "leader-elect-resource-name": STR,
    "leader-elect-resource-namespace": STR,
}

TABLES: dict[str, dict[str, str]] = {
    "kube-apiserver": {
        **_COMMON,
        "admission-control-config-file": STR,
        "advertise-address": STR,
        "allow-privileged": BOOL,
        "anonymous-auth": BOOL,
        "api-audiences": STR,
        "apiserver-count": INT,
        "authentication-token-webhook-cache-ttl": DURATION,
        "authentication-token-webhook-config-file": STR,
        "authentication-token-webhook-version": STR,
        "audit-log-format": STR,
        "audit-log-maxage": INT,
        "audit-log-maxbackup": INT,
        "audit-log-maxsize": INT,
        "audit-log-path": STR,
        "audit-policy-file": STR,
        "authorization-mode": STR,
        "bind-address": STR,
        "cert-dir": STR,
        "client-ca-file": STR,
        "cloud-config": STR,
        "cloud-provider": STR,
        "disable-admission-plugins": STR,
        "enable-admission-plugins": STR,
        "encryption-provider-config": STR,
        "endpoint-reconciler-type": STR,
        "etcd-cafile": STR,
        "etcd-certfile": STR,
        "etcd-keyfile": STR,
        "etcd-prefix": STR,
        "etcd-servers": STR,
        "event-ttl": DURATION,
        "feature-gates": STR,
        "kubelet-certificate-authority": STR,
        "kubelet-client-certificate": STR,
        "kubelet-client-key": STR,
        "kubelet-preferred-address-types": STR,
        "max-mutating-requests-inflight": INT,
        "max-requests-inflight": INT,
        "profiling": BOOL,
        "proxy-client-cert-file": STR,
        "proxy-client-key-file": STR,
        "request-timeout": DURATION,
        "requestheader-allowed-names": STR,
        "requestheader-client-ca-file": STR,
        "requestheader-extra-headers-prefix": STR,
        "requestheader-group-headers": STR,
        "requestheader-username-headers": STR,
        "runtime-config": STR,
        "secure-port": INT,
        "service-account-issuer": STR,
        "service-account-key-file": STR,
        "service-account-lookup": BOOL,
        "service-account-signing-key-file": STR,
        "service-cluster-ip-range": STR,
        "service-node-port-range": STR,
        "storage-backend": STR,
        "tls-cert-file": STR,
        "tls-cipher-suites": STR,
        "tls-min-version": STR,
        "tls-private-key-file": STR,
    },
    "kube-controller-manager": {
        **_COMMON,
        **_SERVING,
        **_LEADER_ELECTION,
        "allocate-node-cidrs": BOOL,
        "allow-untagged-cloud": BOOL,
        "cloud-config": STR,
        "cloud-provider": STR,
        "cluster-cidr": STR,
        "cluster-name": STR,
        "cluster-signing-cert-file": STR,
        "cluster-signing-key-file": STR,
        "concurrent-deployment-syncs": INT,
        "configure-cloud-routes": BOOL,
        "controllers": STR,
        "enable-hostpath-provisioner": BOOL,
        "feature-gates": STR,
        "node-cidr-mask-size": INT,
        "node-monitor-grace-period": DURATION,
        "node-monitor-period": DURATION,
        "root-ca-file": STR,
        "service-account-private-key-file": STR,
        "service-cluster-ip-range": STR,
        "terminated-pod-gc-threshold": INT,
        "use-service-account-credentials": BOOL,
    },
    "kube-scheduler": {
        **_COMMON,
        **_SERVING,
        **_LEADER_ELECTION,
        "config": STR,
        "feature-gates": STR,
    },
    "kubelet": {
        **_COMMON,
        "address": STR,
        "anonymous-auth": BOOL,
        "authentication-token-webhook": BOOL,
        "authorization-mode": STR,
        "bootstrap-kubeconfig": STR,
        "cgroup-driver": STR,
        "cgroups-per-qos": BOOL,
        "client-ca-file": STR,
        "cloud-config": STR,
        "cloud-provider": STR,
        "cluster-dns": STR,
        "cluster-domain": STR,
        "config": STR,
        "container-runtime-endpoint": STR,
        "enforce-node-allocatable": STR,
        "event-qps": INT,
        "eviction-hard": STR,
        "fail-swap-on": BOOL,
        "feature-gates": STR,
        "healthz-bind-address": STR,
        "healthz-port": INT,
        "hostname-override": STR,
        "kube-reserved": STR,
        "kubeconfig": STR,
        "make-iptables-util-chains": BOOL,
        "max-pods": INT,
        "node-ip": STR,
        "node-labels": STR,
        "node-status-update-frequency": DURATION,
        "pod-infra-container-image": STR,
        "port": INT,
        "protect-kernel-defaults": BOOL,
        "read-only-port": INT,
        "register-node": BOOL,
        "register-with-taints": STR,
        "resolv-conf": STR,
        "root-dir": STR,
        "rotate-certificates": BOOL,
        "streaming-connection-idle-timeout": DURATION,
        "system-reserved": STR,
        "tls-cert-file": STR,
        "tls-cipher-suites": STR,
        "tls-min-version": STR,
        "tls-private-key-file": STR,
        "volume-plugin-dir": STR,
    },
    "kube-proxy": {
        **_COMMON,
        "bind-address": STR,
        "cluster-cidr": STR,
        "config": STR,
        "conntrack-max-per-core": INT,
        "conntrack-min": INT,
        "feature-gates": STR,
        "healthz-bind-address": STR,
        "hostname-override": STR,
        "iptables-sync-period": DURATION,
        "kubeconfig": STR,
        "master": STR,
        "masquerade-all": BOOL,
        "metrics-bind-address": STR,
        "nodeport-addresses": STR,
        "proxy-mode": STR,
    },
}

# Single-letter forms the real binaries accept.
SHORTHANDS = {"v": "v", "h": "help"}

_BOOL_WORDS = {
    "1": True, "t": True, "T": True, "true": True, "TRUE": True, "True": True,
    "0": False, "f": False, "F": False, "false": False, "FALSE": False, "False": False,
}  # fmt: skip
_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


class FlagError(Exception):
    """A command line the real binary would refuse; the message is what it prints after ``Error: ``."""


def parse_bool(text: str) -> bool:
    """Go's strconv.ParseBool."""
    if text not in _BOOL_WORDS:
        raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')
    return _BOOL_WORDS[text]


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration, in seconds ("1m30s", "500ms", "0")."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if not match:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not body or pos != len(body):
        raise ValueError(f'time: invalid duration "{text}"')
    return -total if text.startswith("-") else total


def _convert(name: str, kind: str, raw: str) -> object:
    try:
        if kind == BOOL:
            return parse_bool(raw)
        if kind == INT:
            return int(raw, 0)
        if kind == FLOAT:
            return float(raw)
        if kind == DURATION:
            return parse_duration(raw)
    except ValueError as exc:
        detail = str(exc) if kind in (BOOL, DURATION) else f'parsing "{raw}": invalid syntax'
        raise FlagError(f'invalid argument "{raw}" for "--{name}" flag: {detail}') from None
    return raw


@dataclass
class Flags:
    """The flags a component was started with, converted to their types; ``get`` supplies defaults."""

    component: str
    values: dict[str, object] = field(default_factory=dict)

    def get(self, name: str, default: object = None) -> object:
        if name not in TABLES[self.component]:
            raise KeyError(f"{self.component} has no flag --{name}")
        return self.values.get(name, default)

    def __contains__(self, name: str) -> bool:
        return name in self.values


def parse(component: str, argv: list[str]) -> Flags:
    """Parse ``argv`` (without the program name) the way pflag does, refusing unknown flags."""
    table = TABLES[component]
    flags = Flags(component)
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--":
            if args:
                raise FlagError(f'"{component}" does not take any arguments, got {args!r}')
            break
        if arg.startswith("--"):
            name, eq, raw = arg[2:].partition("=")
            if name not in table:
                raise FlagError(f"unknown flag: --{name}")
        elif arg.startswith("-") and len(arg) > 1:
            short, eq, raw = arg[1:].partition("=")
            if short[0] not in SHORTHANDS or SHORTHANDS[short[0]] not in table:
                raise FlagError(f"unknown shorthand flag: '{short[0]}' in {arg}")
            name = SHORTHANDS[short[0]]
            if not eq and len(short) > 1:
                eq, raw = "=", short[1:]
        else:
            raise FlagError(f'"{component}" does not take any arguments, got ["{arg}"]')
        kind = table[name]
        if not eq:
            if kind == BOOL:
                raw = "true"
            elif args:
                raw = args.pop(0)
            else:
                raise FlagError(f"flag needs an argument: --{name}")
        flags.values[name] = _convert(name, kind, raw)
    return flags


def usage(component: str) -> str:
    lines = [f"{component} ({VERSION}, lab component)", "", "Flags:"]
    lines += [f"      --{name} {kind}" for name, kind in sorted(TABLES[component].items())]
    return "\n".join(lines) + "\n"
