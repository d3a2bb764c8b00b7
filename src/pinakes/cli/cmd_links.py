"""`pnk links DOC`: a document's neighbours over authored links and links from text, both directions, bounded (the same
traversal as MCP `pinakes_links`: `pinakes.links.traverse`). Read-only."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pinakes.cli.command import Command, CommandArgs, Subcommands
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.links.traverse import Edge, Traversal


@dataclass(frozen=True, kw_only=True)
class LinksArgs(CommandArgs):
    doc: str
    depth: int | None
    direction: Literal["out", "in", "both"]
    adjacent_k: int | None
    max_rows: int | None
    rel: list[str] | None
    query: str | None
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    from pinakes.links.traverse import DIRECTIONS, TraversalLimits

    limits = TraversalLimits()
    parser = subparsers.add_parser(
        "links", parents=[common], help="list a document's linked documents, in this KB and connected ones",
        description="Traverse links from DOC (a document of this KB: its ULID, path or pnk://self/ "
                    "URI), outbound (its sidecar, and the links its text makes) and inbound (this KB's sidecars "
                    "and texts, and connected KBs' sidecars as the last reverse scan found them). A link is "
                    "marked authored (a sidecar's) or from text (relation links-to, with the lines it is "
                    "written on, as of the last sync). Each neighbour comes with its relation, direction, KB, "
                    "title, path, whether it resolves and why not, and whether its KB is readable here. "
                    "A neighbour in another KB is terminal: run `pnk links` there to go on. Bounds beyond "
                    "their range are clamped, and the output says so.",
        epilog="examples: pnk links docs/loans/outgoing.md · pnk links 01J9ZX7K3M4N5P6Q7R8S9T0VWX --depth 2 --json · "
               'pnk links docs/loans/outgoing.md --rel cites --query "insurance valuation"',
    )
    parser.add_argument("doc", metavar="DOC", help="the document to start from (ULID, path or pnk://self/ULID)")
    parser.add_argument("--depth", type=int, default=None,
                        help=f"logical hops to follow (default 1, at most {limits.max_depth})")
    parser.add_argument("--direction", choices=DIRECTIONS, default="both",
                        help="out: links DOC makes; in: links made to it; both (default)")
    parser.add_argument("--adjacent-k", type=int, default=None, dest="adjacent_k",
                        help=f"neighbours expanded per document, after ranking (default [retrieval] adjacent_k, "
                             f"at most {limits.max_adjacent_k})")
    parser.add_argument("--max-rows", type=int, default=None, dest="max_rows",
                        help=f"neighbours listed in all (default {limits.default_rows}, at most {limits.max_rows})")
    parser.add_argument("--rel", action="append", default=None, metavar="REL",
                        help="follow only links with this relation (repeatable: any of them)")
    parser.add_argument("--query", default=None, metavar="TEXT",
                        help="order the neighbours in this KB by relevance to TEXT, scored as `pnk search` "
                             "scores (hybrid); which neighbours are found does not change")
    parser.add_argument("--json", action="store_true", help="print the traversal as JSON")
    parser.set_defaults(run=Command(LinksArgs, run))


def run(args: LinksArgs) -> int:
    from contextlib import ExitStack

    from pinakes.errors import UsageError
    from pinakes.index import schema
    from pinakes.kb import KBPaths
    from pinakes.links.addresses import here, resolve
    from pinakes.links.authoring import check_rel
    from pinakes.links.traverse import TraversalLimits, machine_lookup, traverse

    for flag, value in (("--depth", args.depth), ("--adjacent-k", args.adjacent_k), ("--max-rows", args.max_rows)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, not {value}", remedy=f"pass {flag} 1 or more")
    rels = [check_rel(rel) for rel in args.rel or ()]
    query = _query(args.query)
    kb = here(args.kb_dir)
    start = resolve(kb, args.doc, locate=False)
    if start.kb_id != kb.kb_id:
        raise UsageError(f"{args.doc!r} is a document of KB {start.kb_id}, not of this KB ({kb.kb_id})",
                         remedy="run `pnk -C DIR links ...` with DIR inside that KB")
    with ExitStack() as stack:
        conn = schema.open_reader(KBPaths(kb.root).index_db)
        stack.callback(conn.close)
        ranking = None
        if query is not None:
            from pinakes.links.relevance import by_query
            from pinakes.search.core import Searcher

            ranking = by_query(stack.enter_context(Searcher.for_kb(kb.root, kb.manifest)), query)
        result = traverse(conn, kb.kb_id, "self", start.doc_id, lookup=machine_lookup(kb.root, kb.manifest, stack),
                          depth=args.depth, adjacent_k=args.adjacent_k, max_rows=args.max_rows,
                          direction=args.direction, default_adjacent_k=kb.manifest.retrieval.adjacent_k,
                          limits=TraversalLimits(max_tokens=None), rels=rels, ranking=ranking)
    if args.json:
        print(json.dumps({"ok": True, **result}, indent=2, ensure_ascii=False))
    else:
        print(render(result))
    return 0


def _query(text: str | None) -> str | None:
    from pinakes.errors import UsageError

    if text is None:
        return None
    if not text.strip():
        raise UsageError("--query is empty", remedy='pass the words to rank by: --query "loan insurance"')
    return text.strip()


def render(result: Traversal) -> str:
    from pinakes.display import printable

    start = result["start"]
    lines = [f"{printable(start['title'] or '(not indexed)')} — {printable(start['path'] or '-')} · {start['doc_id']}"]
    if not start["resolved"] and (reason := start["reason"]) is not None:  # an unresolved start has one
        lines.append(f"  unresolved: {printable(reason)}")
    if only := result["rel"]:
        lines.append(f"  only links with relation {', '.join(printable(rel) for rel in only)}")
    if (query := result["query"]) is not None:
        lines.append(f"  ranked by relevance to {printable(query)!r} (this KB's neighbours, by their best "
                     "passage; the others follow as found)")
    if not result["neighbours"]:
        narrowed = [*(["in this direction"] if result["direction"] != "both" else []),
                    *(["with that relation"] if result.get("rel") else [])]
        lines.append("  no linked documents" + (" " + " and ".join(narrowed) if narrowed else ""))
    arrows = {"out": "->", "in": "<-", "both": "<->"}
    for item in result["neighbours"]:
        kb = "this KB" if item["kb"]["this_kb"] else f"KB {item['kb']['alias'] or item['kb']['id']}"
        rels = ", ".join(dict.fromkeys(_edge_label(edge) for edge in item["edges"]))
        if item.get("edges_omitted"):
            rels += f" (+{item['edges_omitted']} more)"
        title, path = item["title"], item["path"]  # both set for a resolved neighbour
        name = (f"{printable(title)} — {printable(path)}" if item["resolved"] and title is not None and path is not None
                else item["doc_uri"])
        indent = "  " * item["hop"]
        ranked = item.get("relevance")
        relevance = f", relevance #{ranked['rank']}" if ranked else ""
        lines.append(f"{indent}{arrows[item['direction']]} {printable(rels)}: {name} ({kb}, hop {item['hop']}, "
                     f"score {item['score']:g}{relevance})")
        if reason := item["reason"]:
            state = "unreachable" if not item["reachable"] else "unresolved"
            lines.append(f"{indent}   {state}: {printable(reason)}")
    lines.extend(_not_followed(result))
    for name, bound in result["bounds"].items():
        if bound["clamped"]:
            lines.append(f"note: {name} {bound['requested']} was clamped to {bound['used']} "
                         f"(range {bound['min']}-{bound['max']})")
    if result["truncated"]:
        for cap, detail in result["truncated"].items():
            lines.append(f"note: {counted(int(detail['neighbours_cut']), 'neighbour')} cut by the {cap} cap; raise --max-rows "
                         "or narrow --direction")
    return "\n".join(lines)


def _edge_label(edge: Edge) -> str:
    """A link's relation, marked authored (a sidecar's, here or in a connected KB) or from text,
    with the lines of the linking document it is written on."""
    if edge["origin"] != "text":
        return f"{edge['rel']} (authored)"
    lines = list(dict.fromkeys(str(span["line"]) for span in edge.get("spans", [])))
    if more := edge.get("spans_omitted"):
        lines.append(f"+{more}")
    where = f": {'line' if len(lines) == 1 else 'lines'} {', '.join(lines)}" if lines else ""
    return f"{edge['rel']} (from text{where})"


# Why a listed document's own links were not followed (the `frontier` reasons of --json), in words.
_NOT_FOLLOWED = {
    "elsewhere": "in another KB (to go on, run `pnk links` on it in that KB)",
    "unindexed": "not an indexed document here (nothing to follow)",
    "terminal": "in another KB or not indexed here",  # counted only, so not told apart
    "depth": "at the last hop (--depth {more} follows them)",
    "fanout": "beyond the neighbours followed per document (raise --adjacent-k)",
    "rows": "beyond --max-rows",
    "tokens": "beyond the size budget",
}


def _not_followed(result: Traversal) -> list[str]:
    """One line counting the documents found whose own links were not followed, and why."""
    counts = dict.fromkeys(_NOT_FOLLOWED, 0)
    own = result["start"]["kb"]["id"]
    for entry in result["frontier"]:
        reason = entry["reason"]
        if reason == "terminal":
            reason = "unindexed" if entry["kb_id"] == own else "elsewhere"
        counts[reason] += 1
    for reason, count in result["frontier_omitted"].items():
        counts[reason] += count
    more = int(result["bounds"]["depth"]["used"]) + 1
    said = [f"{count} {_NOT_FOLLOWED[reason].format(more=more)}" for reason, count in counts.items() if count]
    if not said:
        return []
    return [f"links not followed further from {counted(sum(counts.values()), 'document')}: " + "; ".join(said)]
