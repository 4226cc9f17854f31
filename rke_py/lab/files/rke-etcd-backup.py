"""The lab's stand-in for rke-tools' `rke-etcd-backup etcd-backup save`: the command line RKE gives it,
snapshots every --creation with etcdctl, RKE's archive (snapshot + the state from the cluster's
full-cluster-state secret), pruning by --retention here and in S3, and uploads with curl's SigV4 (keys from
S3_ACCESS_KEY / S3_SECRET_KEY, base64, handed to curl on stdin, never as arguments).

Lab only: RKE_PY_LAB_SECONDS_PER_HOUR (from services.etcd.extra_env) shrinks an hour, so a test sees
recurring snapshots and pruning in seconds. The real rke-tools ignores it.
"""

import argparse
import base64
import datetime as dt
import json
import os
import re
import ssl
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
import zipfile

BACKUP = "/backup"
KUBECONFIG = "/etc/kubernetes/ssl/kubecfg-kube-node.yaml"
STATE = "/api/v1/namespaces/kube-system/secrets/full-cluster-state"
UNITS = {"h": 3600, "m": 60, "s": 1}


def log(message):
    print(f"{dt.datetime.now(dt.UTC).isoformat()} {message}", flush=True)


def seconds(duration):
    scale = float(os.environ.get("RKE_PY_LAB_SECONDS_PER_HOUR", "3600")) / 3600
    total = sum(float(n) * UNITS[u] for n, u in re.findall(r"([0-9.]+)([hms])", duration))
    return total * scale


def parse(argv):
    p = argparse.ArgumentParser(prog="rke-etcd-backup")
    p.add_argument("group", choices=["etcd-backup"])
    p.add_argument("action", choices=["save"])
    for flag in ("cacert", "cert", "key", "name", "endpoints", "creation", "retention"):
        p.add_argument(f"--{flag}", default="")
    for flag in ("s3-endpoint", "s3-bucketName", "s3-region", "s3-endpoint-ca", "s3-folder"):
        p.add_argument(f"--{flag}", default="")
    p.add_argument("--s3-backup", default="false")
    p.add_argument("--once", action="store_true")
    return p.parse_args(argv)


def state():
    """The cluster's state, with the kube-node identity of the kubeconfig RKE names."""
    with open(KUBECONFIG) as kubeconfig:
        text = kubeconfig.read()
    server = re.search(r"server:\s*\"?([^\"\s]+)", text).group(1)
    context = ssl.create_default_context(cafile="/etc/kubernetes/ssl/kube-ca.pem")
    context.load_cert_chain("/etc/kubernetes/ssl/kube-node.pem", "/etc/kubernetes/ssl/kube-node-key.pem")
    with urllib.request.urlopen(server + STATE, context=context, timeout=10) as answer:
        secret = json.load(answer)
    return base64.b64decode(secret["data"]["full-cluster-state"]).decode()


def snapshot(args, name):
    path = f"{BACKUP}/{name}"
    tls = [f"--cacert={args.cacert}", f"--cert={args.cert}", f"--key={args.key}"]
    subprocess.run(
        ["etcdctl", f"--endpoints={args.endpoints}", *tls, "snapshot", "save", path],
        check=True,
        capture_output=True,
    )
    try:
        cluster_state = state()
    except Exception as exc:  # a snapshot without the state is still worth more than none (as rke-tools)
        log(f"state not read: {exc}")
        cluster_state = None
    with zipfile.ZipFile(f"{path}.zip", "w", zipfile.ZIP_DEFLATED) as archive, open(path, "rb") as db:
        entries = [(path, db.read())]  # the entry names rke-tools writes, leading slash included
        if cluster_state is not None:
            entries.append((f"/etc/kubernetes/{name}.rkestate", cluster_state.encode()))
        for entry, data in entries:
            archive.writestr(zipfile.ZipInfo(entry, time.gmtime()[:6]), data, zipfile.ZIP_DEFLATED)
    os.remove(path)
    os.chmod(f"{path}.zip", 0o600)
    log(f"created {name}.zip")
    return f"{path}.zip"


class S3:
    def __init__(self, args):
        self.base = f"https://{args.s3_endpoint}/{args.s3_bucketName}"
        self.folder = args.s3_folder.strip("/")
        self.region = args.s3_region or "us-east-1"
        self.ca = None
        if args.s3_endpoint_ca:
            self.ca = "/tmp/s3-ca.pem"
            with open(self.ca, "wb") as out:
                out.write(base64.b64decode(args.s3_endpoint_ca))
        keys = [base64.b64decode(os.environ.get(k, "")).decode() for k in ("S3_ACCESS_KEY", "S3_SECRET_KEY")]
        self.user = ":".join(keys)

    def curl(self, *args):
        command = ["curl", "-sS", "--fail", "--aws-sigv4", f"aws:amz:{self.region}:s3", "-K", "-", *args]
        if self.ca:
            command[1:1] = ["--cacert", self.ca]
        done = subprocess.run(command, input=f'user = "{self.user}"\n', capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(done.stderr.strip())
        return done.stdout

    def key(self, filename):
        return f"{self.folder}/{filename}" if self.folder else filename

    def upload(self, path):
        self.curl("-T", path, f"{self.base}/{self.key(os.path.basename(path))}")
        log(f"uploaded {self.key(os.path.basename(path))}")

    def prune(self, cutoff):
        prefix = f"{self.folder}/" if self.folder else ""
        listing = ET.fromstring(self.curl(f"{self.base}?list-type=2&prefix={prefix}"))
        for key in listing.iter("{http://s3.amazonaws.com/doc/2006-03-01/}Key"):
            taken = when(key.text[len(prefix) :])
            if taken is not None and taken < cutoff:
                self.curl("-X", "DELETE", f"{self.base}/{key.text}")
                log(f"deleted {key.text} from S3")


def when(filename):
    """The time in a recurring snapshot's name (`<RFC3339>_etcd.zip`), None for other names."""
    match = re.fullmatch(r"(.+)_etcd(\.zip)?", filename)
    if not match:
        return None
    try:
        return dt.datetime.fromisoformat(match.group(1).replace("Z", "+00:00"))
    except ValueError:
        return None


def prune_local(cutoff):
    for filename in os.listdir(BACKUP):
        taken = when(filename)
        if taken is not None and taken < cutoff:
            os.remove(f"{BACKUP}/{filename}")
            log(f"deleted {filename}")


def main(argv):
    args = parse(argv)
    s3 = S3(args) if args.s3_backup == "true" else None
    creation, retention = seconds(args.creation), seconds(args.retention)
    log(f"Initializing Rolling Backups creation={creation}s retention={retention}s")
    while True:
        time.sleep(creation)
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        name = now.isoformat().replace("+00:00", "Z") + "_etcd"
        cutoff = now - dt.timedelta(seconds=retention)
        try:
            path = snapshot(args, name)
            prune_local(cutoff)
            if s3 is not None:
                s3.upload(path)
                s3.prune(cutoff)
        except Exception as exc:
            log(f"backup failed: {exc}")


if __name__ == "__main__":
    main(sys.argv[1:])
