"""kube-apiserver stand-in: the Kubernetes REST API over TLS with client certificates, stored in etcd."""

import ipaddress
import json
import os
import random
import re
import ssl
import string
import sys
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace

from rke_py.lab.kube import log, objects, rbac, resources, serve, validation
from rke_py.lab.kube.etcd import EtcdClient, EtcdError, KeyValue
from rke_py.lab.kube.flags import FlagError, Flags
from rke_py.lab.kube.resources import Resource
from rke_py.lab.kube.token_webhook import TokenWebhook

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Controllers the lab's controller-manager runs as their own service accounts, as the real one does with
# --use-service-account-credentials. The real one authenticates with each account's token; the lab one has
# none, so it names the controller at the end of its User-Agent (as the real one's does) and is taken
# for that account. RBAC then judges the account, as it would judge the real one's.
SA_CREDENTIALS = ("service-account-controller", "root-ca-cert-publisher")
_FILE_FLAGS = (
    "admission-control-config-file",
    "audit-policy-file",
    "client-ca-file",
    "encryption-provider-config",
    "etcd-cafile",
    "etcd-certfile",
    "etcd-keyfile",
    "kubelet-certificate-authority",
    "kubelet-client-certificate",
    "kubelet-client-key",
    "proxy-client-cert-file",
    "proxy-client-key-file",
    "requestheader-client-ca-file",
    "service-account-key-file",
    "service-account-signing-key-file",
    "tls-cert-file",
    "tls-private-key-file",
)
_AUTHZ_MODES = {"AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node"}
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_CONFLICT_RETRIES = 5
_WATCH_POLL = 0.5
_POLICY_TTL = 1.0  # seconds a read of the stored RBAC objects is reused


