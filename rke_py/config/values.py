"""What each kind of value in cluster.yml may be, as Kubernetes, Docker and SSH accept it.

Each check returns None for a good value and otherwise says what is wrong with it in a few words; the
validators put that into a finding with the key's position. They are strict on purpose: a value that passes
goes into a flag, a file name, a config file or a certificate on a host, so a character that could end a
word, a line or a path is never allowed where it has no meaning (the one exception is free text passed as
one argv word, such as an extra_args value, which only loses control characters).
"""

from __future__ import annotations

import ipaddress
import re

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
DNS_NAME = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(\.{_LABEL})*\.?\Z", re.IGNORECASE | re.ASCII)
DNS1123_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}\Z){_LABEL}(\.{_LABEL})*\Z", re.ASCII)
# Kubernetes qualified names (labels, taints, node selectors): [prefix/]name.
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)\Z", re.ASCII)
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)\Z", re.ASCII)
# A login name as useradd and OpenSSH take it; never starts with "-", so it cannot become an ssh option.
USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}\Z", re.ASCII)
# Paths on a host: absolute, and only characters with no meaning to a shell, a flag or a bind spec.
HOST_PATH = re.compile(r"/[A-Za-z0-9._/@+-]*\Z", re.ASCII)
FLAG_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\Z", re.ASCII)
CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]{1,253}\Z", re.ASCII)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z", re.ASCII)
DIGITS = re.compile(r"[0-9]{1,18}\Z", re.ASCII)
GO_DURATION = re.compile(r"([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+\Z", re.ASCII)
# A Docker image reference (distribution/reference): [registry[:port]/]path[:tag][@digest].
_PATH_COMPONENT = r"[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*"
_REGISTRY = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:[0-9]{1,5})?"
IMAGE = re.compile(
    rf"(({_REGISTRY}|\[[0-9A-Fa-f:]+\](:[0-9]{{1,5}})?)/)?{_PATH_COMPONENT}(/{_PATH_COMPONENT})*"
    r"(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[0-9a-fA-F]{32,})?\Z",
    re.ASCII,
)
REGISTRY = re.compile(rf"{_REGISTRY}(/{_PATH_COMPONENT})*\Z", re.ASCII)
ENDPOINT = re.compile(rf"({_REGISTRY}|\[[0-9A-Fa-f:]+\](:[0-9]{{1,5}})?)\Z", re.ASCII)
# S3 bucket names as AWS defines them (3-63 lowercase letters, digits, '.', '-'), and folders in one.
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z", re.ASCII)
FOLDER = re.compile(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*\Z", re.ASCII)
REGION = re.compile(r"[a-z0-9-]{1,40}\Z", re.ASCII)
# A snapshot name becomes a file name on hosts and an S3 key: RKE's names are `<RFC3339>_etcd` or chosen.
SNAPSHOT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:+-]{0,199}\Z", re.ASCII)
NAME_RULE = "at most 63 letters, digits, '-', '_', '.'; alphanumeric at both ends"
BIND_OPTIONS = frozenset(
    {"ro", "rw", "z", "Z", "shared", "rshared", "slave", "rslave", "private", "rprivate", "nocopy"}
    | {"consistent", "cached", "delegated"}
)


def ip(text: str) -> IPAddress | None:
    """The address `text` names (ASCII, no zone), or None."""
    if not text.isascii() or "%" in text:
        return None
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def host(text: str) -> str | None:
    """An IP address or a DNS name, one that a host can have: not 0.0.0.0 or ::."""
    address = ip(text)
    if address is not None:
        return "is not a host's address (it means every address)" if address.is_unspecified else None
    if not text.isascii() or not DNS_NAME.match(text):
        return "is not an IP address or a DNS name"
    if re.fullmatch(r"[0-9.]+", text):
        return "is not a valid IPv4 address"
    return None


def normal_host(text: str) -> str:
    """One spelling per host (IPv6 compressed, names lowercase), for comparing, not for rewriting."""
    address = ip(text)
    return address.compressed if address is not None else text.lower().rstrip(".")


def san(text: str) -> str | None:
    """A certificate subject alternative name: an IP address or a DNS name, which may start with "*."."""
    if not text.startswith("*."):
        return host(text)
    return "is a wildcard before an IP address" if ip(text[2:]) else host(text[2:])


def subdomain(text: str) -> str | None:
    """A lowercase DNS-1123 subdomain, as Kubernetes wants node names and the cluster domain."""
    return None if DNS1123_SUBDOMAIN.match(text) else "is not a lowercase DNS name (a DNS-1123 subdomain)"


def nameserver(text: str) -> str | None:
    """An upstream DNS server: an IP address, optionally with a port (`10.0.0.2:53`, `[2001:db8::2]:53`)."""
    address, port = text, ""
    if text.startswith("["):
        address, _, port = text[1:].partition("]:")
    elif text.count(":") == 1:
        address, port = text.split(":")
    if ip(address) is None or (port and not (DIGITS.match(port) and 0 < int(port) < 65536)):
        return "is not an IP address with an optional port"
    return None


