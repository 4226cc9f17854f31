"""The Docker API of a node, spoken over the host's own SSH connection.

docker-py's `ssh://` support builds its own paramiko client (no key object, no passphrase, no bastion,
RejectPolicy) and needs the docker CLI on the node. Instead, each pooled HTTP connection here is a
channel on the `Connection` rke-py already holds: `direct-streamlocal@openssh.com` straight to the
node's Docker socket (what RKE does), or, when sshd forbids Unix-socket forwarding, an exec channel
running `docker system dial-stdio`. Images are pulled with the node's docker CLI where it has one (see
PULL_IDLE).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import shlex
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, cast
from urllib.parse import urlencode

import docker
import paramiko
import requests
from docker.constants import MINIMUM_DOCKER_API_VERSION
from requests.structures import CaseInsensitiveDict

from rke_py.errors import ConnectError
from rke_py.hosts import channels
from rke_py.hosts.base import Completed, DockerContainer, DockerError
from rke_py.hosts.ssh import Connection
from rke_py.kube.api import API_PATIENCE
from rke_py.plan.model import ContainerSpec, RunConfig, flags_in_order

log = logging.getLogger("rke_py.hosts")

DEFAULT_SOCKET = "/var/run/docker.sock"
# Seconds one Docker request may take (RKE's 50). A slow host's Docker (a small or emulated machine that
# just started a dozen containers) can take longer to start one; a call that is safe to repeat is then
# asked again for as long as a busy apiserver would be (--api-timeout) before the run fails.
REQUEST_TIMEOUT = 50
# OpenSSH's MaxSessions defaults to 10. Streamlocal channels are not sessions, but stay under it anyway;
# dial-stdio channels are sessions and share the limit with SFTP and commands (see ssh.EXEC_SLOTS).
STREAMLOCAL_POOL = 9
DIAL_STDIO_POOL = 3
# what docker-py puts before each path; `NodeAPIClient.request` takes it off again
_BASE_URL = "http+docker://ssh-rke-py"
# A pull through the API streams several progress updates a second per layer, each an SSH packet for this
# process to decrypt: the largest part of a new host's cost here. The node's docker CLI reads that stream
# itself and, its output not a terminal, prints a line per layer and step. Silent this long, it is stuck.
PULL_IDLE = 300.0
NO_COMMAND = 127  # the shell's status for a command it cannot find


def socket_problem(socket_path: str, user: str, cause: str, *, absent: bool = False) -> str:
    """Why the node's Docker cannot be reached, cause first, then what fits this user (`absent`: no socket
    at all): RKE's generic hint (RedHat's root, the docker group) said first hid a Docker not running."""
    if absent:
        advice = "Docker is not running, or listens elsewhere: start it on the node, or set docker_socket"
    elif user == "root":
        advice = (
            "check that `docker ps` works for root on the node; on RedHat/CentOS root cannot use Docker over "
            "SSH: connect as a user in the docker group"
        )
    else:
        advice = (
            f"{user} must be able to run `docker ps` on the node: `sudo usermod -aG docker {user}` there, "
            "then connect again (sshd must be OpenSSH 6.7 or later)"
        )
    return f"cannot reach the Docker socket {socket_path}: {cause}; {advice}"


class _Channels:
    """The node's Docker over kept HTTP connections, each on its own channel, at most `size` at a time. A
    request costs one exchange on an open channel: no channel to open, and none of requests' and urllib3's
    layers, which cost twice the exchange itself."""

    def __init__(self, open_channel: Callable[[], channels.Channel], size: int):
        self._open = open_channel
        self._idle: list[channels.HTTPConnection] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)

    def _connection(self, timeout: float | None) -> channels.HTTPConnection:
        with self._lock:
            while self._idle:
                kept = self._idle.pop()
                if not kept.closed_by_peer():
                    return kept
                kept.close()  # the daemon hung up on an idle connection
        try:
            chan = self._open()
        except paramiko.ChannelException as e:  # Docker answered when the run connected
            said = f"sshd could not open a channel to Docker ({e.text}): has it stopped?"
            raise DockerError(said, stopped=True) from e
        except channels.ChannelTimeout as e:  # a busy host: the request is asked again, as a slow answer is
            raise TimedOut from e
        return channels.HTTPConnection(chan, "docker", 80, None, timeout)

    def exchange(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str], timeout: float | None
    ) -> tuple[http.client.HTTPResponse, bytes]:
        def ask(conn: channels.HTTPConnection) -> tuple[http.client.HTTPResponse, bytes]:
            return conn.exchange(method, path, timeout=timeout, body=body, headers=headers, keep=True)

        with self._slots:
            conn = self._connection(timeout)
            try:
                try:
                    answer = ask(conn)
                except channels.Stale:  # Docker keeps idle connections: it went away; a new channel says how
                    conn.close()
                    self.close()  # the other idle ones went with it
                    conn = self._connection(timeout)
                    answer = ask(conn)
            except channels.NoAnswer as e:
                conn.close()
                if isinstance(e, channels.Broken):
                    raise Broke("Docker closed the connection without answering") from e
                raise TimedOut from e
            except (channels.HTTPProblem, OSError, paramiko.SSHException, EOFError) as e:
                conn.close()
                raise Broke(str(e) or type(e).__name__) from e
            except BaseException:
                conn.close()
                raise
            if conn.reusable:
                with self._lock:
                    self._idle.append(conn)
            else:
                conn.close()
            return answer

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _demux(raw: bytes) -> bytes:
    """An attached stream's frames joined: a stream byte, three zero bytes, a big-endian length, data."""
    out, at = bytearray(), 0
    while at + 8 <= len(raw):
        size = int.from_bytes(raw[at + 4 : at + 8], "big")
        out += raw[at + 8 : at + 8 + size]
        at += 8 + size
    return bytes(out)


