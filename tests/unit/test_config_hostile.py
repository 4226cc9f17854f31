"""Hostile input never crashes rke-py: whatever the file holds, the answer is exit 0 or exit 2 with findings.

Property tests (hypothesis, bounded to a few seconds) feed mutated fixtures, random YAML documents and random
bytes through everything `plan` does before it connects (tests/fuzzing.py) and through the CLI itself. The
examples below them pin the limits of the YAML reader and what reaches a host for IPv6 clusters.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from rke_py.cli import main
from rke_py.config import load, load_text, yamlread
from rke_py.config.yamlread import MAX_BYTES
from rke_py.errors import ConfigError, ExitStatus
from rke_py.pki.bundle import build_bundle
from rke_py.plan import build_plan
from rke_py.state import ClusterState, State, rke_config_json, state_from_json, state_to_json
from tests import fuzzing

SEEDS = fuzzing.seeds()
KEYS = [
    "nodes", "address", "internal_address", "user", "role", "port", "hostname_override", "docker_socket",
    "labels", "taints", "key", "value", "effect", "services", "etcd", "kube-api", "kube-controller",
    "kubelet", "kubeproxy", "scheduler", "extra_args", "extra_binds", "extra_env", "network", "plugin",
    "options", "mtu", "dns", "provider", "ingress", "system_images", "private_registries", "url",
    "is_default", "prefix_path", "kubernetes_version", "bastion_host", "authentication", "sans",
    "cluster_cidr", "service_cluster_ip_range", "cluster_dns_server", "backup_config", "<<",
]  # fmt: skip
SCALARS = st.one_of(
    st.sampled_from(fuzzing.HOSTILE),
    st.text(max_size=20),
    st.integers(),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), st.text(max_size=10)), inner, max_size=5),
    ),
    max_leaves=30,
)
NODES = st.lists(st.dictionaries(st.sampled_from(KEYS), SCALARS, max_size=6), max_size=3)
FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def _fast_keys():
    with fuzzing.fast_keys():
        yield


def dump(document: object) -> str:
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump(document, out)
    return out.getvalue()


@FAST
@given(seed=st.sampled_from(SEEDS), rng=st.randoms(use_true_random=False))
def test_mutated_fixtures_never_crash(seed: str, rng: random.Random):
    fuzzing.survives(fuzzing.mutate(seed, rng))


@FAST
@given(
    nodes=st.lists(st.dictionaries(st.sampled_from(KEYS), SCALARS, max_size=6), max_size=3), rest=DOCUMENTS
)
def test_random_documents_never_crash(nodes: list[dict[str, object]], rest: object):
    document = {"nodes": nodes, **(rest if isinstance(rest, dict) else {"cluster_name": rest})}
    fuzzing.survives(dump(document))


@FAST
@given(data=st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_random_bytes_never_crash(data: bytes):
    fuzzing.survives(data)


@settings(max_examples=25, deadline=None)
@given(seed=st.sampled_from(SEEDS), rng=st.randoms(use_true_random=False))
def test_the_cli_answers_0_or_2_never_1(
    seed: str, rng: random.Random, tmp_path_factory: pytest.TempPathFactory
):
    path = tmp_path_factory.mktemp("hostile") / "cluster.yml"
    path.write_text(fuzzing.mutate(seed, rng), encoding="utf-8")
    for command in (["validate"], ["plan", "--offline"]):
        with pytest.raises(SystemExit) as exited:
            main([*command, "--config", str(path)])
        assert exited.value.code in (ExitStatus.OK, ExitStatus.CONFIG), command


def _read(text: str, fast: object) -> object:
    """What parse answers with `fast` as libyaml's reading: (data, positions) or the problems."""
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(yamlread, "_read_libyaml", fast)
            return yamlread.parse(text, "cluster.yml")
    except yamlread.YamlSyntaxError as exc:
        return [str(p) for p in exc.problems]


def _agree(text: str) -> None:
    """What ruamel.yaml reads, libyaml's reading reads alike; what ruamel.yaml refuses, libyaml refuses with
    ruamel.yaml's words, or reads it (libyaml is lenient with a few malformed headers and comments)."""
    fast, ruamel = _read(text, yamlread._read_libyaml), _read(text, lambda text, source: None)
    assert fast == ruamel or (isinstance(ruamel, list) and isinstance(fast, tuple))


