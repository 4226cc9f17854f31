"""An S3 API for a lab: moto's server (PyPI, the `lab` extra) in a container on the lab's network, over
HTTPS with a certificate from a CA of the lab's own, and one bucket. It goes with the lab (`lab down`).

moto keeps objects in memory and checks no signature: it speaks S3 as AWS does (paths, listings, errors)
for rke-py and for the recurring snapshot container, but a wrong key is not refused.
"""

from __future__ import annotations

import io
import ipaddress
import secrets
import ssl
import tarfile
import time
import urllib.request

import boto3
import docker

from rke_py.lab.images import LabImage
from rke_py.lab.state import LABEL, LABEL_ROLE, Lab, LabError
from rke_py.pki.certs import make_ca, make_signed

PORT = 9000
BUCKET = "rke-py-lab-snapshots"
CA_FILE = "s3-ca.pem"


def configure(lab: Lab, address: str) -> None:
    """Decide the server's address, keys and certificate once, when the lab is made."""
    ca = make_ca("lab-s3-ca", "rke-py lab S3 CA")
    server = make_signed("lab-s3", ca, "rke-py lab S3", server=True, ips=[ipaddress.ip_address(address)])
    lab.s3_endpoint = f"{address}:{PORT}"
    lab.s3_bucket = BUCKET
    lab.s3_access_key = "lab" + secrets.token_hex(6)
    lab.s3_secret_key = secrets.token_urlsafe(24)
    lab.s3_ca = ca.cert_pem
    lab.s3_server = (server.cert_pem, server.key_pem)


def ensure(client: docker.DockerClient, image: LabImage, lab: Lab, progress=lambda _: None) -> None:
    """The lab's S3 server, running and holding its bucket."""
    name = f"{lab.name}-s3"
    try:
        container = client.containers.get(name)
    except docker.errors.NotFound:
        progress("starting the lab's S3 server")
        api = client.api
        created = api.create_container(
            image.ref,
            name=name,
            labels={LABEL: lab.name, LABEL_ROLE: "s3"},
            host_config=api.create_host_config(
                network_mode=lab.network, restart_policy={"Name": "unless-stopped"}
            ),
            networking_config=api.create_networking_config(
                {lab.network: api.create_endpoint_config(ipv4_address=lab.s3_endpoint.split(":")[0])}
            ),
        )
        container = client.containers.get(created["Id"])
        container.put_archive("/etc/lab-s3", _files(*lab.s3_server))
    container.reload()
    if container.status != "running":
        container.start()
    _wait_ready(lab)
    s3 = client_for(lab)
    if BUCKET not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=BUCKET)


def client_for(lab: Lab):
    """boto3 for the lab's server, trusting the lab's CA (tests read the bucket with it)."""
    ca = lab.dir / CA_FILE
    ca.write_text(lab.s3_ca)
    return boto3.client(
        "s3",
        endpoint_url=f"https://{lab.s3_endpoint}",
        region_name="us-east-1",
        aws_access_key_id=lab.s3_access_key,
        aws_secret_access_key=lab.s3_secret_key,
        verify=str(ca),
    )


def _wait_ready(lab: Lab, timeout: float = 60) -> None:
    context = ssl.create_default_context(cadata=lab.s3_ca)
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(f"https://{lab.s3_endpoint}/", context=context, timeout=2).close()
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise LabError(f"the lab's S3 server at {lab.s3_endpoint} did not answer: {exc}") from exc
            time.sleep(0.5)


def _files(cert: str, key: str) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, data in (("cert.pem", cert.encode()), ("key.pem", key.encode())):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()
