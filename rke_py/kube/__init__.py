"""The Kubernetes API as rke-py uses it: a small client for verify and the cluster objects `up` keeps.

What is kept there is decided in `rke_py.deploy` (e.g. `nodesync`) and changed through its chokepoint.
"""
