#!/bin/sh
# The lab's /opt/rke-tools/entrypoint.sh: for the kubelet it does what RKE's does (the host's /dev, the
# cgroup driver Docker uses, bridged traffic through iptables, cri-dockerd started beside the kubelet
# when RKE_KUBELET_CRIDOCKERD=true, both supervised so that either one exiting restarts the container).
# The lab's stand-in images carry no cri-dockerd; their kubelet then runs alone.
set -u
tools=/opt/rke-tools
if [ "$1" = kube-proxy ] && [ "${RKE_KUBE_PROXY_BR_NETFILTER:-}" = true ]; then
    modprobe br_netfilter 2>/dev/null || echo "entrypoint: modprobe br_netfilter failed" >&2
fi
[ "$1" = kubelet ] || exec "$@"

mount --rbind /host/dev /dev 2>/dev/null || true
# The private registries' credentials, where the kubelet looks for a Docker config (as RKE's entrypoint).
if [ -n "${RKE_KUBELET_DOCKER_CONFIG:-}" ] && [ -n "${RKE_KUBELET_DOCKER_FILE:-}" ]; then
    (umask 077 && echo "$RKE_KUBELET_DOCKER_CONFIG" | base64 -d >"$RKE_KUBELET_DOCKER_FILE")
fi
sysctl -w net.bridge.bridge-nf-call-iptables=1 >/dev/null 2>&1 || true
driver=cgroupfs
if [ -x "$tools/bin/docker" ]; then
    driver=$("$tools/bin/docker" info -f '{{.CgroupDriver}}' 2>/dev/null || echo cgroupfs)
fi
if [ "${RKE_KUBELET_CRIDOCKERD:-}" != true ] || [ ! -x "$tools/bin/cri-dockerd" ]; then
    exec "$@" --cgroup-driver="$driver"
fi

infra=""
for arg in "$@"; do
    case "$arg" in --pod-infra-container-image=*) infra="${arg#*=}" ;; esac
done
dualstack=""
[ "${RKE_KUBELET_CRIDOCKERD_DUALSTACK:-}" = true ] && dualstack="--ipv6-dual-stack"
"$tools/bin/cri-dockerd" --network-plugin=cni --cni-conf-dir=/etc/cni/net.d --cni-bin-dir=/opt/cni/bin \
    --pod-infra-container-image="$infra" --container-runtime-endpoint=unix:///var/run/cri-dockerd.sock \
    --streaming-bind-addr="${CRIDOCKERD_STREAM_SERVER_ADDRESS:-127.0.0.1}:${CRIDOCKERD_STREAM_SERVER_PORT:-10010}" \
    $dualstack &
cri=$!
sleep 2
"$@" --cgroup-driver="$driver" &
kubelet=$!
trap 'kill "$cri" "$kubelet" 2>/dev/null; exit 0' TERM INT
while kill -0 "$cri" 2>/dev/null && kill -0 "$kubelet" 2>/dev/null; do
    sleep 1
done
echo "entrypoint: cri-dockerd or the kubelet exited; stopping both" >&2
kill "$cri" "$kubelet" 2>/dev/null
exit 1