class NodeAPIClient(docker.APIClient):
    """docker.APIClient whose requests travel over a node's SSH connection: docker-py builds each request
    and reads its answer; `request`, where requests would send it, sends it on a kept channel."""

    # the daemon's answer to the version negotiation: it also says the Docker version, which observe would
    # otherwise ask `docker info` for
    server: dict[str, Any] | None = None

    def __init__(self, pool: _Channels, *, transport_kind: str, timeout: int):
        # Built as a local-socket client with a fixed version so that nothing is contacted yet; the version
        # is negotiated by `HostDocker.negotiate`. The attributes set here are docker-py's own, untyped in
        # its stubs.
        super().__init__(
            base_url="http+unix:///nonexistent", version=MINIMUM_DOCKER_API_VERSION, timeout=timeout
        )
        cast(Any, self)._custom_adapter.close()
        self._pool = pool
        self.base_url = _BASE_URL
        self.transport_kind = transport_kind  # "streamlocal" or "dial-stdio"

    def request(  # type: ignore[override]  # the keywords docker-py passes; the others are requests' own
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        data: str | bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        **unused: Any,
    ) -> requests.Response:
        path = url.removeprefix(_BASE_URL)
        if params:
            path += "?" + urlencode([(k, v) for k, v in params.items() if v is not None], doseq=True)
        body = data.encode() if isinstance(data, str) else data
        # docker-py gives every request its timeout; None is a pull's, which waits as long as it takes
        response, content = self._pool.exchange(method, path, body, dict(headers or {}), timeout)
        answer = requests.Response()  # what docker-py reads an answer from
        answer.status_code, answer.reason, answer.url = response.status, response.reason, url
        answer.headers = CaseInsensitiveDict(response.getheaders())
        answer._content = content
        cast(Any, answer)._content_consumed = True  # read whole, as iter_content expects
        answer.encoding = "utf-8"
        return answer

    def exec_output(self, exec_id: str) -> bytes:
        """Start an exec and return its output once it ends: Docker sends the raw stream and closes the
        connection when the command exits."""
        inner = cast(Any, self)
        url = inner._url("/exec/{0}/start", exec_id)
        response = inner._post_json(url, data={"Tty": False, "Detach": False})
        inner._raise_for_status(response)
        return _demux(response.content)

    def archive(self, container: str, path: str) -> bytes:
        """The tar stream of `path` in the container, read whole: docker-py's get_archive would read it
        from the socket requests keeps, and no requests connection carries it."""
        inner = cast(Any, self)
        response = inner._get(inner._url("/containers/{0}/archive", container), params={"path": path})
        inner._raise_for_status(response)
        return bytes(response.content)

    def use_version(self, version: str) -> None:
        cast(Any, self)._version = version

    def close(self) -> None:
        self._pool.close()
        super().close()


