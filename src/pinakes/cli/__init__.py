"""`pnk`: a thin command-line layer over the core API.

Each command lives in its own module (`cmd_<name>.py`) exposing `register(subparsers, common)` and
`run(args) -> int`, where `args` is the command's own frozen dataclass of what it parses, built from
argparse's namespace in one place (`cli/command.py`). Command modules import the core lazily inside
`run`, so `pnk --help` stays fast and never imports numpy, doit or a model backend.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pinakes import __version__
from pinakes.cli.command import runner_of
from pinakes.errors import PinakesError

# Order is the order `pnk --help` lists them.
COMMANDS = ("init", "sync", "watch", "status", "search", "ask", "list", "get", "links", "link", "unlink", "adopt", "doctor",
            "budget", "serve", "mcp_config", "eval", "install_hooks", "ci", "upgrade", "doit")


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `argv` naming a command, only that one's (a no-op `pnk sync` is
    timed against a bare walk, and importing and registering all the others cost it ~35 ms)."""
    named = _command_named(argv) if argv is not None else None
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-C", dest="kb_dir", metavar="DIR", default=argparse.SUPPRESS,
        help="act on the KB containing DIR instead of the current directory",
    )
    parser = argparse.ArgumentParser(
        prog="pnk",
        description="Pinakes: a portable, local-first, agent-first knowledge base.",
    )
    parser.add_argument("--version", action="version", version=f"pnk {__version__}")
    parser.add_argument(
        "-C", dest="kb_dir", metavar="DIR", default=None,
        help="act on the KB containing DIR instead of the current directory",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (named,) if named else COMMANDS:
        module = importlib.import_module(f"pinakes.cli.cmd_{name}")
        module.register(subparsers, common)
    return parser


def _command_named(argv: Sequence[str]) -> str | None:
    """The module of the command `argv` runs, None when it names none (help, a typo: then every
    command is registered, so the listing and argparse's suggestions stay whole)."""
    tokens = iter(argv)
    for token in tokens:
        if token == "-C":
            next(tokens, None)  # the option's value, which may look like a command name
        elif token == "-h" or token.startswith("--"):
            return None  # top-level help, --version, or an option only argparse can judge
        elif not token.startswith("-"):  # (-CDIR, the option joined to its value, goes on)
            module = token.replace("-", "_")
            return module if module in COMMANDS and "_" not in token else None  # commands use hyphens
    return None


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    run = runner_of(args)
    if run is None:
        parser.print_help()
        return 0
    try:
        try:
            status = run(args)
            return status if isinstance(status, int) else 0
        except Exception as exc:
            from pinakes.index.schema import damage_error

            if (damaged := damage_error(exc)) is None:
                raise
            raise damaged from exc  # a damaged index met where no caller named it: never a traceback
    except PinakesError as exc:
        if vars(args).get("json"):
            import json

            print(json.dumps({"ok": False, **exc.to_dict()}, indent=2))
        else:
            from pinakes.display import printable

            # An error names the file it is about, and file names are the KB's: escaped.
            for detail in exc.details:
                print(printable(detail), file=sys.stderr)
            print("pnk: error: " + "\n".join(printable(line) for line in exc.render().splitlines()),
                  file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("pnk: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
