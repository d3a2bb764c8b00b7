"""`pnk`'s parser registers only the command a command line runs (a no-op sync pays for no other
command's module), and every command whenever the line names none: help and argparse's suggestions
stay whole."""

from __future__ import annotations

import argparse

import pytest

from pinakes.cli import COMMANDS, build_parser, main


def registered(parser: argparse.ArgumentParser) -> list[str]:
    actions: list[
        argparse._SubParsersAction[argparse.ArgumentParser]  # pyright: ignore[reportPrivateUsage]  # argparse names no public type for it
    ] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    return sorted(actions[0].choices)


ALL = sorted(name.replace("_", "-") for name in COMMANDS)


@pytest.mark.parametrize(("argv", "expected"), [
    (["sync", "-q"], ["sync"]),
    (["-C", "somewhere", "sync"], ["sync"]),
    (["-C", "sync", "status"], ["status"]),  # -C's value is a folder, even one named like a command
    (["-Csomewhere", "status", "--json"], ["status"]),
    (["install-hooks"], ["install-hooks"]),
    (["ci", "init"], ["ci"]),
    ([], ALL),
    (["--help"], ALL),
    (["-h", "sync"], ALL),
    (["--version"], ALL),
    (["synk"], ALL),  # a typo: argparse lists every command
    (["install_hooks"], ALL),  # the module's spelling is not a command
])
def test_a_command_line_registers_what_it_runs(argv: list[str], expected: list[str]) -> None:
    assert registered(build_parser(argv)) == expected


def test_without_a_command_line_every_command_is_registered() -> None:
    assert registered(build_parser()) == ALL


def test_a_mistyped_command_still_gets_the_whole_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["synk"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'synk'" in err and "'sync'" in err and "'install-hooks'" in err


def test_pnk_link_shows_rel_as_required_in_its_usage_and_its_docs(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #40: the usage showed `[--rel REL]` as optional; a link without a relation is refused."""
    from pathlib import Path

    with pytest.raises(SystemExit):
        main(["link", "-h"])
    usage = capsys.readouterr().out.split("\n\n", 1)[0]
    assert usage == ("usage: pnk link [-C DIR] [--json] SOURCE TARGET --rel REL\n"
                     "       pnk link [-C DIR] [--json] --add-kb ALIAS DIR")
    assert "[--rel REL]" not in usage
    cli_md = (Path(__file__).resolve().parents[1] / "docs" / "CLI.md").read_text(encoding="utf-8")
    assert usage.removeprefix("usage: ") in cli_md
    assert main(["link", "docs/a.md", "docs/b.md"]) == 2
    assert "pnk link needs SOURCE, TARGET and --rel" in capsys.readouterr().err


def subcommand_parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    actions: list[
        argparse._SubParsersAction[argparse.ArgumentParser]  # pyright: ignore[reportPrivateUsage]  # argparse names no public type for it
    ] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    return dict(actions[0].choices)


@pytest.mark.parametrize("name", ALL)
def test_each_command_declares_exactly_what_its_parser_parses(name: str) -> None:
    """A command's dataclass names every dest its parser sets (and -C's kb_dir), and nothing else:
    a flag added to the parser alone, or a field to the dataclass alone, fails here."""
    from dataclasses import fields

    from pinakes.cli.command import Command, CommandArgs

    subparser = subcommand_parsers()[name]
    run: Command[CommandArgs] = subparser.get_default("run")
    assert isinstance(run, Command)
    dests = {action.dest for action in subparser._actions if action.dest != "help"}  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    assert {field.name for field in fields(run.arguments)} == dests | {"kb_dir"}


def test_the_parsed_namespace_becomes_the_commands_dataclass() -> None:
    from pathlib import Path

    from pinakes.cli.cmd_sync import SyncArgs
    from pinakes.cli.command import Command, CommandArgs

    namespace = build_parser(["sync"]).parse_args(["-C", "kb", "sync", "--json", "--executor", "ray",
                                                   "--api-key-file", "key.txt", "--clear-cache"])
    run: Command[CommandArgs] = namespace.run
    assert isinstance(run, Command)
    args = run.parse(namespace)
    assert isinstance(args, SyncArgs)
    assert (args.kb_dir, args.json, args.executor, args.api_key_file, args.clear_cache, args.rebuild) == \
        ("kb", True, "ray", Path("key.txt"), "free", False)


def test_a_dataclass_that_misses_a_dest_is_refused_not_guessed() -> None:
    from dataclasses import dataclass

    from pinakes.cli.command import Command, CommandArgs

    @dataclass(frozen=True, kw_only=True)
    class Narrow(CommandArgs):
        json: bool
        absent: bool

    with pytest.raises(TypeError, match="absent"):
        Command(Narrow, lambda args: 0).parse(argparse.Namespace(kb_dir=None, json=True))