def docker_client(
    conn: Connection,
    socket_path: str = DEFAULT_SOCKET,
    *,
    version: str = "auto",
    timeout: int = REQUEST_TIMEOUT,
    patience: float = API_PATIENCE,
) -> HostDocker:
    """The Docker API of the node behind `conn`, talking to its `socket_path` (RKE's `docker_socket`).

    `timeout` is the per-request HTTP timeout, `patience` how long a repeatable call that timed out is asked
    again. Raises ConnectError, cause first, when the socket cannot be reached.
    """
    socket_path = socket_path or DEFAULT_SOCKET
    user = conn.target.user
    kind, size = "streamlocal", STREAMLOCAL_POOL
    first: list[channels.Channel] = []

    def open_channel() -> channels.Channel:
        try:
            return first.pop()
        except IndexError:
            return conn.open_unix(socket_path, timeout=timeout)

    try:
        # The channel that shows the socket can be reached is the pool's first: it carries the version
        # request, and a host costs one channel fewer.
        first.append(open_channel())
    except channels.ChannelTimeout:
        pass  # a host too busy to open it in time: the version request opens it again, and asks again
    except paramiko.ChannelException as e:
        # OpenSSH answers "open failed" both when forwarding is off and when connect() fails, so ask the
        # node which one it is before choosing the fallback.
        kind, size, open_channel = "dial-stdio", DIAL_STDIO_POOL, _dial_stdio(conn, socket_path, e, timeout)
    except paramiko.SSHException as e:
        raise ConnectError(conn.host, "docker", socket_problem(socket_path, user, str(e))) from None
    api = NodeAPIClient(_Channels(open_channel, size), transport_kind=kind, timeout=timeout)

    def cli_pull(image: str) -> Completed:
        return conn.run(
            f"{_docker_host(socket_path)} docker pull -- {shlex.quote(image)}", timeout=PULL_IDLE, idle=True
        )

    host = HostDocker(api, patience, conn.host, cli_pull)
    try:
        host.negotiate(version)
    except DockerError as e:
        raise ConnectError(conn.host, "docker", socket_problem(socket_path, user, f"{kind}: {e}")) from None
    return host


def _docker_host(socket_path: str) -> str:
    """The docker CLI's setting for the socket rke-py uses, whatever the node's user has configured."""
    return f"DOCKER_HOST={shlex.quote('unix://' + socket_path)}"


def _dial_stdio(
    conn: Connection, socket_path: str, refused: paramiko.ChannelException, timeout: float
) -> Callable[[], channels.Channel]:
    """Channels running `docker system dial-stdio`, if the node has the socket and the docker CLI."""
    quoted = shlex.quote(socket_path)
    probe = conn.run(f"test -S {quoted} || echo no-socket; command -v docker >/dev/null || echo no-cli")
    user = conn.target.user
    if b"no-socket" in probe.stdout:
        problem = socket_problem(socket_path, user, "there is no socket there", absent=True)
        raise ConnectError(conn.host, "docker", problem)
    if b"no-cli" in probe.stdout:
        cause = (
            f"sshd refused to connect to it ({refused.text}: AllowStreamLocalForwarding off, or no "
            "permission), and the docker CLI is not installed on the node to use `docker system dial-stdio`"
        )
        raise ConnectError(conn.host, "docker", socket_problem(socket_path, user, cause))
    command = f"{_docker_host(socket_path)} docker system dial-stdio"

    def open_channel() -> channels.Channel:
        chan = conn.opened(lambda t: t.open_session(timeout=timeout))
        chan.exec_command(command)
        return chan

    return open_channel


