"""etcd-rolling-snapshots: rke-tools' `rke-etcd-backup etcd-backup save` on every etcd node, taking a
snapshot every `interval_hours`, pruning by `retention` (locally and in S3) and uploading to S3, with
RKE's command line (`RunEtcdSnapshotSave`). The S3 keys go in its environment, base64 as RKE passes them
(rke-tools decodes them), never in its arguments.
"""

from __future__ import annotations

import base64
import re

from rke_py.config import kdm
from rke_py.config.schema import ClusterConfig, Node
from rke_py.pki.bundle import KUBE_NODE
from rke_py.pki.paths import cert_path, key_path
from rke_py.plan.common import CA, KUBE_DIR, ca_file, cert_files, host_path
from rke_py.plan.model import S3_KEY_ENV, ContainerSpec
from rke_py.templating import hostport

NAME = "etcd-rolling-snapshots"
SNAPSHOT_DIR = "/opt/rke/etcd-snapshots"  # RKE's EtcdSnapshotPath, whatever prefix_path says; at /backup
BACKUP = "/backup"
TOOL = "/opt/rke-tools/rke-etcd-backup"
RKE_TOOLS = re.compile(r"(?P<name>.*rancher/rke-tools):[^/:]+")


def tools_image(config: ClusterConfig) -> str:
    """The image RKE runs its snapshot containers on (`util.GetDefaultRKETools`): the `alpine` image, with
    the tag of the default Kubernetes version's rke-tools when it is rancher/rke-tools."""
    image = config.system_images.alpine
    defaults = kdm.system_images(kdm.DEFAULT_K8S_VERSION)
    default = defaults["alpine"] if defaults else ""
    match = RKE_TOOLS.fullmatch(image)
    if match is None or ":" not in default:
        return image
    return f"{match['name']}:{default.rpartition(':')[2]}"


def enabled(config: ClusterConfig) -> bool:
    """`snapshot: true` (RKE's default) unless `backup_config.enabled: false`; internal etcd only."""
    etcd = config.services.etcd
    backup = etcd.backup_config
    return bool(etcd.snapshot) and not etcd.external_urls and (backup is None or backup.enabled is not False)


def container(config: ClusterConfig, node: Node) -> ContainerSpec:
    etcd = config.services.etcd
    command = [
        TOOL,
        "etcd-backup",
        "save",
        *("--cacert", cert_path(CA), "--cert", cert_path(KUBE_NODE), "--key", key_path(KUBE_NODE)),
        *("--name", NAME),
        f"--endpoints={hostport(node.internal_address, 2379)}",
    ]
    env = list(etcd.extra_env)
    backup = etcd.backup_config
    if backup is None:
        command += [f"--retention={etcd.retention}", f"--creation={etcd.creation}"]
    else:
        hours = backup.interval_hours
        command += [f"--creation={hours}h", f"--retention={backup.retention * hours}h"]
        s3 = backup.s3backupconfig
        if s3 is not None:
            command += [
                "--s3-backup=true",
                f"--s3-endpoint={s3.endpoint}",
                f"--s3-bucketName={s3.bucket_name}",
                f"--s3-region={s3.region}",
            ]
            if s3.custom_ca:
                command.append(f"--s3-endpoint-ca={base64.b64encode(s3.custom_ca.encode()).decode()}")
            if s3.folder:
                command.append(f"--s3-folder={s3.folder}")
            if s3.access_key or s3.secret_key:  # both, as RKE passes them
                for name, value in zip(S3_KEY_ENV, (s3.access_key, s3.secret_key), strict=True):
                    env.append(f"{name}={base64.b64encode(value.encode()).decode()}")
    return ContainerSpec(
        name=NAME,
        image=tools_image(config),
        command=tuple(command),
        env=tuple(env),
        binds=(f"{SNAPSHOT_DIR}/:{BACKUP}", f"{host_path(config, KUBE_DIR)}:{KUBE_DIR}"),
        files=(*cert_files(config, KUBE_NODE), ca_file(config)),
    )