class ApiStatus(Exception):
    """Ends a request with a metav1.Status error."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None) -> None:
        super().__init__(message)
        self.body = objects.status(code, reason, message, details)


def _not_found(res: Resource, name: str) -> ApiStatus:
    details = {"name": name, "group": res.group, "kind": res.plural}
    return ApiStatus(404, "NotFound", f'{res.qualified} "{name}" not found', details)


def _conflict(res: Resource, name: str) -> ApiStatus:
    message = (
        f'Operation cannot be fulfilled on {res.qualified} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    return ApiStatus(409, "Conflict", message, {"name": name, "group": res.group, "kind": res.plural})


@dataclass
class User:
    name: str
    groups: tuple[str, ...]


@dataclass
class Request:
    verb: str
    resource: Resource
    namespace: str
    name: str
    subresource: str
    body: object = None

    @property
    def object_name(self) -> str:
        """The name the request acts on: from the URL, or for a create from the object sent."""
        if self.name or not isinstance(self.body, dict):
            return self.name
        return str((self.body.get("metadata") or {}).get("name", ""))


def _refuse_invalid(res: Resource, new: dict, old: dict | None = None) -> None:
    found = validation.problems(res.kind, new, old)
    if found:
        name = (new.get("metadata") or {}).get("name", "")
        message = f'{res.kind}.{res.group or "core"} "{name}" is invalid: {"; ".join(found)}'
        raise ApiStatus(422, "Invalid", message)


def validate(flags: Flags) -> None:
    """Refuse a configuration the real kube-apiserver refuses, before binding anything."""
    for name in _FILE_FLAGS:
        path = flags.get(name)
        if path and not os.path.isfile(str(path)):
            raise FlagError(f"--{name}: open {path}: no such file or directory")
    if not flags.get("etcd-servers"):
        raise FlagError("--etcd-servers must be specified")
    if flags.get("storage-backend", "etcd3") != "etcd3":
        raise FlagError(f'--storage-backend: unknown storage backend "{flags.get("storage-backend")}"')
    for mode in str(flags.get("authorization-mode", "AlwaysAllow")).split(","):
        if mode not in _AUTHZ_MODES:
            raise FlagError(f'--authorization-mode: authorization mode "{mode}" is not supported')
    if not flags.get("tls-cert-file") or not flags.get("tls-private-key-file"):
        raise FlagError("--tls-cert-file and --tls-private-key-file are required (the lab cannot self-sign)")
    try:
        ipaddress.ip_network(str(flags.get("service-cluster-ip-range", "10.0.0.0/24")))
    except ValueError as exc:
        raise FlagError(f"--service-cluster-ip-range: {exc}") from None
    ports = str(flags.get("service-node-port-range", "30000-32767"))
    if not re.fullmatch(r"\d+(-\d+)?", ports):
        raise FlagError(f'--service-node-port-range: invalid port range "{ports}"')


class Authorizer:
    """``--authorization-mode`` as the real apiserver applies it: group system:masters first, then the
    Node authorizer, then RBAC evaluated from the stored objects (read at most once a second)."""

    def __init__(self, modes: list[str], load_policy: Callable[[], rbac.Policy]) -> None:
        self.modes = modes
        self.node = rbac.NodeAuthorizer() if "Node" in modes else None
        self._load = load_policy
        self._policy: rbac.Policy | None = None
        self._loaded = 0.0
        self._lock = threading.Lock()

    def policy(self) -> rbac.Policy:
        with self._lock:
            if self._policy is None or time.monotonic() - self._loaded > _POLICY_TTL:
                self._policy, self._loaded = self._load(), time.monotonic()
            return self._policy

    def allowed(self, user: User, verb: str, path: str, req: Request | None) -> bool:
        if self.modes == ["AlwaysDeny"]:
            return False
        if "system:masters" in user.groups or "AlwaysAllow" in self.modes:
            return True
        return self.decide(self.attributes(user, verb, path, req))

    @staticmethod
    def attributes(user: User, verb: str, path: str, req: Request | None) -> rbac.Attributes:
        if req is None:
            return rbac.Attributes(user.name, user.groups, verb, path=path)
        res = req.resource
        return rbac.Attributes(
            user.name,
            user.groups,
            verb,
            res.group,
            res.plural,
            req.subresource,
            req.namespace,
            req.object_name,
        )

    def decide(self, attrs: rbac.Attributes) -> bool:
        if "system:masters" in attrs.groups:
            return True
        if self.node is not None and self.node.allows(attrs):
            return True
        if "RBAC" not in self.modes:
            return False
        policy = self.policy()
        if policy.allows(attrs):
            return True
        # Lab shortcut: the real controller-manager runs its controllers as their service accounts
        # (--use-service-account-credentials); the lab one has no tokens, so its node lifecycle check is
        # judged as the node-controller service account that bootstrap RBAC grants it.
        if attrs.user == "system:kube-controller-manager":
            controller = "system:serviceaccount:kube-system:node-controller"
            return policy.allows(replace(attrs, user=controller, groups=("system:serviceaccounts",)))
        return False


def _with_controller_credentials(user: User | None, agent: str) -> User | None:
    """The lab controller-manager's request for a controller in SA_CREDENTIALS, as that account's."""
    controller = agent.rpartition("/")[2]
    if user is None or user.name != "system:kube-controller-manager" or controller not in SA_CREDENTIALS:
        return user
    groups = ("system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated")
    return User(f"system:serviceaccount:kube-system:{controller}", groups)


class ApiServer:
    def __init__(self, flags: Flags) -> None:
        self.flags = flags
        self.prefix = str(flags.get("etcd-prefix", "/registry")).rstrip("/")
        self.etcd = EtcdClient(
            str(flags.get("etcd-servers")).split(","),
            flags.get("etcd-certfile"),
            flags.get("etcd-keyfile"),
            flags.get("etcd-cafile"),
        )
        self.anonymous = bool(flags.get("anonymous-auth", True))
        webhook = flags.get("authentication-token-webhook-config-file")
        ttl = float(str(flags.get("authentication-token-webhook-cache-ttl", 120.0)))
        self.token_webhook = TokenWebhook(str(webhook), ttl) if webhook else None
        modes = str(flags.get("authorization-mode", "AlwaysAllow")).split(",")
        self.authorizer = Authorizer(modes, self.stored_policy)
        self.audit_path = flags.get("audit-log-path")
        self._audit_lock = threading.Lock()
        self.ready = threading.Event()
        self.address = f"{flags.get('advertise-address') or '127.0.0.1'}:{flags.get('secure-port', 6443)}"

    # ---- storage ----

    def _decode(self, kv: KeyValue) -> dict:
        obj = json.loads(kv.value)
        obj.setdefault("metadata", {})["resourceVersion"] = str(kv.mod_revision)
        return obj

    def _encode(self, obj: dict) -> bytes:
        stored = json.loads(json.dumps(obj))
        stored.get("metadata", {}).pop("resourceVersion", None)
        return json.dumps(stored, separators=(",", ":")).encode()

    def read(self, res: Resource, ns: str, name: str) -> tuple[dict, int]:
        kv = self.etcd.get(res.key(self.prefix, ns, name))
        if kv is None:
            raise _not_found(res, name)
        return self._decode(kv), kv.mod_revision

    def list(self, res: Resource, ns: str) -> tuple[list[dict], int]:
        base = res.key(self.prefix, ns)
        kvs, revision = self.etcd.list(base)
        # Keys are <base><name>, or <base><namespace>/<name> when listing across namespaces.
        depth = 1 if res.namespaced and not ns else 0
        items = [self._decode(kv) for kv in kvs if kv.key[len(base) :].count("/") == depth]
        return items, revision

    def create(self, res: Resource, ns: str, obj: dict, dry_run: bool = False) -> dict:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            suffix = "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            meta["name"] = meta["generateName"] + suffix
        name = meta.get("name", "")
        if not name:
            raise ApiStatus(422, "Invalid", f'{res.kind} "" is invalid: metadata.name: Required value')
        # RBAC objects need only be valid path segments (system:node), events anything; the rest are DNS
        # subdomains.
        path_segment = (
            res.group == "rbac.authorization.k8s.io" and name not in (".", "..") and "/" not in name
        )
        if not _NAME.match(name) and not path_segment and res.plural not in ("events",):
            message = (
                f'{res.kind} "{name}" is invalid: metadata.name: Invalid value: "{name}": a lowercase '
                "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
            )
            raise ApiStatus(422, "Invalid", message)
        if res.namespaced:
            meta["namespace"] = ns
            if res.plural != "namespaces" and self.etcd.get(self._ns_key(ns)) is None:
                raise ApiStatus(
                    404, "NotFound", f'namespaces "{ns}" not found', {"name": ns, "kind": "namespaces"}
                )
        else:
            meta.pop("namespace", None)
        if res.plural == "pods":
            self._service_account_admission(ns, obj)
        meta.pop("resourceVersion", None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = objects.now_rfc3339()
        if res.plural == "namespaces":
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj["status"] = {"phase": "Active"}
        _refuse_invalid(res, obj)
        if dry_run:
            return obj
        revision = self.etcd.create(res.key(self.prefix, ns, name), self._encode(obj))
        if revision is None:
            details = {"name": name, "group": res.group, "kind": res.plural}
            raise ApiStatus(409, "AlreadyExists", f'{res.qualified} "{name}" already exists', details)
        meta["resourceVersion"] = str(revision)
        return obj

    def _service_account_admission(self, ns: str, pod: dict) -> None:
        """The ServiceAccount admission plugin: a pod runs as a ServiceAccount that exists (`default` when it
        names none; a static pod's mirror excepted). A cluster's first pod is refused until the
        controller-manager made the namespace's `default`."""
        meta = pod["metadata"]
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
            return
        spec = pod.setdefault("spec", {})
        account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = account
        accounts = resources.lookup("", "v1", "serviceaccounts", True)
        if accounts is not None and self.etcd.get(accounts.key(self.prefix, ns, account)) is None:
            message = (
                f'pods "{meta["name"]}" is forbidden: error looking up service account {ns}/{account}: '
                f'serviceaccount "{account}" not found'
            )
            raise ApiStatus(403, "Forbidden", message)

    def _ns_key(self, ns: str) -> str:
        return resources.lookup("", "v1", "namespaces", False).key(self.prefix, "", ns)

    def _write(self, req: Request, new: dict, old: dict, revision: int, dry_run: bool) -> dict:
        """Store ``new`` over ``old`` if etcd still holds ``revision``; keep what clients may not set."""
        res = req.resource
        meta = new.setdefault("metadata", {})
        if meta.get("name", req.name) != req.name:
            message = (
                f"the name of the object ({meta.get('name')}) does not match the name on the URL ({req.name})"
            )
            raise ApiStatus(400, "BadRequest", message)
        if res.namespaced and meta.get("namespace", req.namespace) != req.namespace:
            message = "the namespace of the provided object does not match the namespace sent on the request"
            raise ApiStatus(400, "BadRequest", message)
        sent_version = meta.get("resourceVersion")
        if sent_version and sent_version != str(revision):
            raise _conflict(res, req.name)
        for key in ("name", "namespace", "uid", "creationTimestamp"):
            if key in old["metadata"]:
                meta[key] = old["metadata"][key]
        new.setdefault("apiVersion", old.get("apiVersion"))
        new.setdefault("kind", old.get("kind"))
        if req.subresource != "status":
            _refuse_invalid(res, new, old)
        if req.subresource == "status":
            new = {**old, "status": new.get("status", {})}
        elif "status" in res.subresources:
            if "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        if dry_run:
            return new
        written = self.etcd.update(res.key(self.prefix, req.namespace, req.name), self._encode(new), revision)
        if written is None:
            raise _conflict(res, req.name)
        new["metadata"]["resourceVersion"] = str(written)
        return new

    def update(self, req: Request, body: dict, dry_run: bool) -> dict:
        old, revision = self.read(req.resource, req.namespace, req.name)
        return self._write(req, body, old, revision, dry_run)

    def patch(self, req: Request, content_type: str, patch: object, dry_run: bool) -> dict:
        for _ in range(_CONFLICT_RETRIES):
            old, revision = self.read(req.resource, req.namespace, req.name)
            try:
                if content_type == "application/json-patch+json":
                    if not isinstance(patch, list):
                        raise objects.PatchError("a JSON patch must be a list of operations")
                    new = objects.json_patch(old, patch)
                elif content_type == "application/strategic-merge-patch+json":
                    new = objects.strategic_merge_patch(old, patch)
                else:
                    new = objects.merge_patch(old, patch)
            except objects.PatchError as exc:
                raise ApiStatus(422, "Invalid", str(exc)) from None
            if not isinstance(new, dict):
                raise ApiStatus(422, "Invalid", "the patch must produce an object")
            try:
                return self._write(req, new, old, revision, dry_run)
            except ApiStatus as exc:
                # The real apiserver retries a patch whose base moved, unless the patch pinned a version.
                pinned = isinstance(patch, dict) and (patch.get("metadata") or {}).get("resourceVersion")
                if exc.body["reason"] != "Conflict" or pinned:
                    raise
        raise _conflict(req.resource, req.name)

    def delete(self, req: Request, options: dict, dry_run: bool) -> dict:
        for _ in range(_CONFLICT_RETRIES):
            old, revision = self.read(req.resource, req.namespace, req.name)
            wanted = (options.get("preconditions") or {}).get("resourceVersion")
            if wanted and wanted != str(revision):
                raise _conflict(req.resource, req.name)
            if dry_run or self.etcd.delete(req.resource.key(self.prefix, req.namespace, req.name), revision):
                return old
        raise _conflict(req.resource, req.name)

    def evict(self, req: Request, body: object, dry_run: bool) -> dict:
        """An Eviction deletes the pod. No PodDisruptionBudget is evaluated (the lab has no disruption
        controller to fill their status), so the stand-in never answers 429 as a real apiserver may."""
        if not isinstance(body, dict) or body.get("kind") != "Eviction":
            raise ApiStatus(400, "BadRequest", "the body of an eviction must be a policy/v1 Eviction")
        name = (body.get("metadata") or {}).get("name", req.name)
        if name != req.name:
            message = f"name in URL does not match name in Eviction object: {req.name} != {name}"
            raise ApiStatus(400, "BadRequest", message)
        pod = Request("delete", req.resource, req.namespace, req.name, "")
        self.delete(pod, body.get("deleteOptions") or {}, dry_run)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def stored_objects(self) -> "list[dict]":  # quoted: `list` is a method here
        """Every stored Role, ClusterRole and binding."""
        objects: list[dict] = []
        for plural in ("clusterroles", "clusterrolebindings", "roles", "rolebindings"):
            res = resources.lookup(
                "rbac.authorization.k8s.io", "v1", plural, plural in ("roles", "rolebindings")
            )
            objects += self.list(res, "")[0]
        return objects

    def stored_policy(self) -> rbac.Policy:
        return rbac.Policy.from_objects(self.stored_objects())

    # ---- bootstrap ----

    def bootstrap(self) -> None:
        """Create the system namespaces and the ``kubernetes`` Service, retrying until etcd answers."""
        ns_res = resources.lookup("", "v1", "namespaces", False)
        svc_res = resources.lookup("", "v1", "services", True)
        network = ipaddress.ip_network(str(self.flags.get("service-cluster-ip-range", "10.0.0.0/24")))
        service = {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": "kubernetes",
                "labels": {"component": "apiserver", "provider": "kubernetes"},
            },
            "spec": {
                "type": "ClusterIP",
                "clusterIP": str(network[1]),
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
            },
        }
        while True:
            try:
                for name in SYSTEM_NAMESPACES:
                    if self.etcd.get(self._ns_key(name)) is None:
                        ns_obj = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                        if self.create(ns_res, "", ns_obj):
                            log.info(f"created namespace {name}")
                if self.etcd.get(svc_res.key(self.prefix, "default", "kubernetes")) is None:
                    self.create(svc_res, "default", json.loads(json.dumps(service)))
                self._bootstrap_policy()
                break
            except ApiStatus as exc:
                if exc.body["reason"] != "AlreadyExists":
                    raise
            except EtcdError as exc:
                log.error(f"storage not ready: {exc}")
                time.sleep(2)
        self.ready.set()
        log.info("bootstrap done: system namespaces exist")

    def _bootstrap_policy(self) -> None:
        """Kubernetes' own bootstrap Roles, ClusterRoles and bindings, created where missing (one list of
        each kind, then only the creates)."""
        stored = {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in self.stored_objects()
        }
        for obj in rbac.bootstrap_objects():
            namespace = obj["metadata"].get("namespace", "")
            if (obj["kind"], namespace, obj["metadata"]["name"]) in stored:
                continue
            res = resources.lookup(
                "rbac.authorization.k8s.io", "v1", obj["kind"].lower() + "s", bool(namespace)
            )
            try:
                self.create(res, namespace, json.loads(json.dumps(obj)))
            except ApiStatus as exc:  # another apiserver of the cluster made it first
                if exc.body["reason"] != "AlreadyExists":
                    raise

    def review(self, body: object) -> dict:
        """A SubjectAccessReview: what the authorizer answers for the user and request in its spec."""
        spec = (body or {}).get("spec") if isinstance(body, dict) else None
        if not isinstance(spec, dict) or not spec.get("user"):
            raise ApiStatus(422, "Invalid", "SubjectAccessReview is invalid: spec.user: Required value")
        groups = tuple(spec.get("groups") or ())
        res, path = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if isinstance(res, dict):
            attrs = rbac.Attributes(
                spec["user"],
                groups,
                res.get("verb", ""),
                res.get("group", ""),
                res.get("resource", ""),
                res.get("subresource", ""),
                res.get("namespace", ""),
                res.get("name", ""),
            )
        elif isinstance(path, dict):
            attrs = rbac.Attributes(spec["user"], groups, path.get("verb", ""), path=path.get("path", ""))
        else:
            raise ApiStatus(
                422,
                "Invalid",
                "SubjectAccessReview is invalid: exactly one of resourceAttributes "
                "or nonResourceAttributes must be set",
            )
        allowed = self.authorizer.decide(attrs)
        reason = "" if allowed else "no RBAC policy matched"
        return {**body, "status": {"allowed": allowed, "reason": reason}}

    def health(self, path: str, verbose: bool) -> tuple[int, str]:
        checks = [("ping", None)]
        if not path.startswith("/livez"):
            checks.append(("etcd", None))
        if path.startswith("/readyz"):
            checks.append(("bootstrap-namespaces", None))
        lines, failed = [], False
        for name, _ in checks:
            ok = True
            if name == "etcd":
                try:
                    self.etcd.revision()
                except EtcdError as exc:
                    log.error(f"{path} check etcd failed: {exc}")
                    ok = False
            elif name == "bootstrap-namespaces":
                ok = self.ready.is_set()
            failed |= not ok
            lines.append(f"[+]{name} ok" if ok else f"[-]{name} failed: reason withheld")
        kind = path.strip("/").split("/")[0]
        if failed:
            return 500, "\n".join(lines) + f"\n{kind} check failed\n"
        if verbose:
            return 200, "\n".join(lines) + f"\n{kind} check passed\n"
        return 200, "ok"

    def audit(self, user: User | None, verb: str, uri: str, code: int, source: str, agent: str) -> None:
        if not self.audit_path:
            return
        stamp = objects.now_micro()
        event = {
            "kind": "Event",
            "apiVersion": "audit.k8s.io/v1",
            "level": "Metadata",
            "auditID": str(uuid.uuid4()),
            "stage": "ResponseComplete",
            "requestURI": uri,
            "verb": verb,
            "user": {"username": user.name, "groups": list(user.groups)} if user else {},
            "sourceIPs": [source],
            "userAgent": agent,
            "responseStatus": {"metadata": {}, "code": code},
            "requestReceivedTimestamp": stamp,
            "stageTimestamp": stamp,
        }
        line = json.dumps(event) + "\n"
        with self._audit_lock:
            if self.audit_path == "-":
                sys.stdout.write(line)
                sys.stdout.flush()
                return
            with open(str(self.audit_path), "a", encoding="utf-8") as handle:
                handle.write(line)