class HostDocker:
    """The `Docker` operations over one node's client; docker-py's errors become DockerError. `cli_pull`
    pulls an image with the node's docker CLI, where there is one (see PULL_IDLE)."""

    def __init__(
        self,
        client: NodeAPIClient,
        patience: float = API_PATIENCE,
        host: str = "",
        cli_pull: Callable[[str], Completed] | None = None,
    ):
        self.api = client
        self.patience = patience
        self.host = host  # for the log line of a call asked again
        self._cli_pull = cli_pull

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, again: bool = False, **kwargs: Any) -> Any:
        """`again`: the call may be repeated (reads, and changes that end in the same state), so one that
        timed out is asked again while the requests' timeouts fit in `patience`."""
        started, asked = time.monotonic(), 0
        while True:
            try:
                asked += 1
                return self._once(what, fn, *args, **kwargs)
            except TimedOut as e:
                if not again or (asked + 1) * self.api.timeout > self.patience:
                    spent = time.monotonic() - started
                    times = f", asked {asked} times in {spent:.0f} s" if asked > 1 else ""
                    stuck = "the host, its network or its Docker is stuck"
                    raise DockerError(
                        f"{what}: Docker did not answer within {self.api.timeout:g} s ({stuck}{times})"
                    ) from e.__cause__
                log.info(
                    "%s: %s: Docker is busy (no answer in %g s); asking again",
                    self.host,
                    what,
                    self.api.timeout,
                )

    def _once(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except docker.errors.NotFound as e:
            raise DockerError(f"{what}: {e.explanation or e}", missing=True) from e
        except DockerError as e:
            raise DockerError(f"{what}: {e}", missing=e.missing, stopped=e.stopped) from e
        except Broke as e:
            lost = f"the host, its network or its SSH session was lost; {e}"
            raise DockerError(f"{what}: the connection to Docker broke before it answered ({lost})") from e
        except (docker.errors.DockerException, OSError, paramiko.SSHException, EOFError) as e:
            raise DockerError(f"{what}: {str(e) or type(e).__name__}") from e

    def negotiate(self, version: str) -> None:
        """The API version to speak: `version`, or with "auto" the daemon's own, as docker-py negotiates;
        the answer is kept, since it also says the Docker version."""
        if version == "auto":
            self.api.server = self._call("docker version", self.api.version, api_version=False, again=True)
            version = self.api.server["ApiVersion"]
        self.api.use_version(version)

    def info(self) -> dict[str, Any]:
        return self._call("docker info", self.api.info, again=True)

    def server_version(self) -> str:
        server = self.api.server or self._call("docker version", self.api.version, again=True)
        return str(server.get("Version", ""))

    def containers(self, label: str, names: Collection[str] = ()) -> list[DockerContainer]:
        filters = {} if names else {"label": label}  # one list either way; Docker's filters only AND
        rows = self._call("list containers", self.api.containers, all=True, filters=filters, again=True)
        found = [
            DockerContainer(
                name=row["Names"][0].lstrip("/"),
                id=row["Id"],
                image=row["Image"],
                # Docker restarts it by its restart policy: nothing for rke-py to start
                running=row["State"] in ("running", "restarting"),
                labels=row.get("Labels") or {},
            )
            for row in rows
        ]
        return [c for c in found if label in c.labels or c.name in names]

    def run_config(self, container: str) -> tuple[RunConfig, frozenset[str]]:
        attrs = self._call(f"inspect {container}", self.api.inspect_container, container, again=True)
        config, host = attrs.get("Config") or {}, attrs.get("HostConfig") or {}
        image = self._call(
            f"inspect image of {container}", self.api.inspect_image, attrs.get("Image", ""), again=True
        )
        image_env = frozenset((image.get("Config") or {}).get("Env") or ())
        restart = ((host.get("RestartPolicy") or {}).get("Name")) or ""
        found = RunConfig(
            image=config.get("Image", ""),
            entrypoint=flags_in_order(config.get("Entrypoint") or ()),
            command=flags_in_order(config.get("Cmd") or ()),
            env=frozenset(config.get("Env") or ()) - image_env,
            binds=frozenset(host.get("Binds") or ()),
            network_mode=host.get("NetworkMode") or "",
            pid_mode=host.get("PidMode") or "",
            privileged=bool(host.get("Privileged")),
            restart_policy="" if restart == "no" else restart,
            volumes_from=tuple(host.get("VolumesFrom") or ()),
            user=config.get("User") or "",
        )
        return found, image_env

    def image_tags(self) -> set[str]:
        images = self._call("list images", self.api.images, again=True)
        return {tag for image in images for tag in image.get("RepoTags") or ()}

    def pull(self, image: str, auth: Mapping[str, str] | None) -> None:
        """With the node's docker CLI when no credentials are needed (cluster.yml's stay off the node),
        else, or when the CLI is missing or fails, through the API, whose error then says why."""
        if self._cli_pull is not None and auth is None:
            try:
                done = self._cli_pull(image)
            except ConnectError as e:  # stuck, or the connection went: the API would fare no better
                raise DockerError(f"pull {image}: {e.detail}") from e
            if done.rc == 0:
                return
            if done.rc == NO_COMMAND:
                self._cli_pull = None
            log.debug("%s: docker pull %s exited %d; pulling through the API", self.host, image, done.rc)
        self._call(
            f"pull {image}", self.api.pull, image, auth_config=dict(auth) if auth else None, again=True
        )

    def create(self, spec: ContainerSpec) -> str:
        return self.create_named(
            spec.name,
            lambda api: api.create_container(
                image=spec.image,
                name=spec.name,
                entrypoint=list(spec.entrypoint) or None,
                command=list(spec.command) or None,
                environment=list(spec.env),
                labels=spec.labels,
                user=spec.user or None,
                host_config=api.create_host_config(
                    binds=list(spec.binds) or None,
                    network_mode=spec.network_mode,
                    pid_mode=spec.pid_mode or None,
                    privileged=spec.privileged,
                    restart_policy={"Name": spec.restart_policy} if spec.restart_policy else None,
                    volumes_from=list(spec.volumes_from) or None,
                ),
            ),
        )

    def create_named(self, name: str, fn: Callable[[docker.APIClient], Any], what: str = "") -> str:
        """The id of the container `fn` creates under `name`, which must not exist yet. A create that got
        no answer in time may have landed late and taken the name, so it is removed before the create is
        asked again: a busy host costs a retry, not the run."""
        asked: list[None] = []

        def create_once() -> str:
            if asked:
                with contextlib.suppress(docker.errors.NotFound):  # the create that timed out never landed
                    self.api.remove_container(name, force=True, v=False)
            asked.append(None)
            return fn(self.api)["Id"]

        return str(self._call(what or f"create {name}", create_once, again=True))

    def start(self, container: str) -> None:
        self._call(f"start {container}", self.api.start, container, again=True)

    def stop(self, container: str, timeout: int = 5) -> None:
        self._call(f"stop {container}", self.api.stop, container, timeout=timeout, again=True)

    def rename(self, container: str, name: str) -> None:
        self._call(f"rename {container} to {name}", self.api.rename, container, name)

    def remove(self, container: str) -> None:
        asked: list[None] = []

        def remove_once() -> None:
            try:
                self.api.remove_container(container, force=True, v=False)
            except docker.errors.NotFound:
                if not asked:  # else the request that timed out removed it
                    raise
            finally:
                asked.append(None)

        self._call(f"remove {container}", remove_once, again=True)

    def logs(self, container: str, tail: int) -> list[str]:
        raw = self._call(f"logs of {container}", self.api.logs, container, tail=tail, again=True)
        return raw.decode(errors="replace").splitlines()[-tail:]

    def never_stopped(self, container: str) -> bool:
        attrs = self._call(f"inspect {container}", self.api.inspect_container, container, again=True)
        state = attrs.get("State") or {}
        return bool(state.get("Running")) and not state.get("Restarting") and not attrs.get("RestartCount")

    def exec(self, container: str, argv: list[str], *, again: bool = False) -> tuple[int, str]:
        """`again`: the command may run twice (a read, or a change that ends in the same state), so it is
        asked again when Docker does not answer in time."""
        what = f"exec in {container}"
        exec_id = self._call(what, self.api.exec_create, container, argv, again=True)["Id"]  # not run yet
        out = self._call(what, self.api.exec_output, exec_id, again=again)
        for _ in range(100):  # the stream can end a moment before the daemon records the exit code
            state = self._call(what, self.api.exec_inspect, exec_id, again=True)
            if not state.get("Running") and state.get("ExitCode") is not None:
                return int(state["ExitCode"]), out.decode(errors="replace")
            time.sleep(0.05)
        raise DockerError(f"{what}: {argv[0]} did not finish")

    def put_archive(self, container: str, path: str, data: bytes) -> None:
        self._call(f"copy into {container}:{path}", self.api.put_archive, container, path, data, again=True)

    def wait(self, container: str, timeout: float) -> int:
        """The container's exit code once it stops (DockerError when it runs longer than `timeout`)."""
        return int(
            self._call(f"wait for {container}", self.api.wait, container, timeout=timeout)["StatusCode"]
        )

    def read_archive(self, container: str, path: str) -> bytes:
        """The tar stream of `path` in the container."""
        return bytes(self._call(f"read {container}:{path}", self.api.archive, container, path, again=True))

    def close(self) -> None:
        self.api.close()


class TimedOut(Exception):
    """One Docker request got no answer in time."""


class Broke(Exception):
    """The connection to Docker broke before the answer came: the host, its network or its SSH session."""
