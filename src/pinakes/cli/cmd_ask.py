"""`pnk ask QUESTION`: the free result; `pnk ask --deep QUESTION`: a cited answer, paid, under [budget].

Typing --deep is the decision to spend (spec §4.2), so it always answers; the free confidence only
sets the price. Without --deep nothing is spent: the command says so, shows the free result and what
--deep would reserve for this question. CLI only: no MCP tool runs the loop (spec §4.3), and this
module imports the loop (`pinakes.deep`) only inside `run`, and only for --deep or its price.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, Subcommands
from pinakes.cli.filter_args import FilterArgs, add_filter_arguments

if TYPE_CHECKING:
    from pinakes.budget import BudgetOverrunError, UnrecordedOutcomeError
    from pinakes.deep.result import DeepResult
    from pinakes.lexical.filters import SearchFilters
    from pinakes.manifest import Manifest
    from pinakes.search.results import SearchResult


@dataclass(frozen=True, kw_only=True)
class AskArgs(FilterArgs):
    question: list[str]
    deep: bool
    json: bool
    transcript: Path | None
    force: bool
    api_key_file: Path | None
    yes: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "ask", parents=[common],
        help="answer a question: free passages, or with --deep a cited answer from Claude (paid)",
        description="Without --deep: the free search's passages and confidence, and what --deep would "
                    "reserve; nothing is spent. With --deep: a bounded loop (search, read, refine) driven "
                    "by Claude under [budget]: the whole run is priced at its worst case and refused, or "
                    "confirmed above confirm_above_eur (no terminal: aborted unless --yes), before the first "
                    "call. Each paid run's transcript is kept in .pinakes/transcripts/ (the latest 50). A "
                    "confident question takes one synthesis call; otherwise rounds of two calls up to "
                    "[deep] max_rounds. Every citation is a passage of this KB that the model was shown.",
        epilog='example: pnk ask --deep "Who signs off the courier for a loan, and what is their extension?"',
    )
    parser.add_argument("question", nargs="*", metavar="QUESTION", help="the question (quote it)")
    parser.add_argument("--deep", action="store_true",
                        help="answer it with Claude (paid: PINAKES_ANTHROPIC_API_KEY, [budget], [deep])")
    add_filter_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--transcript", metavar="PATH", type=Path,
                        help="with --deep: write every request and reply, verbatim, to PATH as JSON (it holds "
                             "the question and document text; nothing else ever does)")
    parser.add_argument("--force", action="store_true",
                        help="with --transcript: replace PATH if it exists (never a file of a KB's .pinakes/, "
                             "a pinakes.toml or a sidecar)")
    parser.add_argument("--api-key-file", metavar="PATH", type=Path,
                        help="with --deep: read the API key from this file (default: PINAKES_ANTHROPIC_API_KEY)")
    parser.add_argument("--yes", action="store_true",
                        help="with --deep: confirm a worst case above confirm_above_eur without asking (cron); "
                             "every cap still applies")
    parser.set_defaults(run=Command(AskArgs, run))


def run(args: AskArgs) -> int:
    from pinakes.search.threads import prefer_one_blas_thread

    prefer_one_blas_thread()  # before anything imports NumPy
    from pinakes.deep.prompts import check_question
    from pinakes.errors import UsageError
    from pinakes.kb import KBPaths, find_kb_root
    from pinakes.manifest import load_manifest

    question = check_question(" ".join(args.question))
    if not args.deep and (args.transcript is not None or args.api_key_file is not None or args.yes):
        raise UsageError("--transcript, --api-key-file and --yes only apply to --deep",
                         remedy="add --deep to answer with Claude, or drop them")
    if args.force and args.transcript is None:
        raise UsageError("--force only applies to --transcript", remedy="drop --force")
    if args.transcript is not None:  # refused before anything is spent, not after
        from dataclasses import replace

        from pinakes.outputs import checked_output_path

        args = replace(args, transcript=checked_output_path(args.transcript, flag="--transcript", force=args.force))
    filters = args.filters()
    kb_root = find_kb_root(args.kb_dir)
    manifest = load_manifest(KBPaths(kb_root).manifest)
    if args.deep:
        return _deep(args, kb_root, manifest, question, filters)
    return _free(args, kb_root, manifest, question, filters)


def _deep(args: AskArgs, kb_root: Path, manifest: Manifest, question: str, filters: SearchFilters) -> int:
    from pinakes.budget import BudgetOverrunError, SpendNotConfirmedError, UnrecordedOutcomeError
    from pinakes.deep.loop import ask_deep
    from pinakes.deep.result import DeepResult

    try:
        # --yes is the answer to the confirm_above_eur question, given in advance: the caps are checked
        # before it is asked (budget/accountant.py), so it never admits a spend they refuse.
        result = ask_deep(kb_root, question, filters=filters, manifest=manifest,
                          api_key_file=args.api_key_file, interactive=args.yes or sys.stdin.isatty(),
                          confirm=_confirmed if args.yes else None, transcript=args.transcript)
    except SpendNotConfirmedError as exc:
        if not sys.stdin.isatty() and exc.remedy:
            exc.remedy = f"{exc.remedy}; or add --yes to confirm it without a terminal (the caps still apply)"
        raise
    except (UnrecordedOutcomeError, BudgetOverrunError) as exc:
        if not isinstance(exc.answer, DeepResult):
            raise
        return _kept_unrecorded(args, exc, exc.answer)
    if args.json:
        print(json.dumps({"ok": True, **result.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print(result.render_text())
    return 0


def _confirmed(question: str) -> bool:
    """The answer --yes gives to the confirm_above_eur question."""
    return True


def _kept_unrecorded(args: AskArgs, exc: UnrecordedOutcomeError | BudgetOverrunError,
                     result: DeepResult) -> int:
    """A call billed but the ledger would not record it, or a call overran its reservation: the run
    stopped there, and what it paid for is shown with the error (which names the call and
    `pnk budget --resolve`), never thrown away."""
    kept = "in this JSON's `result`" if args.json else "printed above"
    if result.transcript:
        kept += f" and written to {result.transcript}"
    exc.details.append(f"the result of this run, every reply it paid for included, is kept: {kept}")
    if args.json:
        print(json.dumps({"ok": False, **exc.to_dict(), "details": exc.details, "result": result.to_dict()},
                         indent=2, ensure_ascii=False))
        return exc.exit_code
    print(result.render_text())
    raise exc


def _free(args: AskArgs, kb_root: Path, manifest: Manifest, question: str, filters: SearchFilters) -> int:
    from pinakes.budget.money import format_eur
    from pinakes.cli.cmd_search import ask_deep_command, render
    from pinakes.deep.shapes import quote
    from pinakes.search.core import Searcher

    with Searcher.for_kb(kb_root, manifest) as searcher:
        result: SearchResult = searcher.search(question, filters=filters)
    deep = quote(manifest, result.confidence.level)
    command = ask_deep_command(question, args)
    if args.json:
        print(json.dumps({"ok": True, "deep": False, "spent_eur": "0", "search": result.to_dict(),
                          "deep_command": command, "deep_branch": deep.branch,
                          "deep_worst_case_eur": str(deep.eur), "deep_worst_case_calls": deep.calls},
                         indent=2, ensure_ascii=False))
        return 0
    from pinakes.display import printable

    print(render(result))
    print(f"\nNothing was spent: this is the free result. To have Claude answer it with citations "
          f"({deep.calls_in_words()}, at most {format_eur(deep.eur)} reserved under [budget]):\n  "
          f"{printable(command)}")
    return 0

