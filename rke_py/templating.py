"""The one jinja2 environment for rke-py's templates (`rke_py/templates/`), and the filters they share."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import cache

import jinja2


def quote(value: object) -> str:
    """A JSON string, also a valid YAML double-quoted scalar: a quote in a name cannot break a file."""
    return json.dumps(str(value), ensure_ascii=False)


def hostport(host: str, port: int) -> str:
    """`host:port`, with IPv6 addresses in brackets as nginx and URLs want them."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rke_py", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(quote=quote, hostport=hostport)
    return env


def template(name: str, filters: Mapping[str, Callable] | None = None) -> jinja2.Template:
    """Template `name`; `filters` are added for templates that need their own (e.g. cluster.yml's)."""
    env = _environment()
    env.filters.update(filters or {})
    return env.get_template(name)
