"""`scripts/conformance`: build a lab cluster with `rke-py up`, run the Kubernetes conformance suite on it,
keep the JUnit reports, remove the cluster, and print the outcome per SIG.

The suite runs in two passes as its authors intend: the parallel `[Conformance]` specs, then the
`[Serial]` ones one at a time. A spec counts as passed or failed in the pass that ran it, and as skipped
if neither did (a `--focus` that left it out).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import click

from rke_py.errors import ExitStatus, RkePyError
from rke_py.lab.images import KUBE_COMPONENTS
from rke_py.lab.state import Lab, LabError, state_dir
from rke_py.lab.testimages import SUITE
from rke_py.plan.kubelet import ROLE_TAINTS

INPUTS = {  # environment variable -> what the directory holds, one of these sets of files
    "RKE_PY_KUBE_BINARIES": ((*KUBE_COMPONENTS, "cri-dockerd", "kubectl"),),  # kubectl: the suite's
    "RKE_PY_ADDON_BINARIES": (("coredns",), ("kube-dns", "dnsmasq-nanny", "sidecar")),  # cluster DNS
    "RKE_PY_E2E": (SUITE,),
}
CONFORMANCE = r"\[Conformance\]"
SERIAL = r"\[Serial\]"
OUTCOMES = ("passed", "failed", "skipped")
_SIG = re.compile(r"\[sig-([a-z0-9-]+)\]")


@dataclass(frozen=True)
class Spec:
    name: str
    outcome: str  # one of OUTCOMES

    @property
    def sig(self) -> str:
        match = _SIG.search(self.name)
        return match.group(1) if match else "none"


def read_junit(path: Path) -> dict[str, str]:
    """Outcome of every `[Conformance]` spec in one JUnit report (ginkgo's, one <testcase> per spec)."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "")
        if "[Conformance]" not in name:
            continue
        if case.find("failure") is not None or case.find("error") is not None:
            out[name] = "failed"
        elif case.find("skipped") is not None:
            out[name] = "skipped"
        else:
            out[name] = "passed"
    return out


def merge(passes: list[dict[str, str]]) -> list[Spec]:
    """One outcome per spec over the passes: what the pass that ran it said, else skipped."""
    names = sorted({name for outcomes in passes for name in outcomes})
    specs = []
    for name in names:
        ran = [p[name] for p in passes if p.get(name, "skipped") != "skipped"]
        specs.append(Spec(name, "failed" if "failed" in ran else ran[0] if ran else "skipped"))
    return specs


def table(specs: list[Spec], seconds: float) -> str:
    """Counts per SIG, the failed specs by name, the wall time, and the totals as the last line."""
    per_sig: dict[str, Counter[str]] = {}
    for spec in specs:
        per_sig.setdefault(spec.sig, Counter())[spec.outcome] += 1
    lines = [f"{'SIG':<22} {'passed':>7} {'failed':>7} {'skipped':>8}"]
    for sig, counts in sorted(per_sig.items()):
        lines.append(f"{sig:<22} {counts['passed']:>7} {counts['failed']:>7} {counts['skipped']:>8}")
    lines += [f"failed: {spec.name}" for spec in specs if spec.outcome == "failed"]
    total = Counter(spec.outcome for spec in specs)
    lines.append(f"wall time: {seconds / 60:.1f} min")
    lines.append(", ".join(f"{total[o]} {o}" for o in OUTCOMES))
    return "\n".join(lines)


def focus_patterns(focus: str) -> tuple[str, str]:
    """ginkgo --focus for the parallel and the serial pass: the specs matching `focus` that are
    conformance specs (and [Serial] ones). RE2 has no lookahead; a spec's name ends in [Conformance] and
    names [Serial] before it, which is what lets one pattern ask for all three."""
    parallel = f"({focus}).*{CONFORMANCE}"
    return parallel, f"{SERIAL}.*({focus}).*{CONFORMANCE}|({focus}).*{SERIAL}.*{CONFORMANCE}"


def missing_input() -> str:
    """A one-line message for the first input that is not there, or empty when all are."""
    for var, choices in INPUTS.items():
        value = os.environ.get(var, "")
        wanted = " or ".join(", ".join(files) for files in choices)
        if not value or not Path(value).is_dir():
            return f"conformance: set {var} to a directory holding {wanted}"
        if not any(all((Path(value) / f).is_file() for f in files) for files in choices):
            absent = [f for f in choices[0] if not (Path(value) / f).is_file()]
            others = f" (or {' or '.join(', '.join(files) for files in choices[1:])})" if choices[1:] else ""
            return f"conformance: {var}={value} lacks {', '.join(absent)}{others}"
    return ""


def _say(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} conformance: {message}", file=sys.stderr, flush=True)


def ginkgo_command(e2e: Path, kubeconfig: Path, report: Path, focus: str, skip: str, procs: int) -> list[str]:
    """One pass's command line. The suite waits for every node to be schedulable unless its taints are
    named non-blocking: RKE's role taints are, as the suite's default names kubeadm's control-plane one."""
    command = [str(e2e / "ginkgo"), f"--procs={procs}", "--no-color", "--timeout=6h", f"--focus={focus}"]
    command += [f"--skip={skip}"] if skip else []
    command += [str(e2e / "e2e.test"), "--", f"--kubeconfig={kubeconfig}", "--provider=skeleton"]
    taints = ",".join(key for _, key, _ in ROLE_TAINTS)
    return [*command, f"--non-blocking-taints={taints}", f"--report-dir={report}"]


def _suite(
    kubeconfig: Path, repo_list: Path, report: Path, focus: str, skip: str, procs: int
) -> dict[str, str]:
    """One ginkgo pass; its JUnit report's outcomes (empty when it wrote none)."""
    report.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        KUBECONFIG=str(kubeconfig),
        KUBE_TEST_REPO_LIST=str(repo_list),
        PATH=f"{os.environ['RKE_PY_KUBE_BINARIES']}{os.pathsep}{os.environ.get('PATH', '')}",  # its kubectl
    )
    command = ginkgo_command(Path(os.environ["RKE_PY_E2E"]), kubeconfig, report, focus, skip, procs)
    with open(report / "ginkgo.log", "w") as log:
        subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=report)
    junit = sorted(report.glob("junit*.xml"))
    return read_junit(junit[0]) if junit else {}


