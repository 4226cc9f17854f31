"""The local lab: hosts as containers (sshd + dockerd each), offline-built images, a registry.

`hosts` (up/down/status), `images` and `rootfs` (image builds), `registry`; `kube/` holds the lab
Kubernetes components that run inside the hyperkube image. This file is copied into that image, so it
must import nothing.
"""
