"""`rke-py etcd snapshot-save | snapshot-list | snapshot-restore`, with RKE's options."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import click
from rich.table import Table

from rke_py.cli.options import cert_dir_for, cert_dir_option, host_command_options
from rke_py.cli.output import console, emit_json, phase_progress, print_warnings
from rke_py.cli.render import changes_doc, print_actions, print_report
from rke_py.cli.run import HostCommand
from rke_py.config import values
from rke_py.config.schema import S3BackupConfig
from rke_py.deploy import snapshot
from rke_py.deploy.desired import Desired
from rke_py.deploy.up import skipped_targets
from rke_py.errors import UsageError
from rke_py.snapshots.archive import check_name
from rke_py.snapshots.onhost import snapshot_dir
from rke_py.snapshots.s3 import S3Target
from rke_py.state import state_path_for
from rke_py.verify.checks import require_ok

# RKE's flags; the keys also from the environment, so they need not appear in any process's arguments.
S3_FLAGS = (
    click.option(
        "--s3",
        "use_s3",
        is_flag=True,
        help="Use S3 (settings from backup_config.s3backupconfig, each replaced by its flag below).",
    ),
    click.option(
        "--access-key",
        envvar="RKE_PY_S3_ACCESS_KEY",
        default=None,
        help="S3 access key [env RKE_PY_S3_ACCESS_KEY].",
    ),
    click.option(
        "--secret-key",
        envvar="RKE_PY_S3_SECRET_KEY",
        default=None,
        show_envvar=False,
        help="S3 secret key; prefer the environment variable RKE_PY_S3_SECRET_KEY, which no "
        "process listing shows.",
    ),
    click.option("--bucket-name", default=None, help="S3 bucket."),
    click.option("--region", default=None, help="S3 region."),
    click.option(
        "--endpoint",
        "--s3-endpoint",
        "endpoint",
        default=None,
        help="S3 endpoint, HOST[:PORT], reached over HTTPS [default: s3.amazonaws.com].",
    ),
    click.option("--folder", default=None, help="Folder in the bucket."),
    click.option(
        "--s3-endpoint-ca",
        type=click.Path(dir_okay=False, exists=True),
        default=None,
        help="File with the PEM CA certificate of the endpoint.",
    ),
)


def s3_options(fn):
    for option in reversed(S3_FLAGS):
        fn = option(fn)
    return fn


# flag -> (field of s3backupconfig, the check of its value)
S3_CHECKS = {
    "endpoint": ("endpoint", values.endpoint),
    "bucket-name": ("bucket_name", values.bucket),
    "region": ("region", values.region),
    "folder": ("folder", values.folder),
}


def s3_target(desired: Desired, use_s3: bool, **flags: str | None) -> S3Target | None:
    """cluster.yml's s3backupconfig with each flag given replacing its value, or None without --s3."""
    ca_file = flags.pop("s3_endpoint_ca")
    if not use_s3:
        given = [k for k, v in flags.items() if v and k not in ("access_key", "secret_key")]  # env may set
        if ca_file or given:
            raise UsageError("S3 options need --s3")
        return None
    backup = desired.config.services.etcd.backup_config
    merged = dataclasses.replace(
        (backup.s3backupconfig if backup else None) or S3BackupConfig(),
        **{key: value for key, value in flags.items() if value is not None},
    )
    if ca_file:
        merged = dataclasses.replace(merged, custom_ca=Path(ca_file).read_text())
    if not merged.bucket_name:
        raise UsageError("--s3 needs a bucket: --bucket-name, or backup_config.s3backupconfig.bucket_name")
    for flag, (key, check) in S3_CHECKS.items():
        value = getattr(merged, key)
        if value and (problem := check(value)):
            raise UsageError(f'--{flag} "{value}" {problem}')
    return S3Target.from_config(merged)


@click.group("etcd")
def command() -> None:
    """etcd snapshots: save, list, restore (RKE's `rke etcd`)."""


