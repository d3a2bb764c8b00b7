"""`pnk init [DIR] --name NAME`: create a new KB."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "init", help="create a new KB in DIR (default: the current directory)",
        description="Create a new KB: mint its ULID, write pinakes.toml, docs/ and a .gitignore "
                    "covering .pinakes/. Refuses to touch an existing KB.",
    )
    parser.add_argument("dir", nargs="?", default=".", help="directory to create the KB in")
    parser.add_argument("--name", help="the KB's name (default: the directory's name)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pinakes.init import init_kb

    created = init_kb(Path(args.dir), name=args.name)
    if args.json:
        import json

        print(json.dumps({"ok": True, "root": str(created.root), "id": created.kb_id,
                          "name": created.name}, indent=2))
    else:
        print(f"created KB {created.name!r} ({created.kb_id}) in {created.root}")
        print("next: put documents under docs/ and run `pnk sync`")
    return 0
