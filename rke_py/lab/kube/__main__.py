"""``python3 -m rke_py.lab.kube <component> [flags]``, or a link named after the component."""

import os
import signal
import ssl
import sys

from rke_py.lab.kube import COMPONENTS, VERSION, flags, log
from rke_py.lab.kube.kubeconfig import KubeconfigError


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv if argv is None else argv)
    program = os.path.basename(argv[0]) if argv else ""
    if program in COMPONENTS:
        component, args = program, argv[1:]
    elif len(argv) > 1 and argv[1] in COMPONENTS:
        component, args = argv[1], argv[2:]
    else:
        sys.stderr.write(f"usage: python3 -m rke_py.lab.kube {{{','.join(COMPONENTS)}}} [flags]\n")
        return 2
    log.set_component(component)
    try:
        parsed = flags.parse(component, args)
    except flags.FlagError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    if parsed.get("help"):
        sys.stdout.write(flags.usage(component))
        return 0
    if parsed.get("version"):
        sys.stdout.write(f"Kubernetes {VERSION}\n")
        return 0
    # docker stop sends SIGTERM; end promptly like the real binaries.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    log.info(f"{component} {VERSION} (lab component) starting")
    try:
        _run(component, parsed)
    except flags.FlagError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        return 1
    except (KubeconfigError, ssl.SSLError, OSError) as exc:
        # Unreadable certificates or kubeconfigs: one clear line for `docker logs`, no traceback.
        log.error(f"{component}: {exc}")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


def _run(component: str, parsed: flags.Flags) -> None:
    if component == "kube-apiserver":
        from rke_py.lab.kube import apiserver

        apiserver.run(parsed)
    elif component in ("kube-controller-manager", "kube-scheduler"):
        from rke_py.lab.kube import controller_manager

        controller_manager.run(component, parsed)
    elif component == "kubelet":
        from rke_py.lab.kube import kubelet

        kubelet.run(parsed)
    else:
        from rke_py.lab.kube import proxy

        proxy.run(parsed)


if __name__ == "__main__":
    sys.exit(main())
