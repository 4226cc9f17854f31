"""rke-py: stand up Kubernetes the RKE way, from an RKE-style cluster.yml."""

__version__ = "0.1.0"
