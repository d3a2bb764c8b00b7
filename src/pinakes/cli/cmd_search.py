"""`pnk search` (not built yet: see STATUS.md)."""

from __future__ import annotations

import argparse

from pinakes.errors import PinakesError


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser("search", parents=[common], help="(not built yet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    raise PinakesError("`pnk search` is not built yet", remedy="see STATUS.md")