@command.command("snapshot-save")
@host_command_options
@click.option("--name", default=None, help="Snapshot name [default: rke_etcd_snapshot_<time>].")
@s3_options
def save_command(host: HostCommand, name: str | None, use_s3: bool, **s3_flags: str | None) -> None:
    """Save a snapshot of etcd, with the cluster state, on every etcd host (and in S3 with --s3)."""
    with host.run("etcd snapshot-save"):
        started = time.monotonic()
        desired = host.prepare()
        name = check_name(name) if name else snapshot.default_snapshot_name(desired.config)
        print_warnings(desired.warnings)
        target = s3_target(desired, use_s3, **s3_flags)
        with phase_progress() as on_phase:
            saved = snapshot.save(desired, host.options(), name, target, on_phase)
        seconds = round(time.monotonic() - started, 1)
        if host.json:
            emit_json(
                {
                    "ok": True,
                    "name": saved.name,
                    "size": saved.size,
                    "source": saved.source,
                    "hosts": saved.hosts,
                    "s3": saved.s3 or None,
                    "seconds": seconds,
                }
            )
            return
        out = console(summary=True)
        out.print(f"snapshot {saved.name} ({saved.size} bytes) taken from {saved.source}")
        out.print(f"kept on {', '.join(saved.hosts)} in {snapshot_dir(desired.config)}")
        if saved.s3:
            out.print(f"uploaded to {saved.s3}")
        out.print(f"took {seconds}s")


@command.command("snapshot-list")
@host_command_options
@s3_options
def list_command(host: HostCommand, use_s3: bool, **s3_flags: str | None) -> None:
    """List the snapshots on every etcd host (and in S3 with --s3)."""
    with host.run("etcd snapshot-list"):
        desired = host.prepare()
        target = s3_target(desired, use_s3, **s3_flags)
        rows, errors = snapshot.listing(desired, host.options(), target)
        if host.json:
            emit_json(
                {
                    "ok": not errors,
                    "snapshots": [
                        {"name": r.name, "where": r.where, "size": r.size, "modified": r.modified.isoformat()}
                        for r in rows
                    ],
                    "errors": [{"host": e.host, "error": e.detail} for e in errors],
                }
            )
        else:
            table = Table("NAME", "WHERE", "SIZE", "MODIFIED (UTC)", box=None)
            for r in rows:
                table.add_row(r.name, r.where, str(r.size), r.modified.strftime("%Y-%m-%d %H:%M:%S"))
            out = console()
            out.print(table if rows else "no snapshots")
            for e in errors:
                out.print(f"{e.host}: not listed: {e.detail}")
        if errors:
            raise errors[0]


@command.command("snapshot-restore")
@host_command_options
@click.option("--name", required=True, help="The snapshot to restore (without .zip).")
@click.option("--force", is_flag=True, help="Do not ask for confirmation.")
@s3_options
@click.option(
    "--use-local-state",
    is_flag=True,
    help="Restore with the local state file's certificates and configuration, not the snapshot's.",
)
@click.option(
    "--custom-certs",
    is_flag=True,
    help="Bring the cluster back up with your own certificates from --cert-dir.",
)
@cert_dir_option
def restore_command(
    host: HostCommand,
    name: str,
    force: bool,
    use_s3: bool,
    use_local_state: bool,
    custom_certs: bool,
    cert_dir: str | None,
    **s3_flags: str | None,
) -> None:
    """Restore every etcd member from a snapshot, with the cluster state it holds, then run up."""
    with host.run("etcd snapshot-restore"):
        started = time.monotonic()
        name = check_name(name)
        desired = host.prepare()
        target = s3_target(desired, use_s3, **s3_flags)

        def confirm(question: str) -> bool:
            if force:
                return True
            if not sys.stdin.isatty():
                raise UsageError(
                    "snapshot-restore needs confirmation and stdin is not a terminal: pass --force"
                )
            return click.confirm(question)

        with phase_progress() as on_phase:
            restored = snapshot.restore(
                Path(host.config_path),
                host.options(),
                name,
                target,
                confirm,
                host.strict,
                on_phase,
                use_local_state=use_local_state,
                custom_certs=cert_dir_for(host.config_path, cert_dir) if custom_certs else None,
            )
        seconds = round(time.monotonic() - started, 1)
        result = restored.up
        assert result is not None
        if host.json:
            emit_json(
                {
                    "ok": result.report.ok if result.report else True,
                    "name": name,
                    "source": restored.source,
                    "replaced": restored.replaced,
                    "seconds": seconds,
                    **changes_doc(desired.config, result),
                    "verify": result.report.to_dict() if result.report else None,
                    "state": str(state_path_for(host.config_path)),
                }
            )
        else:
            out = console(summary=True)
            out.print(
                f"restored {name} from {restored.source} into {', '.join(restored.replaced)}; "
                f"state {restored.state_from}"
            )
            print_actions(out, result, title="Changes made by up")
            if result.report:
                print_report(out, result.report)
            out.print(f"took {seconds}s")
        require_ok(result.report, skipped_targets(result.skipped))
