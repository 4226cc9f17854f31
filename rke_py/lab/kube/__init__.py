"""Lab stand-ins for the Kubernetes server components (test infrastructure, not Kubernetes).

Real kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy binaries cannot be
obtained offline, so the local lab runs these small programs in their place. They keep the parts of the
contract rke-py depends on, strictly: the real flag names (any other flag is refused), TLS with client
certificates, state in the real etcd, the Lease API with resourceVersion conflicts, lease-based leader
election, node registration with taints, and the real health ports. They use the Python standard library
only, because the lab image carries nothing else.

Run one with ``python3 -m rke_py.lab.kube <component> [flags]``.
"""

VERSION = "v1.30.4-lab"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
