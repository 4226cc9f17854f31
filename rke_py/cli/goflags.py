"""RKE's command lines as rke-py reads them. RKE parses with Go's flag package, which also takes a long flag
after one dash (`-config x`) and a boolean with a value (`--update-only=false`); click takes neither, so a
pipeline's `rke ...` line is rewritten into click's syntax first, flag by flag of the command it names."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import click

GO_TRUE = {"1", "t", "true"}  # strconv.ParseBool, case-folded
GO_FALSE = {"0", "f", "false"}


def normalize(args: Sequence[str], root: click.Group) -> list[str]:
    """`args` with Go's flag forms turned into click's: `-name` → `--name` where the command has such a
    long option, `--flag=true` → `--flag` and `--flag=false` → nothing for boolean flags. Everything else
    is left for click, which reports it."""
    return list(_rewrite(list(args), root))


def _rewrite(args: list[str], command: click.Command) -> Iterator[str]:
    ctx = click.Context(command, info_name=command.name, resilient_parsing=True)
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg == "--":
            yield from args[index - 1 :]
            return
        if not arg.startswith("-") or arg == "-":
            sub = command.get_command(ctx, arg) if isinstance(command, click.Group) else None
            yield arg
            if sub is not None:
                yield from _rewrite(args[index:], sub)
                return
            continue
        name, equals, value = arg.lstrip("-").partition("=")
        option = _long_option(command, f"--{name}") if len(name) > 1 else None
        if option is None:
            yield arg
            continue
        if option.is_flag and equals:
            if value.lower() in GO_TRUE:
                yield f"--{name}"
            elif value.lower() not in GO_FALSE:
                yield arg  # click says what is wrong with it
            continue
        yield f"--{name}{equals}{value}"
        if not option.is_flag and not equals and index < len(args):
            yield args[index]  # the value, whatever it looks like (Go's flag package takes it as is)
            index += 1


def _long_option(command: click.Command, flag: str) -> click.Option | None:
    return next(
        (p for p in command.params if isinstance(p, click.Option) and flag in (*p.opts, *p.secondary_opts)),
        None,
    )
