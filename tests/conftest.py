"""Suite-wide rules. In CI (`CI=true`) a skipped test is a failed one: a lab test that cannot run there
(no Docker engine, a missing tool) must turn the run red instead of letting it pass by skipping."""

from __future__ import annotations

import os
import signal

import pytest

# A suite started in the background by a non-interactive shell (`bash scripts/test &`) inherits SIGINT
# ignored, and every rke-py it starts would ignore Ctrl-C too, as it should for such a job. The tests that
# press Ctrl-C need it delivered, as a terminal delivers it: a handler here is reset to the default in each
# child, where an ignored signal stays ignored.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


# marker -> the variable that gives what its tests need
OUTSIDE_INPUTS = {
    "real_kubernetes": "RKE_PY_KUBE_BINARIES",
    "real_addons": "RKE_PY_ADDON_BINARIES",
    "kdm": "RKE_PY_KDM",
    "rke": "RKE_PY_RKE",
    "rancher_images": "RKE_PY_RANCHER_IMAGES",
    "vagrant_vms": "RKE_PY_VAGRANT_BOX",
}


# The lab's test files run on two workers side by side, each file's tests in order on one of them (a
# module's own lab stays with its tests). Most of a lab test's time is spent waiting (on a timeout it
# provokes, a container's start), so two labs at once share the machine's cores well. These files go to
# the second worker: about half of the lab's time (`--durations=0` in scripts/test gives each file's).
SECOND_LAB_WORKER = {
    f"tests/lab/{name}.py"
    for name in (
        "test_faults",
        "test_disaster_recovery",
        "test_up_nonroot",
        "test_lab_hosts",
        "test_up_bastion",
        "test_up_custom_certs",
        "test_up_rke_keys",
        "test_rke_command_line",
    )
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that need something from outside the repository are left out, not skipped, without it: what
    only real Kubernetes does (pods run; the stand-ins run none by design), and comparisons with RKE's own
    rendering of KDM's templates. With xdist (scripts/test) the lab's tests are two groups, which xdist
    hands out first (they hold the most tests), one to each worker; the unit tests follow."""
    for item in items:
        if item.nodeid.startswith("tests/lab/"):
            group = "lab-2" if item.nodeid.split("::")[0] in SECOND_LAB_WORKER else "lab-1"
            item.add_marker(pytest.mark.xdist_group(group))
    absent = [marker for marker, var in OUTSIDE_INPUTS.items() if not os.environ.get(var)]
    left_out = [item for item in items if any(item.get_closest_marker(m) for m in absent)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI, which must run every test: {reason}"
