"""`pnk watch`: follow the KB's source roots and sync what changed (a thin layer over `Watcher`).

Each line it prints is one event: a sync (what it indexed, moved, deleted, failed), waiting for
another sync's lock, the KB gone or back, an error it keeps watching through. `--json` prints the
same events as JSON lines, one object each, for tools.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from datetime import datetime

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class WatchArgs(CommandArgs):
    debounce: int | None
    index_only: bool
    offline: bool
    poll: bool
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "watch", parents=[common], help="follow the source roots and sync what changed (the [watch] extra)",
        description="Sync once, then follow the KB's source roots and sync whenever documents or sidecars "
                    "change: once the tree has been quiet for --debounce ms, one sync for everything "
                    "pending (a save, a git checkout, a folder move). Waits for another sync's lock; "
                    "keeps watching through an invalid manifest or an unmounted KB. Uses the free "
                    "extractor (nobody is there to confirm a spend). Ctrl-C stops (during a sync: "
                    "after it).",
        epilog="example: pnk watch --json | your-tool",
    )
    parser.add_argument("--debounce", type=int, default=None, metavar="MS",
                        help="how long the tree must be quiet before a sync (default 300)")
    parser.add_argument("--index-only", action="store_true",
                        help="never write into the source tree (no sidecars minted; the pre-commit hook mints them)")
    parser.add_argument("--offline", action="store_true", help="never reach the network for model weights")
    parser.add_argument("--poll", action="store_true",
                        help="poll the folders instead of OS notifications (network file systems)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per event")
    parser.set_defaults(run=Command(WatchArgs, run))


def run(args: WatchArgs) -> int:
    from pinakes.errors import UsageError
    from pinakes.kb import find_kb_root
    from pinakes.sync.watch import DEFAULT_DEBOUNCE_MS, Watcher, WatchEvent, WatchOptions

    debounce = DEFAULT_DEBOUNCE_MS if args.debounce is None else args.debounce
    if not 0 < debounce <= 60_000:
        raise UsageError(f"--debounce must be between 1 and 60000 ms, got {debounce}", remedy="pass --debounce 300")

    # The streams as they are now: an event said from the Ctrl-C handler mid-sync must not go where
    # doit points sys.stdout while it captures a task's output.
    out, err = sys.stdout, sys.stderr

    def emit(event: WatchEvent) -> None:
        if args.json:
            print(json.dumps(event.to_dict(), ensure_ascii=False), file=out, flush=True)
            return
        from pinakes.display import printable

        stream = err if event.kind == "error" else out
        stamp = datetime.now().strftime("%H:%M:%S")
        print("\n".join(f"{stamp} {printable(line)}" if number == 0 else printable(line)
                        for number, line in enumerate(event.message.splitlines())), file=stream, flush=True)

    options = WatchOptions(debounce_ms=debounce, index_only=args.index_only,
                           offline=True if args.offline else None, poll=args.poll)
    return Watcher(find_kb_root(args.kb_dir), options, emit=emit).run()