def _selector(query: dict, kind: str) -> Callable[[dict], bool]:
    """The labelSelector and fieldSelector of a list or watch, as one predicate."""
    tests = []
    if query.get("labelSelector", [""])[0]:
        tests.append(resources.label_matcher(query["labelSelector"][0]))
    if query.get("fieldSelector", [""])[0]:
        tests.append(resources.field_matcher(query["fieldSelector"][0], kind))
    return lambda obj: all(test(obj) for test in tests)


def _parse_resource_path(parts: list[str]) -> tuple[str, str, list[str]] | None:
    """(group, version, rest) of a resource path, or None for discovery and non-resource paths."""
    if len(parts) >= 3 and parts[0] == "api" and parts[1] == "v1":
        return "", "v1", parts[2:]
    if len(parts) >= 4 and parts[0] == "apis":
        return parts[1], parts[2], parts[3:]
    return None


_VERB = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


class Handler(serve.Handler):
    server: "serve.Server"
    api: ApiServer

    def _reply(self, code: int, body: dict) -> None:
        self._code = code
        self.send(code, json.dumps(body).encode(), "application/json")

    def _body(self, raw: bytes) -> object:
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiStatus(
                400, "BadRequest", "the body of the request could not be decoded as JSON"
            ) from None

    def _dispatch(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = urllib.parse.unquote(url.path) or "/"
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        self._code, self._user = 0, None
        # Read the whole body first, so an early error answer leaves the keep-alive stream clean.
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        verb = self.command.lower()
        try:
            peer = serve.peer_identity(self.connection)
            user = User(*peer) if peer else self._bearer()
            user = _with_controller_credentials(user, self.headers.get("User-Agent") or "")
            if user is None:
                if not self.api.anonymous:
                    raise ApiStatus(401, "Unauthorized", "Unauthorized")
                user = User("system:anonymous", ("system:unauthenticated",))
            self._user = user
            parts = [p for p in path.split("/") if p]
            located = _parse_resource_path(parts)
            if located is None:
                verb = self.command.lower()
                if not self.api.authorizer.allowed(user, verb, path, None):
                    message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
                    raise ApiStatus(403, "Forbidden", message)
                self._non_resource(path, parts, query)
                return
            req = self._request(*located)
            req.body = self._body(raw)
            if req.verb == "list" and query.get("watch", [""])[0] in ("1", "true"):
                req.verb = "watch"
            verb = req.verb
            if not self.api.authorizer.allowed(user, req.verb, path, req):
                raise self._forbidden(user, req)
            self._resource(req, query)
        except ApiStatus as exc:
            self._reply(exc.body["code"], exc.body)
        except EtcdError as exc:
            log.error(f"{self.command} {path}: {exc}")
            self._reply(500, objects.status(500, "InternalError", f"Internal error occurred: {exc}"))
        finally:
            self.api.audit(
                self._user,
                verb,
                self.path,
                self._code,
                self.client_address[0],
                self.headers.get("User-Agent", ""),
            )

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _dispatch

    def _bearer(self) -> User | None:
        """The user a bearer token stands for; a token nobody vouches for is refused, not anonymous."""
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        found = self.api.token_webhook.authenticate(token.strip()) if self.api.token_webhook else None
        if found is None:
            raise ApiStatus(401, "Unauthorized", "Unauthorized")
        return User(*found)

    def _forbidden(self, user: User, req: Request) -> ApiStatus:
        res = req.resource
        what = f"{res.plural}/{req.subresource}" if req.subresource else res.plural
        subject = f'{res.qualified} "{req.name}"' if req.name else res.qualified
        scope = f'in the namespace "{req.namespace}"' if req.namespace else "at the cluster scope"
        message = (
            f'{subject} is forbidden: User "{user.name}" cannot {req.verb} resource "{what}" '
            f'in API group "{res.group}" {scope}'
        )
        return ApiStatus(
            403, "Forbidden", message, {"name": req.name, "group": res.group, "kind": res.plural}
        )

    def _request(self, group: str, version: str, rest: list[str]) -> Request:
        namespace = ""
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        res = resources.lookup(group, version, plural, bool(namespace))
        if res is None or (namespace and not res.namespaced) or (sub and sub not in res.subresources):
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if res.namespaced and not namespace and (name or self.command != "GET"):
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if self.command == "GET":
            verb = "get" if name else "list"
        else:
            verb = _VERB.get(self.command, "")
            creates_on_object = verb == "create" and sub == "eviction"  # POST pods/NAME/eviction
            if not verb or ((verb == "create") == bool(name) and not creates_on_object):
                raise ApiStatus(405, "MethodNotAllowed", f"{self.command} is not supported on this path")
        return Request(verb, res, namespace, name, sub)

    def _non_resource(self, path: str, parts: list[str], query: dict) -> None:
        if re.match(r"^/(healthz|livez|readyz)/?$", path) or re.match(
            r"^/(healthz|livez|readyz)/(ping|etcd)$", path
        ):
            if self.command != "GET":
                raise ApiStatus(405, "MethodNotAllowed", f"{self.command} is not supported")
            code, text = self.api.health(path, "verbose" in query)
            self._code = code
            self.send(code, text.encode())
            return
        if self.command != "GET":
            raise ApiStatus(405, "MethodNotAllowed", f"{self.command} is not supported on this path")
        if path == "/version":
            body = resources.version_info()
        elif parts == ["api"]:
            body = resources.api_versions(self.api.address)
        elif parts == ["apis"]:
            body = resources.api_group_list()
        elif len(parts) == 2 and parts[0] == "api":
            body = resources.resource_list("", parts[1]) if parts[1] == "v1" else None
        elif len(parts) == 2 and parts[0] == "apis":
            body = resources.api_group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            body = resources.resource_list(parts[1], parts[2])
        elif parts == ["openapi", "v3"]:
            body = resources.openapi_v3_root()
        elif len(parts) >= 4 and parts[:2] == ["openapi", "v3"]:
            gv = parts[3:] if parts[2] == "apis" else ["", *parts[3:]]
            body = (
                resources.openapi_v3_group_version(*gv)
                if len(gv) == 2 and parts[2] in ("api", "apis")
                else None
            )
        elif parts == ["openapi", "v2"]:
            if "protobuf" in self.headers.get("Accept", ""):
                # An empty message is a valid, empty openapi_v2.Document.
                self._code = 200
                self.send(200, b"", "application/octet-stream")
                return
            body = resources.openapi_v2()
        elif parts == []:
            body = {"paths": ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]}
        else:
            body = None
        if body is None:
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        self._reply(200, body)

    def _resource(self, req: Request, query: dict) -> None:
        res = req.resource
        dry_run = bool(query.get("dryRun"))
        if req.verb in ("list", "watch"):
            try:
                selected = _selector(query, res.kind)
            except resources.SelectorError as exc:
                raise ApiStatus(400, "BadRequest", str(exc)) from None
            if req.verb == "watch":
                self._watch(req, query, selected)
                return
            items, revision = self.api.list(res, req.namespace)
            self._objects(res, list(filter(selected, items)), str(revision), query, single=False)
            return
        if req.verb == "get":
            obj, _ = self.api.read(res, req.namespace, req.name)
            self._objects(res, [obj], obj["metadata"]["resourceVersion"], query, single=True)
            return
        body = req.body
        if req.subresource == "eviction":
            self._reply(201, self.api.evict(req, body, dry_run))
            return
        if req.verb == "delete":
            if res.plural == "namespaces" and req.name in SYSTEM_NAMESPACES[:3]:
                message = f'namespaces "{req.name}" is forbidden: this namespace may not be deleted'
                raise ApiStatus(403, "Forbidden", message)
            self._reply(200, self.api.delete(req, body if isinstance(body, dict) else {}, dry_run))
            return
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if res.plural == "subjectaccessreviews":
            self._reply(201, self.api.review(body))
            return
        if req.verb == "patch" and content_type == "application/apply-patch+yaml":
            self._apply(req, query, body, dry_run)
            return
        if req.verb == "patch":
            if content_type not in (
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
                "application/json-patch+json",
            ):
                raise ApiStatus(
                    415,
                    "UnsupportedMediaType",
                    f'the body of the request was in an unknown format: "{content_type}"',
                )
            if content_type == "application/strategic-merge-patch+json" and res.generic:
                message = f"strategic merge patch is not supported for {res.qualified}"
                raise ApiStatus(415, "UnsupportedMediaType", message)
            self._reply(200, self.api.patch(req, content_type, body, dry_run))
            return
        if content_type != "application/json":
            raise ApiStatus(
                415,
                "UnsupportedMediaType",
                f'the body of the request was in an unknown format: "{content_type}"',
            )
        if not isinstance(body, dict):
            raise ApiStatus(400, "BadRequest", "the body of the request must be a JSON object")
        expected = res.group_version
        if body.get("apiVersion", expected) != expected:
            message = (
                f"the API version in the data ({body['apiVersion']}) does not match "
                f"the expected API version ({expected})"
            )
            raise ApiStatus(400, "BadRequest", message)
        if not res.generic and body.get("kind", res.kind) != res.kind:
            message = f"the kind in the data ({body['kind']}) does not match the expected kind ({res.kind})"
            raise ApiStatus(400, "BadRequest", message)
        body.setdefault("apiVersion", expected)
        body.setdefault("kind", res.kind)
        if req.verb == "create":
            self._reply(201, self.api.create(res, req.namespace, body, dry_run))
        else:
            self._reply(200, self.api.update(req, body, dry_run))

    def _apply(self, req: Request, query: dict, body: object, dry_run: bool) -> None:
        """Server-side apply, simplified: create when missing, else merge what was sent (no managed
        fields, so no conflicts between managers). Sent as JSON, which YAML includes."""
        if not query.get("fieldManager", [""])[0]:
            message = (
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                "is required for apply patch"
            )
            raise ApiStatus(422, "Invalid", message)
        if not isinstance(body, dict):
            raise ApiStatus(400, "BadRequest", "the body of an apply patch must be an object")
        try:
            self.api.read(req.resource, req.namespace, req.name)
        except ApiStatus as exc:
            if exc.body["reason"] != "NotFound":
                raise
            self._reply(201, self.api.create(req.resource, req.namespace, body, dry_run))
            return
        self._reply(200, self.api.patch(req, "application/merge-patch+json", body, dry_run))

    def _watch(self, req: Request, query: dict, selected: Callable[[dict], bool]) -> None:
        """A watch, made by polling etcd: the changes between polls are sent as watch events.

        Events between two polls are coalesced (a watcher sees the latest state, not every step), and
        a watch from an old resourceVersion starts from the objects changed since then."""
        timeout = float(query.get("timeoutSeconds", ["1800"])[0] or 1800)
        since = query.get("resourceVersion", [""])[0]
        since_rev = int(since) if since.isdigit() else 0
        as_table = "as=Table" in self.headers.get("Accept", "")
        include = query.get("includeObject", ["Metadata"])[0]
        items, revision = self.api.list(req.resource, req.namespace)
        seen: dict[tuple[str, str], dict] = {}
        self._code = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def emit(kind: str, obj: dict) -> None:
            if as_table:
                obj = resources.table(req.resource.kind, [obj], obj["metadata"]["resourceVersion"], include)
            data = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        deadline = time.monotonic() + timeout
        try:
            while True:
                current = {
                    (o["metadata"].get("namespace", ""), o["metadata"]["name"]): o
                    for o in items
                    if selected(o)
                }
                for key, obj in current.items():
                    old = seen.get(key)
                    version = int(obj["metadata"]["resourceVersion"])
                    if old is None and (not since_rev or version > since_rev):
                        emit("ADDED", obj)
                    elif (
                        old is not None
                        and old["metadata"]["resourceVersion"] != obj["metadata"]["resourceVersion"]
                    ):
                        emit("MODIFIED", obj)
                for key, old in seen.items():
                    if key not in current:
                        gone = json.loads(json.dumps(old))
                        gone["metadata"]["resourceVersion"] = str(revision)
                        emit("DELETED", gone)
                seen = current
                if time.monotonic() >= deadline:
                    break
                time.sleep(_WATCH_POLL)
                items, revision = self.api.list(req.resource, req.namespace)
            self.wfile.write(b"0\r\n\r\n")
        except EtcdError as exc:
            log.error(f"watch {self.path}: {exc}")
            self.close_connection = True
        except OSError:
            self.close_connection = True  # the watcher went away

    def _objects(self, res: Resource, items: list[dict], revision: str, query: dict, single: bool) -> None:
        accept = self.headers.get("Accept", "")
        if "as=Table" in accept:
            include = query.get("includeObject", ["Metadata"])[0]
            self._reply(200, resources.table(res.kind, items, revision, include))
        elif single:
            self._reply(200, items[0])
        else:
            kind = f"{items[0]['kind']}List" if res.generic and items else f"{res.kind}List"
            self._reply(
                200,
                {
                    "kind": kind,
                    "apiVersion": res.group_version,
                    "metadata": {"resourceVersion": revision},
                    "items": items,
                },
            )


def run(flags: Flags) -> None:
    validate(flags)
    api = ApiServer(flags)
    if api.audit_path and api.audit_path != "-":
        os.makedirs(os.path.dirname(str(api.audit_path)) or ".", exist_ok=True)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(str(flags.get("tls-cert-file")), str(flags.get("tls-private-key-file")))
    if flags.get("client-ca-file"):
        tls.load_verify_locations(str(flags.get("client-ca-file")))
        tls.verify_mode = ssl.CERT_OPTIONAL

    handler = type("ApiHandler", (Handler,), {"api": api})
    address = (str(flags.get("bind-address", "0.0.0.0")), int(flags.get("secure-port", 6443)))
    server = serve.start(address, handler, tls)
    log.info(f"Serving securely on {address[0]}:{server.server_address[1]}")
    api.bootstrap()
    threading.Event().wait()
