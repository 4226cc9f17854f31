"""Bringing hosts and the cluster to the plan: observe → diff → apply, as commands made of phases.

- `desired`: cluster.yml + state → `Desired` (pure of hosts). `session`: connections, observations and the
  actions that follow (host diff, cluster objects). `actions`: every kind of change as a small class.
- `apply`: the one chokepoint that changes a host or the Kubernetes API. `phases`: the Phase interface and
  runner. `up`, `remove`, `status`: each command's list of phases.
- `observe`, `diff`, `preflight`, `reconcile`, `nodesync`, `saving`, `targets`, `parallel`: small units.
"""
