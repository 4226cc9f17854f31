"""The lab's Kubernetes image for real binaries carries the tools those binaries run, as RKE's hyperkube
does: the stand-in suite in CI never starts them, so only this says when one goes missing."""

from __future__ import annotations

from pathlib import Path

from rke_py.lab import images


def test_the_image_of_real_binaries_carries_iptables_and_conntrack_for_kube_proxy(tmp_path: Path) -> None:
    for component in images.KUBE_COMPONENTS:
        (tmp_path / component).write_text("#!/bin/sh\n")
    rootfs, _ = images.hyperkube_rootfs(tmp_path)
    for component in images.KUBE_COMPONENTS:
        assert rootfs.has(f"/usr/local/bin/{component}")
    # iptables-restore writes kube-proxy's rules; conntrack deletes the UDP flows of an endpoint that left
    # a Service (without it a DNS query could still go to a pod that was gone)
    assert rootfs.has("/usr/sbin/iptables-restore")
    assert rootfs.has("/usr/sbin/conntrack")
