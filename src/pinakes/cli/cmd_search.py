"""`pnk search QUERY`: the free retrieval pipeline, printed for a person or as JSON.

Retrieval only: nothing here spends money. Low or unknown confidence prints what to do next with
commands this build has, including spec §4.2's escalation: `pnk ask --deep` with the user's own
query and filters, quoted for a shell — named only where something matched (a paid answer over no
passages answers nothing).
"""

from __future__ import annotations

import argparse
import json
import shlex
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, Subcommands
from pinakes.cli.filter_args import FilterArgs, add_filter_arguments

if TYPE_CHECKING:
    from pinakes.search.results import Passage, SearchResult

QUOTE_CHARS = 300


@dataclass(frozen=True, kw_only=True)
class SearchArgs(FilterArgs):
    query: list[str]
    final_k: str | None  # checked by `_positive_int`, so a bad -k is a UsageError that names it
    no_rerank: bool
    mode: str
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "search", parents=[common],
        help="search the KB: BM25 + vectors, fused, reranked, cited",
        description="Search the KB with the free pipeline (BM25 + exact vectors, RRF, optional "
                    "cross-encoder rerank) and print cited passages.",
        epilog='example: pnk search "how are sidecars paired" --tag design -k 5',
    )
    parser.add_argument("query", nargs="*", metavar="QUERY", help="the words to search for")
    parser.add_argument("-k", dest="final_k", metavar="N", help="number of passages (default: [retrieval] final_k)")
    add_filter_arguments(parser)
    parser.add_argument("--no-rerank", action="store_true", help="skip the cross-encoder rerank")
    parser.add_argument("--mode", default="hybrid", metavar="MODE",
                        help="hybrid (default), bm25 or vector")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=Command(SearchArgs, run))


