"""Hostile cluster.yml input: the check every input must pass, and the mutations that make such input.

`survives(text)` runs the path a user's file takes before any host is touched (read, validate, certificates,
plan, RBAC objects, state file, the text of every message). Any exception that is not the project's own
is a crash. The property test (tests/unit/test_config_hostile.py) and the time-bounded fuzzer
(`python -m tests.fuzzing --minutes 10`) share it.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import time
import traceback
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import rsa

from rke_py.config import load_text
from rke_py.config.yamlread import MAX_BYTES, YamlSyntaxError, decode
from rke_py.errors import ConfigError, Problem, RkePyError
from rke_py.pki import bundle as pki_bundle
from rke_py.pki import certs
from rke_py.plan import build_plan
from rke_py.plan.rbac import rbac_objects
from rke_py.state import ClusterState, State, rke_config_json, state_to_json

ROOT = Path(__file__).parents[1]
SEEDS = [ROOT / "cluster.yml.example", *sorted((ROOT / "tests" / "fixtures" / "config").rglob("*.yml"))]
# Pieces an attacker or a careless editor puts into values.
HOSTILE = [
    "",
    "0",
    "-1",
    "--5",
    "²",
    "⑤",
    "\uff11\uff12",  # full-width digits
    "99999999999999999999999999",
    "1" * 5000,
    "0.0.0.0",
    "::",
    "127.0.0.1",
    "2001:db8::11",
    "2001:0db8:0:0::11",
    "fe80::1%eth0",
    "a;touch /tmp/owned",
    "$(id)",
    "`id`",
    "a\nb",
    "\x1b[31mred",
    "\x00",
    "../../etc/passwd",
    "/abs/path",
    "relative/path",
    "-oProxyCommand=id",
    "https://registry.example.com",
    "image name:tag",
    "é.example.com",
    "*.example.com",
    "10.43.0.0/32",
    "10.43.0.0/16,10.44.0.0/16",
    "2001:db8::/64",
    "!!binary aGVsbG8=",
    "!!int 45x",
    "!!timestamp 2024-13-45",
    "!!bool maybe",
    "!!omap [{a: 1}]",
    "!foo bar",
    "2024-01-02",
    "*undefined",
    "&a [*a]",
    "{a: [1, {b: 2}]}",
    "[x, [y, [z]]]",
    ".nan",
    "~",
    "yes",
    "0x1F",
    "key=value",
    "a:b:c:d",
    "NoSchedule",
]


@cache
def _one_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@contextlib.contextmanager
def fast_keys() -> Iterator[None]:
    """Every certificate shares one RSA key: making keys is what makes planning slow, not what can crash."""
    original = certs.new_key
    certs.new_key = _one_key
    try:
        yield
    finally:
        certs.new_key = original


def survives(text: str | bytes) -> None:
    """Run `text` through everything `rke-py plan` does before it connects; raise if it crashes.

    Call inside `fast_keys()`. ConfigError is the expected answer to bad input; every problem it carries must
    print as one line of printable text with a position.
    """
    try:
        if isinstance(text, bytes):
            text = decode(text[: MAX_BYTES + 1], "cluster.yml")
        loaded = load_text(text, "cluster.yml")
    except YamlSyntaxError as exc:
        _check_problems(exc.problems, required=True)
        return
    except ConfigError as exc:
        _check_problems(exc.problems, required=True)
        return
    _check_problems(loaded.warnings, required=False)
    try:
        bundle = pki_bundle.build_bundle(loaded.config)
        build_plan(loaded.config, bundle)
        rbac_objects(loaded.config)
        state_to_json(ClusterState(desired=State(rke_config_json(loaded.config), bundle)))
    except RkePyError as exc:  # a valid file that cannot plan is itself a bug: it should not have passed
        raise AssertionError(f"valid file failed to plan: {exc}") from exc


def _check_problems(problems: list[Problem], required: bool) -> None:
    assert problems or not required, "a ConfigError without a problem"
    for problem in problems:
        line = str(problem)
        assert "\n" not in line and "\r" not in line, f"message spans lines: {line!r}"
        assert line.isprintable(), f"message has control characters: {line!r}"


# --- mutations ---------------------------------------------------------------------------------------------


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits: a value replaced, lines copied, deleted or re-indented, bytes changed."""
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng)
    return text


