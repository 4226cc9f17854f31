"""Files and root-only commands on a host whose SSH user is not root but may use Docker (RKE's usual setup).

Docker runs containers as root, so what rke-py writes under `<prefix>/etc/kubernetes` goes through a
helper container from the rke-tools image with that directory bound, as RKE's cert-deployer does: the
content arrives as a tar (owner root, the file's mode from the first byte) and is renamed into place, so a
reader never sees half a file. Hashes are read the same way. Cleanup on `remove` runs its script in the
host's namespaces (`nsenter` from a privileged one-shot container), the same script root runs over SSH.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rke_py.hosts.base import (
    TEMPORARY,
    Completed,
    DockerError,
    parse_sha256sum,
    remove_if_present,
    tar_files,
)
from rke_py.hosts.docker_api import HostDocker

if TYPE_CHECKING:
    from rke_py.plan.model import FileSpec

HELPER = "rke-py-file-helper"
CLEANER = "rke-py-cleaner"
HELPER_LABEL = "io.rke-py.helper"  # not RKE's name label: observe never mistakes a helper for a component
# `mv -f` of each pair of arguments; a pair whose first file is gone and whose second is there was moved by
# an earlier run of the same command that answered too late, so the command may be asked again.
RENAME_PAIRS = 'while [ $# -gt 1 ]; do [ ! -e "$1" ] && [ -e "$2" ] || mv -f "$1" "$2" || exit; shift 2; done'


class DockerFiles:
    def __init__(self, docker: HostDocker, image: str, root: str, ensure_image: Callable[[str], None]):
        self.docker = docker
        self.image = image  # rke-tools: busybox's sh, mkdir, mv, sha256sum and nsenter
        self.root = root  # the one directory rke-py writes files under
        self.ensure_image = ensure_image  # pulls the image (with the registry's credentials) when missing
        self._helper: str | None = None
        self._made: set[str] = set()  # directories made in this run: one mkdir each, not one per file

    def _container(self) -> str:
        if self._helper is None:
            self.ensure_image(self.image)
            remove_if_present(self.docker, HELPER)  # a helper left by a run that was killed
            self._helper = self.docker.create_named(
                HELPER,
                lambda api: api.create_container(
                    image=self.image,
                    name=HELPER,
                    entrypoint=["sleep", "86400"],  # removed at the end of the run, or by the next
                    labels={HELPER_LABEL: "files"},
                    host_config=api.create_host_config(
                        binds=[f"{self.root}:{self.root}"], network_mode="none"
                    ),
                ),
                "create the file helper",
            )
            self.docker.start(self._helper)
        return self._helper

    def _exec(self, argv: list[str]) -> str:
        """Run a command of the helper's, each of which may run twice (see the renames), so a busy host is
        asked again."""
        code, out = self.docker.exec(self._container(), argv, again=True)
        if code:
            raise DockerError(
                f"{' '.join(argv[:2])} in the file helper failed ({code}): {out.strip()[-300:]}"
            )
        return out

    def write_files(self, files: Sequence[FileSpec]) -> None:
        """Replace each file (under the root) atomically, owned by root with its mode: every file goes to a
        temporary name first and is renamed over its path. One archive per directory and one command for
        all the renames: each Docker call is a round trip, and an exec a process start on the host."""
        by_directory: dict[str, list[FileSpec]] = {}
        for f in files:
            if not f.path.startswith(self.root.rstrip("/") + "/"):
                raise DockerError(f"{f.path} is outside {self.root}, the directory rke-py writes to")
            by_directory.setdefault(posixpath.dirname(f.path), []).append(f)
        missing = [d for d in by_directory if d not in self._made]
        if missing:
            self._exec(["mkdir", "-p", *missing])
            self._made.update(missing)
        renames: list[str] = []
        for directory, specs in by_directory.items():
            archive = tar_files({_temporary(f.path): (f.content, f.mode) for f in specs})
            self.docker.put_archive(self._container(), directory, archive)
            renames += [x for f in specs for x in (posixpath.join(directory, _temporary(f.path)), f.path)]
        if renames:
            self._exec(["sh", "-c", RENAME_PAIRS, "sh", *renames])

    def file_hashes(self, paths: list[str]) -> dict[str, str | None]:
        hashes: dict[str, str | None] = dict.fromkeys(paths)
        if paths:
            out = self._exec(["sh", "-c", 'sha256sum -- "$@" 2>/dev/null; true', "sh", *paths])
            hashes.update(parse_sha256sum(out, paths))
        return hashes

    def run_in_host(self, script: str, timeout: float = 120) -> Completed:
        """`script` as root in the host's mount and network namespaces, in a one-shot privileged container."""
        self.ensure_image(self.image)
        remove_if_present(self.docker, CLEANER)
        cid = self.docker.create_named(
            CLEANER,
            lambda api: api.create_container(
                image=self.image,
                name=CLEANER,
                entrypoint=["nsenter", "-t", "1", "-m", "-n", "--", "sh", "-c", script],
                labels={HELPER_LABEL: "cleaner"},
                host_config=api.create_host_config(privileged=True, pid_mode="host", network_mode="host"),
            ),
            "create the cleaner",
        )
        try:
            self.docker.start(cid)
            code = self.docker.wait(cid, timeout)
            return Completed(code, "\n".join(self.docker.logs(cid, 50)).encode(), b"")
        finally:
            remove_if_present(self.docker, cid)

    def close(self) -> None:
        if self._helper is not None:
            remove_if_present(self.docker, self._helper)
            self._helper = None


def _temporary(path: str) -> str:
    return f".{posixpath.basename(path)}{TEMPORARY}"
