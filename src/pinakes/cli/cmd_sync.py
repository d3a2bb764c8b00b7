"""`pnk sync`: bring the index up to date with the sources (a thin layer over `run_sync`)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pinakes.cli.command import Command, CommandArgs, Registered, Subcommands


@dataclass(frozen=True, kw_only=True)
class SyncArgs(CommandArgs):
    rebuild: bool
    index_only: bool
    sidecars_only: bool
    stage: bool
    extract_backend: str | None
    offline: bool
    scan_links: bool
    force: bool
    estimate_only: bool
    api_key_file: Path | None
    executor: str | None  # a name of the executor registry (embed/registry.py EXECUTORS)
    ray_address: str | None
    no_reuse: bool
    force_unlock: bool
    clear_cache: Literal["free", "paid", "transcripts"] | None
    yes: bool
    quiet: bool
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "sync", parents=[common], help="index what changed (walk, pair, extract, chunk, embed, graph)",
        description="Walk the KB's sources, pair documents with sidecars and index rows, and rebuild "
                    "exactly what changed. Exits 1 when documents failed (they are listed), 75 when "
                    "another host holds the lock.",
    )
    parser.add_argument("--rebuild", action="store_true",
                        help="build a fresh index and swap it in atomically (ledger.jsonl survives)")
    parser.add_argument("--index-only", action="store_true",
                        help="never write into the source tree (what the post-commit hook runs)")
    parser.add_argument("--sidecars-only", action="store_true",
                        help="only mint sidecars for new documents; never opens the index")
    parser.add_argument("--stage", action="store_true",
                        help="with --sidecars-only: staged documents only, and `git add` the sidecars")
    parser.add_argument("--extract", metavar="BACKEND", dest="extract_backend",
                        help="PDF extraction backend for this run (overrides [extraction] backend)")
    parser.add_argument("--offline", action="store_true", help="never reach the network for model weights")
    parser.add_argument("--scan-links", action="store_true",
                        help="re-read every connected KB's sidecars for inbound links now, ignoring the "
                             "freshness window (refused with --sidecars-only)")
    parser.add_argument("--force", action="store_true",
                        help="pay to extract PDFs whose free text layer is healthy; with a free --extract, "
                             "replace paid extractions with the free text (never widens a budget cap)")
    parser.add_argument("--estimate-only", action="store_true",
                        help="price a paid run and exit: measures the real first-slice request with the "
                             "vendor's token counter, so it needs an API key and the network (no text is "
                             "generated); refused on a free backend")
    parser.add_argument("--api-key-file", metavar="PATH", type=Path,
                        help="read the paid backend's API key from this file (default: PINAKES_ANTHROPIC_API_KEY; "
                             "the generic ANTHROPIC_API_KEY is never read)")
    parser.add_argument("--executor", metavar="EXECUTOR", choices=Registered(_executors), default=None,
                        help="where the model runs for this run, one of %(choices)s (overrides [embedding] "
                             "executor): local is this process, ray a Ray cluster's workers (the [ray] extra)")
    parser.add_argument("--ray-address", metavar="ADDR", default=None,
                        help="the Ray cluster to embed on (implies --executor ray; default: [embedding] "
                             "ray_address, else RAY_ADDRESS, else \"auto\")")
    parser.add_argument("--no-reuse", action="store_true",
                        help="embed every chunk with the model, reusing no stored vector (with --rebuild: "
                             "nothing is read from the index being replaced)")
    parser.add_argument("--force-unlock", action="store_true",
                        help="remove a sync lock left by another host or an unreadable lock, then sync")
    parser.add_argument("--clear-cache", nargs="?", const="free", choices=("free", "paid", "transcripts"),
                        default=None,
                        help="empty .pinakes/cache/extract first (asks; =paid also drops paid extractions; "
                             "=transcripts empties .pinakes/transcripts/ instead: the kept `ask --deep` transcripts)")
    parser.add_argument("--yes", action="store_true", help="do not ask before --clear-cache")
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing unless something failed")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(run=Command(SyncArgs, run))


def _executors() -> tuple[str, ...]:
    from pinakes.embed.registry import EXECUTORS

    return tuple(EXECUTORS)


def run(args: SyncArgs) -> int:
    from pinakes.errors import EXIT_FAILURE
    from pinakes.pipeline.run import RAY_ADDRESS_EXECUTOR
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync

    if args.estimate_only:
        from pinakes.sync.estimate import estimate_paid_run

        estimate = estimate_paid_run(args.kb_dir, extract_backend=args.extract_backend,
                                     force=args.force, api_key_file=args.api_key_file)
        print(json.dumps(estimate.to_dict(), indent=2) if args.json else estimate.render_text())
        return 0
    if args.clear_cache == "transcripts":
        from pinakes.sync.clear_cache import clear_transcripts

        clear_transcripts(args.kb_dir, assume_yes=args.yes, quiet=args.quiet or args.json)
    elif args.clear_cache:
        from pinakes.sync.clear_cache import clear_extract_cache

        clear_extract_cache(args.kb_dir, include_paid=args.clear_cache == "paid",
                            assume_yes=args.yes, quiet=args.quiet or args.json)
    if args.ray_address and args.executor is not None and args.executor != RAY_ADDRESS_EXECUTOR:
        from pinakes.errors import UsageError

        raise UsageError(f"--ray-address names a Ray cluster to embed on, but --executor {args.executor} "
                         "embeds elsewhere", remedy=f"drop --executor {args.executor}, or drop --ray-address")
    options = SyncOptions(rebuild=args.rebuild, index_only=args.index_only,
                          sidecars_only=args.sidecars_only, stage=args.stage, quiet=args.quiet or args.json,
                          force_unlock=args.force_unlock, offline=True if args.offline else None,
                          extract_backend=args.extract_backend, scan_links=args.scan_links,
                          force=args.force, api_key_file=args.api_key_file, no_reuse=args.no_reuse,
                          executor=RAY_ADDRESS_EXECUTOR if args.ray_address and args.executor is None else args.executor,
                          ray_address=args.ray_address)
    report = run_sync(args.kb_dir, options)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    elif not args.quiet or not report.ok:
        print(report.render_text(), file=sys.stdout if report.ok else sys.stderr)
    return 0 if report.ok else EXIT_FAILURE
