"""Lab stand-ins for the Kubernetes server components (test infrastructure, not Kubernetes).

Real kube-apiserver, kube-controller-manager, kube-scheduler, kubelet and kube-proxy binaries cannot be
obtained offline, so the local lab runs these small programs in their place. They keep the parts of the
contract rke-py depends on, strictly: the real flag names (any other flag is refused), TLS with client
certificates, state in the real etcd, the Lease API with resourceVersion conflicts, lease-based leader
election, node registration with taints, and the real health ports. They use the Python standard library
only, because the lab image carries nothing else.

Run one with ``python3 -m rke_py.lab.kube <component> [flags]``, or through a link or wrapper script
named after the component (``/usr/local/bin/kube-apiserver``): the program name selects it.

Lab shortcuts, on purpose:

* Objects are stored in etcd as JSON (the real apiserver writes protobuf for built-in kinds); keys follow
  the real layout (``/registry/minions/<node>``, ``/registry/leases/<ns>/<name>``).
* Authorization is a fixed policy equal to what bootstrap RBAC and the Node authorizer grant RKE's
  identities (system:masters, the controller-manager, scheduler, nodes, kube-proxy); RBAC objects are
  stored, not evaluated. Only client certificates authenticate (no tokens). Secrets are not encrypted
  even with ``--encryption-provider-config``.
* Watches poll etcd twice a second; intermediate states between polls are coalesced.
* Without ``--tls-cert-file`` the controller-manager, scheduler and kubelet serve HTTPS with the client
  certificate of their kubeconfig, since the image has no way to make a self-signed one.
* The scheduler schedules nothing, the kubelet runs no pods, kube-proxy programs no rules: they keep
  their leases, node status and health endpoints, which is what rke-py checks.
"""

VERSION = "v1.30.4-lab"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy")
