"""The cluster state kept in the cluster, as RKE keeps it: Secret `kube-system/full-cluster-state`, key
`full-cluster-state`, the JSON of cluster.rkestate. `up` stores it after every successful run; `util
get-state-file` and recurring snapshots read it back when the local file is lost.

Who can read it: cluster admins (system:masters); as in RKE, the kube-node identity every kubelet shares
can read secrets too (the `system:node` role RKE binds), which is how rke-tools puts the state into
recurring snapshots.
"""

from __future__ import annotations

import base64
from typing import Any

NAME = "full-cluster-state"
NAMESPACE = "kube-system"
PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/{NAME}"
LIMIT = 1024 * 1024  # bytes of data a Secret may hold (Kubernetes' MaxSecretSize): keys and values


def fits(state_json: str) -> bool:
    """Whether the apiserver accepts the state as the Secret's data (past about 1,700 nodes it does not)."""
    return len(NAME) + len(state_json.encode()) <= LIMIT


def state_secret(state_json: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {NAME: base64.b64encode(state_json.encode()).decode()},
    }


def state_from_secret(secret: dict[str, Any]) -> str | None:
    encoded = (secret.get("data") or {}).get(NAME)
    return base64.b64decode(encoded).decode() if encoded else None
