"""`pnk`'s parser registers only the command a command line runs (a no-op sync pays for no other
command's module), and every command whenever the line names none: help and argparse's suggestions
stay whole."""

from __future__ import annotations

import argparse

import pytest

from pinakes.cli import COMMANDS, build_parser, main


def registered(parser: argparse.ArgumentParser) -> list[str]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # pyright: ignore[reportPrivateUsage]
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