def run(args: SearchArgs) -> int:
    from pinakes.search.threads import prefer_one_blas_thread

    prefer_one_blas_thread()  # before anything imports NumPy
    from pinakes.errors import UsageError
    from pinakes.kb import KBPaths, find_kb_root
    from pinakes.manifest import load_manifest
    from pinakes.search.core import Searcher

    query = " ".join(args.query).strip()
    if not query:
        raise UsageError("the query is empty", remedy='pass the words to search for: pnk search "..."')
    final_k = _positive_int(args.final_k) if args.final_k is not None else None
    filters = args.filters()
    kb_root = find_kb_root(args.kb_dir)
    manifest = load_manifest(KBPaths(kb_root).manifest)
    with Searcher.for_kb(kb_root, manifest) as searcher:
        result = searcher.search(
            query, filters=filters, mode=args.mode.strip().lower(),
            rerank=False if args.no_rerank else None, final_k=final_k,
        )
    if args.json:
        print(json.dumps({"ok": True, **result.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print(render(result, deep_command=ask_deep_command(query, args)))
    return 0


def ask_deep_command(question: str, args: FilterArgs) -> str:
    """`pnk ask --deep QUESTION` with the caller's own -C and filters, quoted for a POSIX shell."""
    argv = ["pnk"]
    if args.kb_dir:
        argv += ["-C", str(args.kb_dir)]
    argv += ["ask", "--deep", question]
    for tag in args.tags or ():
        argv += ["--tag", tag]
    if args.all_tags:
        argv.append("--all-tags")
    for flag, value in (("--path", args.path_prefix), ("--since", args.since), ("--until", args.until)):
        if value is not None:
            argv += [flag, value]
    for source_type in args.source_types or ():
        argv += ["--type", source_type]
    return shlex.join(argv)


def _positive_int(value: str) -> int:
    from pinakes.errors import UsageError

    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise UsageError(f"-k must be a positive whole number, got {value!r}", remedy="pass -k 8")
    return number


def render(result: SearchResult, deep_command: str | None = None) -> str:
    """The result for a person. `deep_command` (`ask_deep_command`) is the paid escalation, named
    where the search was not confident and something matched (`escalation_worth_naming`); None
    leaves it out (`pnk ask` prints its own)."""
    from pinakes.display import printable
    from pinakes.search.suggest import escalation_worth_naming

    lines: list[str] = []
    if not result.passages:
        lines.append("No passages matched.")
    for rank, passage in enumerate(result.passages, start=1):
        lines.extend(_render_passage(rank, passage))
        lines.append("")
    confidence = result.confidence
    lines.append(f"confidence: {confidence.level}, {confidence.source} ({confidence.reason})")
    lines.extend(f"note: {printable(note)}" for note in result.notes)
    # Every remedy names a command this build has, the paid escalation (spec §4.2) included: it is
    # the user's own query and filters, quoted, so it can be pasted as it is.
    if not result.passages:
        lines.append("Retrieval only; nothing was spent. Nothing matched: try the next search below, other "
                     "words, or fewer filters.")
    elif confidence.level == "unknown" and confidence.reason.startswith("[retrieval.confidence] signal"):
        lines.append("Retrieval only; nothing was spent. Confidence is turned off in pinakes.toml "
                     '([retrieval.confidence] signal = "none"); judge the passages yourself.')
    elif confidence.level == "unknown":
        lines.append("Retrieval only; nothing was spent. Confidence stays unknown until this KB is calibrated: "
                     "`pnk eval --self-calibrate` (from its own documents), or a golden set: `pnk eval --init`, "
                     "edit eval/questions.yaml, then `pnk eval --fit-confidence --write`.")
    elif confidence.level == "low":
        lines.append("Retrieval only; nothing was spent. The passages may not answer this: try the next "
                     "search below, or read a document whole with `pnk get ID`.")
    if deep_command is not None and escalation_worth_naming(result):
        lines.append(f"To have Claude answer it with citations (paid, priced and capped by [budget] before "
                     f"the first call): {printable(deep_command)}")
    if result.suggested_next is not None:
        suggestion = result.suggested_next
        command = f"pnk search {shlex.quote(suggestion.query)}"
        if suggestion.mode != result.mode:
            command += f" --mode {suggestion.mode}"
        lines.append(f"next search to try: {printable(command)}  ({printable(suggestion.reason)})")
    return "\n".join(lines).rstrip()


def locator_words(char_start: int, char_end: int, page_start: int | None, page_end: int | None) -> str:
    """What a citation's locator means, in words: `characters 120-480`, `page 3`, `pages 3-4`.

    The citation itself (`path:120-480`, `path:p3`) is the machine form and stays as it is."""
    if page_start is not None:
        last = page_end if page_end is not None else page_start
        return f"page {page_start}" if last == page_start else f"pages {page_start}-{last}"
    return f"characters {char_start}-{char_end}"


def _render_passage(rank: int, passage: Passage) -> list[str]:
    from pinakes.display import printable
    from pinakes.extract.titles import display_title

    # Titles, paths, headings, tags and text all come from the KB's files: escaped for the terminal.
    # The citation is printed whole (copyable), then what its locator means, then the section.
    parts = [printable(passage.citation),
             locator_words(passage.char_start, passage.char_end, passage.page_start, passage.page_end)]
    if passage.heading_path:
        parts.append(printable(" > ".join(passage.heading_path)))
    title = printable(display_title(passage.title, passage.path))
    lines = [f"{rank}. {title} — {' · '.join(parts)}"]
    quote = printable(" ".join(passage.text.split()))
    if len(quote) > QUOTE_CHARS:
        quote = quote[: QUOTE_CHARS - 1].rstrip() + "…"
    lines.extend(textwrap.wrap(f"“{quote}”", width=100, initial_indent="   ", subsequent_indent="    "))
    lines.append("   " + _scores(passage))
    if passage.tags:
        lines.append("   tags: " + ", ".join(printable(tag) for tag in passage.tags))
    if passage.stale_extraction:
        lines.append(f"   stale extraction: {passage.stale_extraction} (paid text, extracted by an older "
                     "version; still served)")
    return lines


def _scores(passage: Passage) -> str:
    scores = passage.scores
    parts: list[str] = []
    if scores.rerank is not None:
        parts.append(f"rerank {scores.rerank:.3f}")
    if scores.rrf is not None:
        parts.append(f"rrf {scores.rrf:.4f}")
    if scores.bm25_rank is not None:
        parts.append(f"bm25 #{scores.bm25_rank}")
    if scores.vector_rank is not None:
        parts.append(f"vector #{scores.vector_rank} (cos {scores.cosine:.3f})")
    return " · ".join(parts)
