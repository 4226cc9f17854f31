"""kube-proxy stand-in: checks that it reaches the apiserver with its kubeconfig and serves /healthz and
/proxyMode on the real ports. It programs no iptables rules."""

import json
import os
import socket
import time

from rke_py.lab.kube import log, objects, serve
from rke_py.lab.kube.client import ApiError, KubeClient
from rke_py.lab.kube.flags import FlagError, Flags

_MODES = ("iptables", "ipvs", "nftables", "")


def run(flags: Flags) -> None:
    kubeconfig = flags.get("kubeconfig")
    if not kubeconfig:
        raise FlagError("--kubeconfig is required (the lab kube-proxy has no in-cluster config)")
    if not os.path.isfile(str(kubeconfig)):
        raise FlagError(f"--kubeconfig: stat {kubeconfig}: no such file or directory")
    mode = str(flags.get("proxy-mode", "iptables"))
    if mode not in _MODES:
        raise FlagError(f'--proxy-mode: invalid value "{mode}"')
    mode = mode or "iptables"
    client = KubeClient(str(kubeconfig))
    name = str(flags.get("hostname-override") or socket.gethostname()).lower()
    synced: dict[str, str] = {}

    def healthz() -> tuple[int, str]:
        body = {
            "lastUpdated": synced.get("at", ""),
            "currentTime": objects.now_rfc3339(),
            "nodeEligible": True,
        }
        return (200 if synced else 503), json.dumps(body)

    def proxy_mode() -> tuple[int, str]:
        return 200, mode

    health = serve.split_host_port(str(flags.get("healthz-bind-address", "0.0.0.0:10256")), 10256)
    metrics = serve.split_host_port(str(flags.get("metrics-bind-address", "127.0.0.1:10249")), 10249)
    serve.start(health, serve.health_handler({"/healthz": healthz, "/livez": healthz}))
    serve.start(metrics, serve.health_handler({"/proxyMode": proxy_mode, "/healthz": healthz}))
    log.info(f"healthz on {health[0]}:{health[1]}, metrics on {metrics[0]}:{metrics[1]}; mode {mode}")

    while True:
        try:
            client.get("/api/v1/services")
            client.get("/api/v1/endpoints")
            if not synced:
                log.info(f"synced services and endpoints from the apiserver (node {name})")
            synced["at"] = objects.now_rfc3339()
        except ApiError as exc:
            log.error(f"failed to list services: {exc}")
            time.sleep(2)
            continue
        time.sleep(30)
