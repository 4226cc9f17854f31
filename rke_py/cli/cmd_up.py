"""`rke-py up`: bring the cluster to what cluster.yml says, then prove it works."""

from __future__ import annotations

import time

import click

from rke_py.cli.options import cert_dir_for, cert_dir_option, host_command_options, refuse_local_modes
from rke_py.cli.output import console, emit_json, phase_progress, print_warnings
from rke_py.cli.render import changes_doc, print_actions, print_report
from rke_py.cli.run import HostCommand
from rke_py.deploy.desired import Desired
from rke_py.deploy.saving import save_state
from rke_py.deploy.session import Options
from rke_py.deploy.up import skipped_targets, up
from rke_py.errors import SkippedHostsError
from rke_py.state import kubeconfig_path_for, state_path_for
from rke_py.verify.checks import require_ok


@click.command("up")
@host_command_options
@click.option("--no-verify", is_flag=True, help="Skip the checks at the end (status can run them later).")
@click.option(
    "--custom-certs",
    is_flag=True,
    help="Use your own certificates from --cert-dir (RKE's layout), each checked before any host is touched.",
)
@cert_dir_option
@click.option(
    "--update-only",
    is_flag=True,
    help="On a running cluster, leave the hosts it has as they are and deploy only new worker hosts (RKE's "
    "flag); hosts that left are still cleaned, and cluster objects and add-ons still applied.",
)
@click.option("--disable-port-check", is_flag=True, help="Skip the check that the hosts' ports are free.")
@click.option(
    "--init",
    is_flag=True,
    help="Only write the state file (certificates and the configuration); touch no host (RKE's flag).",
)
@refuse_local_modes
@click.option("--dind-storage-driver", hidden=True, help="RKE's, with --dind.")
@click.option("--dind-dns-server", hidden=True, help="RKE's, with --dind.")
def command(
    host: HostCommand,
    no_verify: bool,
    custom_certs: bool,
    cert_dir: str | None,
    update_only: bool,
    disable_port_check: bool,
    init: bool,
    dind_storage_driver: str | None,
    dind_dns_server: str | None,
) -> None:
    """Create or update the cluster described by cluster.yml."""
    with host.run("up"):
        given = cert_dir_for(host.config_path, cert_dir) if custom_certs else None
        desired = host.prepare(changing=True, custom_certs=given)
        if dind_storage_driver or dind_dns_server:
            click.echo("--dind-storage-driver and --dind-dns-server do nothing without --dind", err=True)
        if init:
            initialize(desired, host.json)
            return
        options = host.options(
            verify=not no_verify, update_only=update_only, check_ports=not disable_port_check
        )
        bring_up(desired, host.output, options)


def initialize(desired: Desired, as_json: bool) -> None:
    """RKE's `up --init`: the state file with the cluster's certificates and configuration, no host touched;
    the next `up` deploys them."""
    print_warnings(desired.warnings)
    path = save_state(desired, current=False)
    if as_json:
        emit_json({"ok": True, "state": str(path), "certificates": len(desired.bundle)})
    else:
        console(summary=True).print(f"state written to {path}: run `rke-py up` to deploy it")


def bring_up(desired: Desired, output: str, options: Options) -> None:
    """Run `up` for `desired` and report it: what changed, the checks, where the kubeconfig and state are."""
    started = time.monotonic()
    print_warnings(desired.warnings)
    with phase_progress() as on_phase:
        result = up(desired, options, on_phase)
    seconds = round(time.monotonic() - started, 1)
    config_path = desired.config_path
    kubeconfig, state = kubeconfig_path_for(config_path), state_path_for(config_path)
    if output == "json":
        emit_json(
            {
                "ok": result.report.ok if result.report else True,
                "seconds": seconds,
                **changes_doc(desired.config, result),
                "verify": result.report.to_dict() if result.report else None,
                "kubeconfig": str(kubeconfig),
                "state": str(state),
            }
        )
    else:
        out = console(summary=True)
        if result.changed:
            print_actions(out, result, title="Changes made")
        else:
            out.print("Nothing to change: every host already matches cluster.yml.")
        if result.report:
            print_report(out, result.report)
        out.print(f"kubeconfig: {kubeconfig}\nstate: {state}\ntook {seconds}s")
    require_ok(result.report, skipped_targets(result.skipped))
    if result.skipped:
        names = ", ".join(n.address for n in result.skipped)
        raise SkippedHostsError(
            f"provisioning incomplete: worker host(s) {names} skipped because they could not be reached; "
            "run `rke-py up` again once they are back"
        )