def _replace_value(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    candidates = [i for i, line in enumerate(lines) if ":" in line or line.lstrip().startswith("- ")]
    if not candidates:
        return text
    index = rng.choice(candidates)
    line = lines[index]
    cut = line.index(":") + 1 if ":" in line else line.index("-") + 1
    value = rng.choice(HOSTILE)
    quoted = rng.random() < 0.3
    lines[index] = line[:cut] + " " + (repr(value).replace("'", '"') if quoted else value)
    return "\n".join(lines) + "\n"


def _duplicate_line(text: str, rng: random.Random) -> str:
    lines = text.splitlines() or [""]
    index = rng.randrange(len(lines))
    lines.insert(index, lines[index])
    return "\n".join(lines) + "\n"


def _delete_line(text: str, rng: random.Random) -> str:
    lines = text.splitlines()
    if lines:
        del lines[rng.randrange(len(lines))]
    return "\n".join(lines) + "\n"


def _reindent(text: str, rng: random.Random) -> str:
    lines = text.splitlines() or [""]
    index = rng.randrange(len(lines))
    lines[index] = " " * rng.choice((0, 1, 2, 4, 6)) + lines[index].lstrip()
    return "\n".join(lines) + "\n"


def _flip_bytes(text: str, rng: random.Random) -> str:
    chars = list(text) or [" "]
    for _ in range(rng.randint(1, 4)):
        chars[rng.randrange(len(chars))] = chr(
            rng.choice((0, 9, 10, 27, 35, 38, 42, 58, 91, 123, 0x2028, 0xFEFF))
        )
    return "".join(chars)


def _insert_key(text: str, rng: random.Random) -> str:
    lines = text.splitlines() or [""]
    index = rng.randrange(len(lines))
    indent = len(lines[index]) - len(lines[index].lstrip())
    key = rng.choice(
        ["address", "internal_address", "user", "port", "labels", "taints", "extra_binds", "image"]
    )
    lines.insert(index, " " * indent + f"{key}: {rng.choice(HOSTILE)}")
    return "\n".join(lines) + "\n"


MUTATIONS = (
    _replace_value,
    _replace_value,
    _duplicate_line,
    _delete_line,
    _reindent,
    _flip_bytes,
    _insert_key,
)


def seeds() -> list[str]:
    return [path.read_bytes().decode("utf-8", errors="replace") for path in SEEDS]


def main() -> None:
    parser = argparse.ArgumentParser(description="Mutation fuzzer for cluster.yml: prints each crash found.")
    parser.add_argument("--minutes", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    texts = seeds()
    end = time.monotonic() + args.minutes * 60
    tried = crashes = 0
    places: dict[str, int] = {}
    with fast_keys():
        while time.monotonic() < end:
            text = mutate(rng.choice(texts), rng)
            tried += 1
            try:
                survives(text)
            except Exception as exc:
                crashes += 1
                place = traceback.extract_tb(exc.__traceback__)[-1]
                where = f"{type(exc).__name__} at {Path(place.filename).name}:{place.lineno}"
                if where not in places:
                    print(f"--- {where}: {exc!r:.300}\n{text[:2000]}")
                places[where] = places.get(where, 0) + 1
    print(f"inputs tried: {tried}, crashing inputs: {crashes}, places: {len(places)}")
    for where, count in sorted(places.items(), key=lambda item: -item[1]):
        print(f"  {count:6d}  {where}")


if __name__ == "__main__":
    main()
