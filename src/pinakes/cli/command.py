"""The typed seam between argparse and the commands.

A command declares what it parses as a frozen dataclass whose fields are its parser's `dest`s, and
registers `Command(TheArgs, run)` as the parser's `run` default. `Command` builds that dataclass from
argparse's namespace, here and nowhere else, so a command's `run` reads typed fields instead of a
`Namespace`'s untyped attributes (tests/test_cli_parser.py holds each dataclass to its parser).

Kept light: every `pnk` invocation imports this module (only argparse and dataclasses).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from typing import Generic, Protocol, TypeVar


class Subcommands(Protocol):
    """What a command's `register` needs of `ArgumentParser.add_subparsers()`'s result."""

    def add_parser(
        self,
        name: str,
        *,
        parents: Sequence[argparse.ArgumentParser] = ...,
        help: str | None = ...,
        description: str | None = ...,
        epilog: str | None = ...,
        usage: str | None = ...,
        formatter_class: type[argparse.HelpFormatter] = ...,
    ) -> argparse.ArgumentParser: ...


@dataclass(frozen=True, kw_only=True)
class CommandArgs:
    """What every command is given: `-C DIR`, the KB to act on (None: the current directory's)."""

    kb_dir: str | None


ArgsT = TypeVar("ArgsT", bound=CommandArgs)


@dataclass(frozen=True)
class Command(Generic[ArgsT]):
    """A command's `run`, and the dataclass of the arguments it takes."""

    arguments: type[ArgsT]
    run: Callable[[ArgsT], int]

    def __call__(self, namespace: argparse.Namespace) -> int:
        return self.run(self.parse(namespace))

    def parse(self, namespace: argparse.Namespace) -> ArgsT:
        """The dataclass of what argparse parsed: a field the namespace lacks is a TypeError (a
        parser and its dataclass that disagree), and a dest the dataclass does not name is unused."""
        parsed = vars(namespace)
        return self.arguments(**{field.name: parsed[field.name] for field in fields(self.arguments)
                                 if field.name in parsed})


def runner_of(namespace: argparse.Namespace) -> Callable[[argparse.Namespace], object] | None:
    """What runs the command the namespace was parsed for (None: no command was named): the `Command`
    its parser registered."""
    run: object = vars(namespace).get("run")
    return run if callable(run) else None


class Registered:
    """argparse `choices` that are a registry's names (embed/registry.py), read when the parser first
    needs them (a parse that gives the flag, its help), not when it is built: `pnk --help` builds every
    command's parser and imports no registry. A name registered later (a test's) is a choice too."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._names = names

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._names()))

    def __contains__(self, value: object) -> bool:
        return value in tuple(self._names())
