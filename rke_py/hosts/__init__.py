"""Reaching hosts: SSH connections, the Docker API over them, files and health checks from the node.

- `ssh`: `SSHTarget`, `target_for`, `bastion_target`, `connect` and `Connection` (commands, SFTP, tunnels).
- `connections`: `Connections`, the run's one-connection-per-host cache (with the shared bastion).
- `docker_api`: `docker_client`, docker-py over the host's own SSH transport.
- `hostkeys`: `HostKeyStore` and `HostKeyPolicy` (pins kept in the cluster state's `rkePy.hostKeys`).
- `keys`: private keys, loaded and unlocked once per run.
- `channels`: Unix-socket channels and HTTP(S) over SSH channels.
"""
