"""`pnk init [DIR] --name NAME`: create a new KB."""

from __future__ import annotations

import argparse
from pathlib import Path

_EXTRA_FOR_PROVIDER = {"sentence-transformers": "st", "fastembed": "light"}


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "init", help="create a new KB in DIR (default: the current directory)",
        description="Create a new KB: mint its ULID, write pinakes.toml, docs/ and a .gitignore "
                    "covering .pinakes/. Refuses to touch an existing KB or to nest one in another.",
    )
    parser.add_argument("dir", nargs="?", default=".", help="directory to create the KB in")
    parser.add_argument("--name", help="the KB's name (default: the directory's name)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pinakes.init import init_kb

    created = init_kb(Path(args.dir), name=args.name)
    extra = _EXTRA_FOR_PROVIDER.get(created.embedding_provider, "st")
    if args.json:
        import json

        print(json.dumps({
            "ok": True, "root": str(created.root), "id": created.kb_id, "name": created.name,
            "embedding_provider": created.embedding_provider,
            "embedding_provider_installed": created.embedding_provider_installed,
            "gitignore": created.gitignore,
        }, indent=2))
        return 0
    print(f"created KB {created.name!r} ({created.kb_id}) in {created.root}")
    print(f"  pinakes.toml  embedding provider: {created.embedding_provider}")
    print("  docs/         put your documents here")
    print(f"  .gitignore    {created.gitignore} (.pinakes/ is derived state and stays out of git)")
    if not created.embedding_provider_installed:
        print(f'note: {created.embedding_provider} is not installed; `pnk sync` will need '
              f'`pip install "pinakes[{extra}]"`')
    print("next: put documents under docs/ and run `pnk sync`")
    return 0