def _built(name: str, nodes: int) -> Lab:
    """A new lab serving the suite, its cluster built by `rke-py up` as a user runs it."""
    from rke_py.lab import clusteryml, hosts

    lab = hosts.up(
        name,
        nodes,
        progress=_say,
        binaries=Path(os.environ["RKE_PY_KUBE_BINARIES"]),
        addon_binaries=Path(os.environ["RKE_PY_ADDON_BINARIES"]),
        e2e=Path(os.environ["RKE_PY_E2E"]),
        rancher_images=Path(rancher) if (rancher := os.environ.get("RKE_PY_RANCHER_IMAGES")) else None,
        oidc_discovery=True,
    )
    _say(clusteryml.up_command(lab))
    done = subprocess.run([sys.executable, "-m", "rke_py", *clusteryml.up_args(lab)])
    if done.returncode != 0:  # the lab stays for a look: its cluster.yml, log and state are beside each other
        raise LabError(
            f"rke-py up failed (exit {done.returncode}); the lab is left as it is in {lab.dir}; "
            f"remove it with: rke-py lab down --name {name}"
        )
    return lab


def _existing(name: str) -> Lab:
    """Lab `name` as it stands; it must serve the suite's images and hold a cluster."""
    lab = Lab.load(state_dir(name))
    if not lab.e2e_repo_list.is_file():
        raise LabError(f"lab {name} does not serve the suite's images: it was made without --e2e")
    if not (lab.dir / f"kube_config_{lab.cluster_yml.name}").is_file():
        raise LabError(f"lab {name} holds no cluster yet: run rke-py up on it first")
    return lab


@click.command()
@click.option(
    "--focus",
    default="",
    help="Only the conformance specs whose name this regular expression matches (a part of the name "
    "before or after [Serial], not across it).",
)
@click.option(
    "--nodes",
    type=click.Choice(["3", "5"]),
    default="3",
    show_default=True,
    help="3: every node has every role; 5: 3 etcd+controlplane and 2 workers behind nginx-proxy.",
)
@click.option("--procs", default=4, show_default=True, help="Parallel ginkgo processes in the first pass.")
@click.option("--name", default="conformance", show_default=True, help="The lab's name.")
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the JUnit reports and logs go [default: ./conformance-<date>-<time>].",
)
@click.option("--keep", is_flag=True, help="Leave the cluster and its lab up afterwards.")
@click.option(
    "--existing",
    is_flag=True,
    help="Run the suite on lab --name as it stands (left up by an earlier --keep run, and upgraded, "
    "restored or rotated since): no new lab, no rke-py up, and the lab stays.",
)
def main(
    focus: str, nodes: str, procs: int, name: str, report_dir: Path | None, keep: bool, existing: bool
) -> None:
    """Run the conformance suite on a lab cluster built by rke-py."""
    if message := missing_input():
        click.echo(message, err=True)
        sys.exit(ExitStatus.CONFIG)
    report = (report_dir or Path(f"conformance-{time.strftime('%Y%m%d-%H%M%S')}")).resolve()
    started = time.monotonic()
    try:
        lab = _existing(name) if existing else _built(name, int(nodes))
    except RkePyError as exc:
        click.echo(f"conformance: {exc}", err=True)
        sys.exit(exc.exit_status)
    try:
        kubeconfig = lab.dir / f"kube_config_{lab.cluster_yml.name}"
        _say(f"parallel pass, {procs} processes; reports in {report}")
        parallel, serial = focus_patterns(focus)
        passes = [_suite(kubeconfig, lab.e2e_repo_list, report / "parallel", parallel, SERIAL, procs)]
        _say("serial pass")
        passes.append(_suite(kubeconfig, lab.e2e_repo_list, report / "serial", serial, "", 1))
    finally:
        if not (keep or existing):
            from rke_py.lab import hosts

            _say(f"removing lab {name}")
            hosts.down(name, progress=_say)
    specs = merge(passes)
    click.echo(table(specs, time.monotonic() - started))
    if not specs:
        click.echo(f"conformance: no spec ran; --focus {focus!r} matches no conformance spec?", err=True)
    sys.exit(ExitStatus.OK if specs and all(s.outcome != "failed" for s in specs) else ExitStatus.ERROR)


if __name__ == "__main__":
    main()
