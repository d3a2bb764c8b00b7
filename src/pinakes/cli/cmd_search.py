"""`pnk search QUERY`: the free retrieval pipeline, printed for a person or as JSON.

Retrieval only: nothing here spends money. Low or unknown confidence prints how to escalate
(`pnk ask --deep`), which is a separate, deliberate command (spec §4.2).
"""

from __future__ import annotations

import argparse
import json
import shlex
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pinakes.search.results import Passage, SearchResult

QUOTE_CHARS = 300


def register(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "search", parents=[common],
        help="search the KB: BM25 + vectors, fused, reranked, cited",
        description="Search the KB with the free pipeline (BM25 + exact vectors, RRF, optional "
                    "cross-encoder rerank) and print cited passages.",
        epilog='example: pnk search "how are sidecars paired" --tag design -k 5',
    )
    parser.add_argument("query", nargs="*", metavar="QUERY", help="the words to search for")
    parser.add_argument("-k", dest="final_k", metavar="N", help="number of passages (default: [retrieval] final_k)")
    parser.add_argument("--tag", dest="tags", action="append", metavar="TAG",
                        help="only documents with this tag (repeatable: any of them)")
    parser.add_argument("--all-tags", action="store_true", help="require every --tag instead of any")
    parser.add_argument("--path", dest="path_prefix", metavar="PREFIX",
                        help="only documents whose KB-relative path starts with PREFIX")
    parser.add_argument("--since", metavar="DATE", help="only documents modified on or after DATE (ISO)")
    parser.add_argument("--until", metavar="DATE", help="only documents modified on or before DATE (ISO)")
    parser.add_argument("--type", dest="source_types", action="append", metavar="TYPE",
                        help="only this source type: markdown, text, code or pdf (repeatable)")
    parser.add_argument("--no-rerank", action="store_true", help="skip the cross-encoder rerank")
    parser.add_argument("--mode", default="hybrid", metavar="MODE",
                        help="hybrid (default), bm25 or vector")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pinakes.errors import UsageError
    from pinakes.kb import KBPaths, find_kb_root
    from pinakes.manifest import load_manifest
    from pinakes.search.core import Searcher
    from pinakes.search.filters import make_filters

    query = " ".join(args.query).strip()
    if not query:
        raise UsageError("the query is empty", remedy='pass the words to search for: pnk search "..."')
    final_k = _positive_int(args.final_k) if args.final_k is not None else None
    filters = make_filters(
        tags=args.tags, all_tags=args.all_tags, path_prefix=args.path_prefix,
        since=args.since, until=args.until, source_types=args.source_types,
    )
    kb_root = find_kb_root(getattr(args, "kb_dir", None))
    manifest = load_manifest(KBPaths(kb_root).manifest)
    with Searcher.for_kb(kb_root, manifest) as searcher:
        result = searcher.search(
            query, filters=filters, mode=args.mode.strip().lower(),
            rerank=False if args.no_rerank else None, final_k=final_k,
        )
    if args.json:
        print(json.dumps({"ok": True, **result.to_dict()}, indent=2, ensure_ascii=False))
    else:
        print(render(result))
    return 0


def _positive_int(value: str) -> int:
    from pinakes.errors import UsageError

    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise UsageError(f"-k must be a positive whole number, got {value!r}", remedy="pass -k 8")
    return number


def render(result: SearchResult) -> str:
    from pinakes.display import printable

    lines: list[str] = []
    if not result.passages:
        lines.append("No passages matched.")
    for rank, passage in enumerate(result.passages, start=1):
        lines.extend(_render_passage(rank, passage))
        lines.append("")
    confidence = result.confidence
    lines.append(f"confidence: {confidence.level} ({confidence.reason})")
    lines.extend(f"note: {printable(note)}" for note in result.notes)
    if confidence.level in ("low", "unknown"):
        lines.append(f"Retrieval only; nothing was spent. To escalate: pnk ask --deep {shlex.quote(result.query)} "
                     "(not built in this version: see STATUS.md)")
    if result.suggested_next is not None:
        suggestion = result.suggested_next
        command = f"pnk search {shlex.quote(suggestion.query)}"
        if suggestion.mode != result.mode:
            command += f" --mode {suggestion.mode}"
        lines.append(f"next search to try: {printable(command)}  ({printable(suggestion.reason)})")
    return "\n".join(lines).rstrip()


def _render_passage(rank: int, passage: Passage) -> list[str]:
    from pinakes.display import printable
    from pinakes.search.citations import with_heading

    # Titles, paths, headings, tags and text all come from the KB's files: escaped for the terminal.
    title = printable(passage.title or passage.path)
    lines = [f"{rank}. {title} — {printable(with_heading(passage.citation, passage.heading_path))}"]
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
    parts = []
    if scores.rerank is not None:
        parts.append(f"rerank {scores.rerank:.3f}")
    if scores.rrf is not None:
        parts.append(f"rrf {scores.rrf:.4f}")
    if scores.bm25_rank is not None:
        parts.append(f"bm25 #{scores.bm25_rank}")
    if scores.vector_rank is not None:
        parts.append(f"vector #{scores.vector_rank} (cos {scores.cosine:.3f})")
    return " · ".join(parts)
