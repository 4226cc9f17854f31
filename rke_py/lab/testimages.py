"""The conformance suite's images, served by the lab registry (`lab up --e2e DIR`).

The suite names its images through a registry map (`KUBE_TEST_REPO_LIST`, test/utils/image/manifest.go);
the lab's map sends every registry to a path of the lab registry, so no pull leaves the lab. The images
are stand-ins built here: agnhost (and sample-apiserver when DIR has it) from the suite's own source,
the rest from this machine's Debian packages, each doing what the suite asks of the upstream image.
`e2e.test --list-images` says which name and tag each one is published under.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import os
import re
import subprocess
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from cryptography.x509.oid import NameOID

from rke_py.lab import images
from rke_py.lab.images import PATH, Recipe, etc
from rke_py.lab.rootfs import Rootfs
from rke_py.lab.state import LabError

SUITE = ("e2e.test", "ginkgo", "agnhost")  # what DIR must hold; sample-apiserver and nnp are optional

# The suite's registries (RegistryList in test/utils/image/manifest.go) -> paths in the lab registry.
# Names the lab cannot serve (invalid, authenticated, Windows) land on paths that hold nothing.
REGISTRIES = {
    "promoterE2eRegistry": "e2e-test-images",
    "gcRegistry": "k8s",
    "gcEtcdRegistry": "k8s",
    "buildImageRegistry": "build-image",
    "sigStorageRegistry": "sig-storage",
    "dockerLibraryRegistry": "library",
    "cloudProviderGcpRegistry": "cloud-provider-gcp",
    "gcAuthenticatedRegistry": "authenticated",
    "privateRegistry": "private",
    "invalidRegistry": "invalid",
    "microsoftRegistry": "microsoft",
}

BASH = "/usr/bin/bash"
DNS_TOOLS = ("/usr/bin/dig", "/usr/bin/nslookup", "/usr/bin/host", "/usr/bin/getent")  # bind9-dnsutils
HTTPD_ROOT = "/usr/local/apache2/htdocs"


def repo_list(registry: str) -> str:
    """The suite's registry map for a lab whose hosts reach its registry at `registry`."""
    return "".join(f"{key}: {registry}/{path}\n" for key, path in REGISTRIES.items())


def missing(directory: Path) -> list[str]:
    return [name for name in SUITE if not (directory / name).is_file()]


def listed(directory: Path, repo_list_file: Path) -> list[str]:
    """Every image the suite may ask for, as it names them under `repo_list_file`."""
    env = dict(os.environ, KUBE_TEST_REPO_LIST=str(repo_list_file))
    done = subprocess.run(
        [str(directory / "e2e.test"), "--list-images"], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise LabError(f"{directory / 'e2e.test'} --list-images failed: {done.stderr.strip()[-300:]}")
    return done.stdout.split()


def _shell(r: Rootfs, ash: bool = False) -> None:
    """busybox's applets and bash as `sh`. Debian's busybox 1.35 ash drops environment variables whose
    names hold '-' (upstream's 1.29 keeps them; the ConfigMap and Secret prefix specs look for them) and
    runs its own nc applet before PATH (netcat-openbsd answers the HostPort spec's UDP check). With
    `ash`, /bin/sh stays busybox's ash, whose error messages a spec that runs /bin/sh by its path reads,
    and only `sh` found on PATH is bash."""
    r.busybox()
    r.binary(BASH)
    r.symlink("/usr/local/bin/sh" if ash else "/usr/bin/sh", BASH)


def _localhost_tls() -> tuple[bytes, bytes]:
    """The certificate and key agnhost's porter serves TLS with (its image has one for 127.0.0.1 and ::1).
    Made from a fixed Ed25519 key with fixed dates, so the bytes, and the image's cache hash, never
    change between builds; it protects nothing."""
    key = ed25519.Ed25519PrivateKey.from_private_bytes(hashlib.sha256(b"rke-py lab agnhost").digest())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    sans = [
        x509.DNSName("localhost"),
        *(x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "::1")),
    ]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC))
        .not_valid_after(datetime.datetime(2084, 1, 29, tzinfo=datetime.UTC))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, None)
    )
    key_pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return cert.public_bytes(Encoding.PEM), key_pem


def _agnhost(directory: Path) -> tuple[Rootfs, list[str]]:
    """agnhost with the tools its upstream image installs (dig, curl, nc, ip) and the user and group
    the security-context specs expect to find in the image."""
    r = Rootfs()
    _shell(r)
    for tool in (*DNS_TOOLS, "/usr/bin/curl", "/usr/bin/nc.openbsd", "/usr/sbin/ip"):
        r.binary(tool)
    r.symlink("/usr/bin/nc", "nc.openbsd")
    etc(
        r,
        ["user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh"],
        ["user-defined-in-image:x:1000:", "group-defined-in-image:x:50000:user-defined-in-image"],
    )
    r.dir("/uploads")
    cert, key = _localhost_tls()
    r.file("/localhost.crt", data=cert)
    r.file("/localhost.key", data=key)
    r.file("/agnhost", source=str(directory / "agnhost"), mode=0o755)
    r.symlink("/agnhost-2", "agnhost")
    return r, [f"ENV PATH={PATH}", 'ENTRYPOINT ["/agnhost"]', 'CMD ["pause"]']


