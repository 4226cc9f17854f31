"""Snapshots in an S3-compatible bucket, as RKE keeps them: `[<folder>/]<name>.zip`, over HTTPS.

rke-py talks to S3 itself (boto3) for `snapshot-save`, `-list` and `-restore`; the secret key stays in
this process (never in an argument, a log line or JSON output). The recurring snapshots on etcd hosts
upload with rke-tools, which gets the keys in its environment, as RKE passes them.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import boto3
import botocore.config
import botocore.exceptions

from rke_py.config.schema import S3BackupConfig
from rke_py.errors import ExitStatus, RkePyError
from rke_py.snapshots.archive import SUFFIX, SnapshotError

DEFAULT_ENDPOINT = "s3.amazonaws.com"  # RKE's, when none is given
DEFAULT_REGION = "us-east-1"
RETRIES = 3


class S3Error(RkePyError):
    """The S3 endpoint could not be reached or refused a request."""

    exit_status = ExitStatus.CONNECT


@dataclass(frozen=True)
class S3Target:
    endpoint: str
    bucket: str
    region: str = ""
    folder: str = ""
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    custom_ca: str = field(default="", repr=False)

    @classmethod
    def from_config(cls, s3: S3BackupConfig) -> S3Target:
        return cls(
            s3.endpoint or DEFAULT_ENDPOINT,
            s3.bucket_name,
            s3.region,
            s3.folder.strip("/"),
            s3.access_key,
            s3.secret_key,
            s3.custom_ca,
        )

    def key(self, name: str) -> str:
        return f"{self.folder}/{name}{SUFFIX}" if self.folder else f"{name}{SUFFIX}"

    @property
    def where(self) -> str:
        return f"s3://{self.bucket}/{self.key('')[: -len(SUFFIX)]}"


@dataclass(frozen=True)
class Stored:
    """One snapshot in the bucket."""

    name: str
    size: int
    modified: datetime


@contextlib.contextmanager
def _client(target: S3Target) -> Iterator[Any]:
    """A boto3 client for the target; a custom CA is written to a private temporary file for its life."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as ca:
        verify: str | bool = True
        if target.custom_ca:
            ca.write(target.custom_ca)
            ca.flush()
            verify = ca.name
        style = "virtual" if target.endpoint.endswith("amazonaws.com") else "path"
        yield boto3.client(
            "s3",
            endpoint_url=f"https://{target.endpoint}",
            region_name=target.region or DEFAULT_REGION,
            aws_access_key_id=target.access_key or None,
            aws_secret_access_key=target.secret_key or None,
            verify=verify,
            config=botocore.config.Config(
                s3={"addressing_style": style},
                retries={"max_attempts": RETRIES, "mode": "standard"},
                connect_timeout=10,
                read_timeout=60,
            ),
        )


@contextlib.contextmanager
def _errors(target: S3Target, what: str) -> Iterator[None]:
    try:
        yield
    except botocore.exceptions.ClientError as exc:
        error = exc.response.get("Error", {})
        if error.get("Code") in ("NoSuchKey", "404"):
            raise SnapshotError(f"{target.where}: {what}: no such snapshot") from exc
        raise S3Error(f"{target.where}: {what}: {error.get('Code')}: {error.get('Message', '')}") from exc
    except (botocore.exceptions.BotoCoreError, OSError) as exc:
        raise S3Error(f"{target.where}: {what}: {exc}") from exc


def upload(target: S3Target, name: str, data: bytes) -> None:
    with _errors(target, f"upload {name}"), _client(target) as s3:
        s3.put_object(Bucket=target.bucket, Key=target.key(name), Body=data, ContentType="application/zip")


def download(target: S3Target, name: str) -> bytes:
    with _errors(target, f"download {name}"), _client(target) as s3:
        return bytes(s3.get_object(Bucket=target.bucket, Key=target.key(name))["Body"].read())


def listing(target: S3Target) -> list[Stored]:
    """Every `<name>.zip` directly in the folder, oldest first."""
    prefix = f"{target.folder}/" if target.folder else ""
    found: list[Stored] = []
    with _errors(target, "list snapshots"), _client(target) as s3:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=target.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                rest = item["Key"][len(prefix) :]
                if "/" not in rest and rest.endswith(SUFFIX):
                    found.append(Stored(rest[: -len(SUFFIX)], int(item["Size"]), item["LastModified"]))
    return sorted(found, key=lambda s: s.modified)