TRICKY = [
    "a: &x {b: 1, c: [2, 3]}\nd: *x\ne: {<<: *x, b: 4}\nf:\n  <<: [*x]\n",
    "a: !!int 07\nb: !!str 5\nc: ! 5\nd: !!float 1\ne: !!bool yes\nf: !!map {}\ng: !!seq []\nh: !x 1\n",
    "? [a, b]\n: c\n? {d: 1}\n: e\n",
    "a: |\n  x\n   y\nb: >-\n  folded\n  text\nc: 'quoted ''x'''\nd: \"\\u00e9\\t\"\n",
    "héllo: wörld\nnodes: [{address: 1.2.3.4, role: [etcd]}]\n",
    "a: yes\nb: 0o17\nc: 0x1F\nd: .inf\ne: ~\nf: 2020-01-01\ng: 1_000\nh: -.5e3\ni: True\n",
    "a: &x 1\nb: &x 2\nc: *x\n",
    "",
    "# only a comment\n",
    "- [[[[]]]]\n- " + "[" * 70 + "]" * 70 + "\n",
    "a: *undefined\n",
    "a: 1\n---\nb: 2\n",
    "%YAML 1.1\n---\na: yes\n",
    "a: [1, 2\n",
    "a:\tb\n",
    "a: \x07\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_libyaml_reads_as_ruamel_yaml_does(text: str):
    _agree(text)


@FAST
@given(seed=st.sampled_from(SEEDS), rng=st.randoms(use_true_random=False))
def test_libyaml_reads_mutated_fixtures_as_ruamel_yaml_does(seed: str, rng: random.Random):
    _agree(fuzzing.mutate(seed, rng))


@FAST
@given(rest=DOCUMENTS)
def test_libyaml_reads_random_documents_as_ruamel_yaml_does(rest: object):
    _agree(dump(rest))


@FAST
@given(text=st.text(alphabet=st.sampled_from(list("ab:-[]{},?&*!#|>'\"\n \\%@`\x85\u2028é")), max_size=60))
def test_libyaml_reads_random_text_as_ruamel_yaml_does(text: str):
    _agree(text)


# --- the reader's limits ---------------------------------------------------------------------------------


def test_a_file_larger_than_the_limit_is_refused_unread(tmp_path: Path):
    path = tmp_path / "cluster.yml"
    path.write_bytes(b"# " + b"x" * MAX_BYTES)
    with pytest.raises(ConfigError) as error:
        load(path)
    assert "the file is larger than 1024 KiB" in str(error.value)


def test_an_endless_file_is_refused_not_read_forever():
    with pytest.raises(ConfigError) as error:
        load("/dev/zero")
    assert "the file is larger than" in str(error.value)


def test_dates_and_yes_stay_text_so_the_state_file_can_be_written():
    text = (
        "nodes:\n  - {address: 192.0.2.11, user: ubuntu, role: [etcd, controlplane, worker]}\n"
        "ingress:\n  provider: nginx\n  options: {when: 2024-01-01 10:00:00}\n"
        "  extra_args: {enable-ssl-passthrough: yes, since: 2024-01-01}\n"
    )
    config = load_text(text).config
    assert config.ingress.options == {"when": "2024-01-01 10:00:00"}
    state = ClusterState(desired=State(rke_config_json(config), build_bundle(config)))
    again = state_from_json(state_to_json(state))
    assert again.desired.rke_config["ingress"]["options"]["when"] == "2024-01-01 10:00:00"
    assert json.loads(state_to_json(state))["desiredState"]["rkeConfig"]["ingress"]["extraArgs"]["since"] == (
        "2024-01-01"
    )


def test_an_anchor_merged_into_a_node_keeps_working():
    text = (
        "x-node: &node {user: ubuntu, role: [etcd, controlplane, worker]}\n"
        "nodes:\n  - <<: *node\n    address: 192.0.2.11\n"
    )
    loaded = load_text(text)
    assert loaded.config.nodes[0].user == "ubuntu"
    assert [str(w) for w in loaded.warnings] == [
        'cluster.yml:1:1: warning: unknown key "x-node" at the top level is ignored'
        ' — remove it or check the spelling (did you mean "nodes"?)'
    ]


# --- IPv6 wherever an address becomes a URL --------------------------------------------------------------

IPV6 = """\
nodes:
  - {address: "2001:db8::11", hostname_override: node1, user: ubuntu, role: [etcd, controlplane]}
  - {address: "2001:db8::12", hostname_override: node2, user: ubuntu, role: [worker]}
services:
  kube-api: {service_cluster_ip_range: "fd00:43::/112"}
  kube-controller: {cluster_cidr: "fd00:42::/56"}
  kubelet: {cluster_dns_server: "fd00:43::a"}
"""


def test_ipv6_addresses_are_bracketed_in_every_url_a_host_receives():
    config = load_text(IPV6).config
    plan = build_plan(config, build_bundle(config))
    words = [w for n in plan.nodes for c in n.containers for w in (*c.entrypoint, *c.command, *c.env)]
    words += [line for n in plan.nodes for f in n.files for line in f.content.decode().splitlines()]
    urls = [w for w in words if "://" in w and "2001:db8" in w]
    assert "--etcd-servers=https://[2001:db8::11]:2379" in urls
    assert "--initial-cluster=etcd-node1=https://[2001:db8::11]:2380" in urls
    assert all("://2001" not in url and "=2001:db8::11:" not in url for url in urls), urls
    health = next(c.health for n in plan.nodes for c in n.containers if c.name == "etcd")
    assert health is not None and health.url == "https://[2001:db8::11]:2379/health"
    kubeconfigs = [line for line in words if line.strip().startswith("server:")]
    assert kubeconfigs and all("[" in line or "127.0.0.1" in line for line in kubeconfigs), kubeconfigs