def _update_demo(picture: str) -> Recipe:
    """nautilus and kitten: agnhost's test-webserver serving a data.json that names the image's
    picture, which kubectl's Update Demo spec reads through the pod proxy."""

    def recipe(directory: Path) -> tuple[Rootfs, list[str]]:
        r, _changes = _agnhost(directory)
        r.file("/data.json", data=json.dumps({"image": f"{picture}.jpg"}) + "\n")
        r.file(f"/{picture}.jpg", data=f"a picture of a {picture}\n")
        return r, [f"ENV PATH={PATH}", 'ENTRYPOINT ["/agnhost"]', 'CMD ["test-webserver"]']

    return recipe


def _busybox(_: Path) -> tuple[Rootfs, list[str]]:
    r = Rootfs()
    _shell(r, ash=True)
    etc(r, [], [])
    return r, [f"ENV PATH={PATH}", 'CMD ["sh"]']


def _jessie_dnsutils(_: Path) -> tuple[Rootfs, list[str]]:
    """What the DNS specs' probes run: sh, dig, getent, seq, sleep."""
    r, changes = _busybox(_)
    for tool in DNS_TOOLS:
        r.binary(tool)
    return r, changes


def _httpd(_: Path) -> tuple[Rootfs, list[str]]:
    """An HTTP server on port 80 answering "It works!" as Apache's image does (busybox httpd)."""
    r, _changes = _busybox(_)
    r.file(f"{HTTPD_ROOT}/index.html", data="<html><body><h1>It works!</h1></body></html>\n")
    r.file(
        "/usr/local/bin/httpd-foreground",
        data=f"#!/bin/sh\nexec httpd -f -v -p 80 -h {HTTPD_ROOT}\n",
        mode=0o755,
    )
    return r, [f"ENV PATH={PATH}", "EXPOSE 80", 'CMD ["httpd-foreground"]']


def _nginx(_: Path) -> tuple[Rootfs, list[str]]:
    """Debian's nginx serving a page on port 80, logging to the container's output."""
    r = Rootfs()
    r.busybox()
    etc(r, ["nginx:x:101:101:nginx:/nonexistent:/sbin/nologin"], ["nginx:x:101:"])
    r.binary("/usr/sbin/nginx")
    r.file("/etc/nginx/mime.types", source="/etc/nginx/mime.types")
    r.file("/etc/nginx/nginx.conf", data=images.lab_file("test-nginx.conf"))
    r.file("/usr/share/nginx/html/index.html", data="<html><body><h1>Welcome to nginx!</h1></body></html>\n")
    for d in ("/var/lib/nginx", "/var/log/nginx", "/var/cache/nginx"):
        r.dir(d)
    return r, [f"ENV PATH={PATH}", "EXPOSE 80", 'CMD ["nginx", "-g", "daemon off;"]']


def _pause(_: Path) -> tuple[Rootfs, list[str]]:
    return images.pause_rootfs()


def _sample_apiserver(directory: Path) -> tuple[Rootfs, list[str]]:
    """The aggregation spec's API server. Built from the suite's tree it is a v1.28 one; with API
    Priority and Fairness off it asks for no more than the 1.17 image the spec was written for."""
    r = Rootfs()
    r.busybox()
    etc(r, [], [])
    r.file("/usr/local/bin/sample-apiserver", source=str(directory / "sample-apiserver"), mode=0o755)
    entry = (
        '#!/bin/sh\nexec /usr/local/bin/sample-apiserver --feature-gates=APIPriorityAndFairness=false "$@"\n'
    )
    r.file("/sample-apiserver", data=entry, mode=0o755)
    return r, [f"ENV PATH={PATH}", 'ENTRYPOINT ["/sample-apiserver"]']


def _nonewprivs(directory: Path) -> tuple[Rootfs, list[str]]:
    """nnp (the suite's test/images/nonewprivs) set-user-ID root: it prints the effective user, which shows
    whether a container may gain privileges."""
    r, _changes = _busybox(directory)
    r.file("/usr/local/bin/nnp", source=str(directory / "nnp"), mode=0o4755)
    return r, [f"ENV PATH={PATH}", 'CMD ["nnp"]']


def _etcd(_: Path) -> tuple[Rootfs, list[str]]:
    return images.etcd_rootfs()


# The image's name (its path after the registry, without the tag) -> recipe, and a file DIR must hold.
RECIPES: dict[str, tuple[Recipe, str]] = {
    "e2e-test-images/agnhost": (_agnhost, "agnhost"),
    "e2e-test-images/busybox": (_busybox, ""),
    "e2e-test-images/nautilus": (_update_demo("nautilus"), "agnhost"),
    "e2e-test-images/kitten": (_update_demo("kitten"), "agnhost"),
    "e2e-test-images/jessie-dnsutils": (_jessie_dnsutils, ""),
    "e2e-test-images/httpd": (_httpd, ""),
    "e2e-test-images/nginx": (_nginx, ""),
    "e2e-test-images/sample-apiserver": (_sample_apiserver, "sample-apiserver"),
    "e2e-test-images/nonewprivs": (_nonewprivs, "nnp"),
    "k8s/pause": (_pause, ""),
    "k8s/etcd": (_etcd, ""),
}


def served(directory: Path, names: list[str], registry: str) -> dict[str, str]:
    """Of the suite's image `names`, those the lab builds: published name (no registry) -> recipe key."""
    out = {}
    for name in names:
        match = re.fullmatch(re.escape(registry) + r"/(.+):([^:/]+)", name)
        if not match or match.group(1) not in RECIPES:
            continue
        needs = RECIPES[match.group(1)][1]
        if not needs or (directory / needs).is_file():
            out[f"{match.group(1)}:{match.group(2)}"] = match.group(1)
    return out
