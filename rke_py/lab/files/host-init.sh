#!/bin/sh
# PID 1's child in a lab host (docker-init/tini is PID 1 and reaps orphans).
# Makes the container behave like a machine: writable /sys and cgroups, shared mounts for the
# kubelet's bind propagation, a fresh /run after every restart, then dockerd and sshd.
set -u

log() { echo "lab-init: $*"; }

# /sys and each cgroup v1 controller arrive read-only; a plain remount of a cgroup says "busy".
mount -o remount,rw /sys || log "cannot remount /sys rw"
while read -r _ mnt fstype _; do
    [ "$fstype" = cgroup ] || continue
    mount -o remount,bind,rw "$mnt" || log "cannot remount $mnt rw"
done < /proc/mounts
mount -o remount,rw /sys/fs/cgroup 2>/dev/null || true

# The kubelet reads /dev/kmsg, which a container lacks; as kind does, point it at /dev/null.
[ -e /dev/kmsg ] || ln -s /dev/null /dev/kmsg

# Bind mounts with shared/slave propagation (kubelet's /var/lib/kubelet) need shared parents.
mount --make-rshared /

# A fresh /run: stale pid files from before a `docker restart` would stop dockerd from starting.
mount -t tmpfs -o mode=0755,nosuid,nodev tmpfs /run
mkdir -p /run/sshd /run/lock /var/log /var/lib/docker
chmod 0755 /run/sshd

ssh-keygen -A >/dev/null

# The SSH user cluster.yml names, when it is not root: in the docker group (so it may use Docker, and
# nothing else of root's), logging in with root's lab key.
user=$(cat /etc/rke-py-lab/user 2>/dev/null || echo root)
if [ "$user" != root ] && ! grep -q "^$user:" /etc/passwd; then
    echo "$user:x:1000:1000::/home/$user:/bin/sh" >>/etc/passwd
    echo "$user:*:19000:0:99999:7:::" >>/etc/shadow
    echo "$user:x:1000:" >>/etc/group
    sed -i "s/^docker:x:999:.*/docker:x:999:$user/" /etc/group
    mkdir -p "/home/$user/.ssh"
    cp /root/.ssh/authorized_keys "/home/$user/.ssh/authorized_keys"
    chown -R 1000:1000 "/home/$user"
    chmod 700 "/home/$user/.ssh"
    log "user $user (docker group) made"
fi

# A name server on the host's own address, as a machine's network has one: it answers the lab's host
# names (/etc/rke-py-lab/hosts) and NXDOMAIN to any other, so no query leaves the lab. Docker's 127.0.0.11
# is loopback: a DNS add-on (dnsPolicy: Default) forwarding there would reach itself, and CoreDNS's loop
# plugin exits on that.
address=$(awk -v name="$(hostname)" '$2 == name {print $1}' /etc/rke-py-lab/hosts 2>/dev/null)
if [ -n "$address" ]; then
    dnsmasq --user=root --group=root --listen-address="$address" --bind-interfaces --no-resolv --local=/#/ \
        --no-hosts --addn-hosts=/etc/rke-py-lab/hosts --pid-file=/run/dnsmasq.pid \
        --log-facility=/var/log/dnsmasq.log &&
        echo "nameserver $address" >/etc/resolv.conf
fi

dockerd --config-file /etc/docker/daemon.json >>/var/log/dockerd.log 2>&1 &
dockerd_pid=$!
/usr/sbin/sshd -D -e >>/var/log/sshd.log 2>&1 &
sshd_pid=$!
log "started dockerd ($dockerd_pid) and sshd ($sshd_pid)"

# The lab's pod network, as a user's own CNI would run it with `network: plugin: none`: while a kubelet
# runs here, this node has a CNI config (a bridge on its own pod subnet, /etc/rke-py-lab/network line 1),
# the plugins in /opt/cni/bin, and routes to the other nodes' pod subnets (the following lines).
# `rke-py remove` wipes /etc/cni and /opt/cni as RKE does; with no kubelet and no config left, nothing
# comes back and the routes go too (a kubelet being replaced keeps them).
lab_network() {
    [ -f /etc/rke-py-lab/network ] || return 0
    # A kubelet runs here when its healthz port (10248, hex 2808) listens; cheaper than asking Docker.
    if ! grep -q ':2808 00000000:0000 0A' /proc/net/tcp 2>/dev/null; then
        [ -f /etc/cni/net.d/10-lab.conflist ] && return 0
        tail -n +2 /etc/rke-py-lab/network | while read -r dst via; do
            ip route del "$dst" via "$via" 2>/dev/null
        done
        return 0
    fi
    if [ ! -f /etc/cni/net.d/10-lab.conflist ]; then
        subnet=$(head -n 1 /etc/rke-py-lab/network)
        mkdir -p /etc/cni/net.d /opt/cni/bin
        cp /usr/lib/cni/* /opt/cni/bin/ 2>/dev/null
        sed "s#@SUBNET@#$subnet#" /etc/rke-py-lab/10-lab.conflist >/etc/cni/net.d/10-lab.conflist.tmp &&
            mv /etc/cni/net.d/10-lab.conflist.tmp /etc/cni/net.d/10-lab.conflist &&
            log "pod network: CNI config for $subnet written"
        # Docker's bridge sets the FORWARD policy to DROP: pods' traffic is let through, as flannel does
        # for its network.
        awk '{print $1}' /etc/rke-py-lab/network | while read -r net; do
            for dir in -s -d; do
                iptables -C FORWARD "$dir" "$net" -j ACCEPT 2>/dev/null ||
                    iptables -I FORWARD 1 "$dir" "$net" -j ACCEPT
            done
        done
    fi
    tail -n +2 /etc/rke-py-lab/network | while read -r dst via; do
        ip route replace "$dst" via "$via" 2>/dev/null
    done
}

stop() {
    log "stopping"
    kill -TERM "$sshd_pid" "$dockerd_pid" 2>/dev/null
    wait "$dockerd_pid"
    exit 0
}
trap stop TERM INT

# Keep running while either daemon runs; a dead dockerd is restarted so the host heals itself, unless
# it was stopped on purpose (the lab's `systemctl stop docker`: /run/docker-stopped, gone on a restart);
# once a second the pod network follows the kubelet.
while :; do
    if ! kill -0 "$dockerd_pid" 2>/dev/null && [ ! -e /run/docker-stopped ]; then
        log "dockerd exited; restarting it"
        rm -f /run/docker.pid /run/docker/containerd/containerd.pid
        dockerd --config-file /etc/docker/daemon.json >>/var/log/dockerd.log 2>&1 &
        dockerd_pid=$!
    fi
    lab_network
    sleep 1 &
    wait $!
done
