"""Reaching hosts: SSH connections, the Docker API over them, files and health checks from the node.

The transport takes targets (`SSHTarget`), never the cluster model; `rke_py.deploy.targets` makes them.

- `base`: `HostConnection` and `Docker`, the protocols observe, apply and verify use (a fake host fits).
- `host`: `Host`, the real `HostConnection`: an SSH connection and the Docker API over it.
- `ssh`: `SSHTarget`, `connect` and `Connection` (commands, SFTP, tunnels).
- `connections`: `Connections`, the run's one-connection-per-host cache (with the shared bastion).
- `docker_api`: `docker_client`, docker-py over the host's own SSH transport, as `HostDocker`.
- `hostkeys`: `HostKeyStore` and `HostKeyPolicy` (pins kept in the cluster state's `rkePy.hostKeys`).
- `keys`: private keys, loaded and unlocked once per run.
- `channels`: Unix-socket channels and HTTP(S) over SSH channels.
"""