def user(text: str) -> str | None:
    if USER.match(text):
        return None
    if text.startswith("-"):
        return "starts with '-' (it would be read as an SSH option)"
    return "is not a login name (letters, digits, '_', '.', '-'; at most 32)"


def host_path(text: str) -> str | None:
    """An absolute path on a host, with no ".." and no character a shell or a bind spec reads."""
    if not text.startswith("/"):
        return "is not an absolute path"
    if not HOST_PATH.match(text):
        return "has characters a path on a host may not have here (use letters, digits and . _ - + @ /)"
    if ".." in text.split("/"):
        return 'contains ".."'
    return None


def image(text: str) -> str | None:
    if IMAGE.match(text) and len(text) <= 255:
        return None
    if "://" in text:
        return "starts with a URL scheme; an image is written REGISTRY/NAME:TAG"
    return "is not a Docker image reference (REGISTRY/NAME:TAG, lowercase name)"


def registry(text: str) -> str | None:
    if "://" in text:
        return "has a URL scheme; a registry is written HOST[:PORT]"
    return None if REGISTRY.match(text) else "is not a registry address (HOST[:PORT])"


def endpoint(text: str) -> str | None:
    if "://" in text:
        return "has a URL scheme; an S3 endpoint is written HOST[:PORT] and always reached over HTTPS"
    return None if ENDPOINT.match(text) else "is not HOST[:PORT]"


def bucket(text: str) -> str | None:
    if BUCKET.match(text) and ".." not in text:
        return None
    return "is not an S3 bucket name (3-63 lowercase letters, digits, '.', '-')"


def folder(text: str) -> str | None:
    if FOLDER.match(text) and ".." not in text.split("/"):
        return None
    return "is not a folder in a bucket (letters, digits, '_', '.', '-', separated by '/'; no leading '/')"


def region(text: str) -> str | None:
    return None if REGION.match(text) else "is not an S3 region"


def snapshot_name(text: str) -> str | None:
    if SNAPSHOT_NAME.match(text) and text not in (".", ".."):
        return None
    return "is not a snapshot name (letters, digits and _ . : + -, starting with a letter or digit)"


def label_key(text: str) -> str | None:
    """A Kubernetes qualified name: [DNS-subdomain prefix/]name, the name 1-63 characters."""
    prefix, _, name = text.rpartition("/")
    if prefix and not DNS1123_SUBDOMAIN.match(prefix):
        return "has a prefix that is not a lowercase DNS subdomain"
    if not _QUALIFIED_NAME.match(name):
        return f"is not a Kubernetes label key ({NAME_RULE})"
    return None


def label_value(text: str) -> str | None:
    if _LABEL_VALUE.match(text):
        return None
    return f"is not a Kubernetes label value ({NAME_RULE})"


def flag_name(text: str) -> str | None:
    if text.startswith("-"):
        return None  # reported by its own check, with a better hint
    return None if FLAG_NAME.match(text) else "is not a flag name (letters, digits, '-', '_', '.')"


def config_key(text: str) -> str | None:
    """A ConfigMap data key, as the apiserver takes it."""
    return None if CONFIG_KEY.match(text) else "is not a ConfigMap key (letters, digits, '-', '_', '.')"


def env_name(text: str) -> str | None:
    return None if ENV_NAME.match(text) else "is not an environment variable name"


def text(value: str) -> str | None:
    """Free text passed as one word: anything but control characters (a newline would end a line)."""
    if all(char.isprintable() or char == " " for char in value):
        return None
    return "contains a control character"


def listen_address(text: str) -> str | None:
    """An IP address a server binds to; 0.0.0.0 and :: (every address) included."""
    return None if ip(text) is not None else "is not an IP address to listen on, e.g. 0.0.0.0 or 10.0.0.11"


def port(text: str) -> str | None:
    """A TCP port, 1 to 65535."""
    return None if DIGITS.match(text) and 1 <= int(text) <= 65535 else "is not a port number from 1 to 65535"


def duration(value: str) -> str | None:
    """A Go duration as RKE's backup settings take it (`6h`, `30m`, `1h30m`)."""
    return None if GO_DURATION.match(value) else 'is not a duration such as "6h" or "30m"'


def bind(spec: str) -> str | None:
    """`HOST_PATH:CONTAINER_PATH[:OPTIONS]` with absolute paths and Docker's mount options."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        return "is not HOST_PATH:CONTAINER_PATH[:OPTIONS]"
    for what, path in zip(("host path", "container path"), parts[:2], strict=False):
        problem = host_path(path)
        if problem:
            return f"has a {what} that {problem}"
    options = parts[2].split(",") if len(parts) == 3 else []
    unknown = [option for option in options if option not in BIND_OPTIONS]
    if unknown:
        return f'has the unknown mount option "{unknown[0]}" (use ro, rw, z, Z, shared, rshared, slave, ...)'
    return None
