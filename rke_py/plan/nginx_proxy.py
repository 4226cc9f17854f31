"""nginx-proxy: on every node without kube-apiserver, 127.0.0.1:6443 leads to every apiserver.

Unlike RKE (confd inside rke-tools renders the config from `CP_HOSTS`), rke-py renders nginx.conf itself and
bind-mounts it, so the file is visible, testable, and its hash decides when the proxy is replaced. Stock
nginx is enough; the image only needs the stream module. A proxy RKE started for the same apiservers is kept
(replacing it would cut the node off the API for a moment): rke-py then writes the configuration inside it.
"""

from __future__ import annotations

import dataclasses

from rke_py.config.schema import ClusterConfig
from rke_py.plan.common import host_path
from rke_py.plan.model import ContainerSpec, FileSpec, RunConfig
from rke_py.templating import template

NAME = "nginx-proxy"
CONF_DIR = "/etc/kubernetes/nginx-proxy"  # on the host, under prefix_path
MOUNT_DIR = "/etc/nginx/rke-py"  # in the container
RKE_CONF = "/etc/nginx/nginx.conf"  # in RKE's proxy, where confd renders it from CP_HOSTS on start


def apiservers(config: ClusterConfig) -> list[str]:
    """Internal addresses of the controlplane nodes, in file order."""
    return [n.internal_address for n in config.hosts("controlplane")]


# Seconds a proxy keeps an apiserver it could not reach out of rotation: short, as an apiserver that was
# restarted is back within seconds.
FAIL_TIMEOUT = 2


def render(config: ClusterConfig, down: tuple[str, ...] = (), rkes: bool = False) -> str:
    """nginx.conf; apiservers in `down` are out of rotation while a rolling change replaces them. `rkes`:
    for RKE's proxy, which listens on every address and keeps nginx's own pid file."""
    return template("nginx.conf.j2").render(
        apiservers=apiservers(config), fail_timeout=FAIL_TIMEOUT, down=down, rkes=rkes
    )


# `nginx -s reload` only signals the master: under load its old workers go on taking new connections (to
# the apiservers they knew) for seconds. So the reload, the command given as arguments, waits until every
# worker that served before it has closed its listeners (nginx then titles it "is shutting down") and a new
# one serves: /proc/PID/cmdline shows those titles. POSIX sh, busybox's too (rke-tools' for RKE's proxy).
_RELOAD_AND_WAIT = r"""
serving() { for p in /proc/[0-9]*; do
  [ "$(tr -d '\000' 2>/dev/null < "$p/cmdline")" = "nginx: worker process" ] && echo "${p#/proc/}"; done; }
before=" $(echo $(serving)) "
"$@" || exit
i=0
while [ $i -lt 200 ]; do
  now=$(serving) left=
  for p in $now; do case "$before" in *" $p "*) left=$p ;; esac; done
  [ -n "$now" ] && [ -z "$left" ] && exit 0
  sleep 0.05; i=$((i + 1))
done
echo "nginx still serves with its old configuration (worker $left) 10 s after the reload" >&2
exit 1
"""


def reload_command(conf: FileSpec, rkes: bool = False) -> list[str]:
    """Makes the running proxy read its nginx.conf again and returns once its workers have taken it;
    connections in flight are kept. RKE's proxy reads no file of the host's: `conf` is written inside it
    first."""
    if rkes:
        write = f'printf %s "$1" > {RKE_CONF} || exit; shift\n'
        return ["sh", "-c", write + _RELOAD_AND_WAIT, "sh", conf.content.decode(), "nginx", "-s", "reload"]
    return ["sh", "-c", _RELOAD_AND_WAIT, "sh", "nginx", "-c", f"{MOUNT_DIR}/nginx.conf", "-s", "reload"]


def rkes_run_config(spec: ContainerSpec, image_env: frozenset[str]) -> RunConfig:
    """What the proxy RKE starts for the same apiservers runs (`BuildProxyProcess`): rke-tools' nginx-proxy
    entrypoint, given CP_HOSTS also as its argument, and no bind."""
    return dataclasses.replace(
        spec.run_config(image_env), entrypoint=("nginx-proxy",), command=spec.env, binds=frozenset()
    )


def conf_path(config: ClusterConfig) -> str:
    return host_path(config, f"{CONF_DIR}/nginx.conf")


def files(config: ClusterConfig) -> list[FileSpec]:
    return [FileSpec(conf_path(config), render(config).encode(), mode=0o644)]


def container(config: ClusterConfig, apiservers: tuple[str, ...]) -> ContainerSpec:
    return ContainerSpec(
        name=NAME,
        image=config.system_images.nginx_proxy,
        entrypoint=("nginx", "-c", f"{MOUNT_DIR}/nginx.conf", "-g", "daemon off;"),
        env=(f"CP_HOSTS={','.join(apiservers)}",),  # RKE's variable; informative here
        binds=(f"{host_path(config, CONF_DIR)}:{MOUNT_DIR}:ro",),
        files=(conf_path(config),),
    )
