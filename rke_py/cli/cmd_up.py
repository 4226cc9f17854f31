"""`rke-py up`: bring the cluster to what cluster.yml says, then prove it works."""

from __future__ import annotations

import time

import click

from rke_py.cli.options import cert_dir_for, cert_dir_option, host_command_options
from rke_py.cli.output import console, emit_json, phase_progress, print_warnings
from rke_py.cli.render import changes_doc, print_actions, print_report
from rke_py.cli.run import cluster_run, options_from
from rke_py.deploy.desired import Desired, prepare
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
def command(
    config_path,
    strict,
    output,
    host_key_policy,
    known_hosts,
    concurrency,
    log_file,
    verbose,
    no_verify,
    custom_certs,
    cert_dir,
) -> None:
    """Create or update the cluster described by cluster.yml."""
    with cluster_run("up", config_path, log_file, verbose):
        given = cert_dir_for(config_path, cert_dir) if custom_certs else None
        desired = prepare(config_path, strict=strict, changing=True, custom_certs=given)
        options = options_from(host_key_policy, known_hosts, concurrency, verify=not no_verify)
        bring_up(desired, output, options)


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
        out = console()
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
