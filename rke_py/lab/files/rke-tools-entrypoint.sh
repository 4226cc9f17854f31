#!/bin/sh
# The lab's /opt/rke-tools/entrypoint.sh: the real one prepares the host (cri-dockerd, iptables wrapper,
# cgroup fixes) before running the component; the lab components need none of that.
exec "$@"
