"""The five read-only tools' behaviour, independent of the MCP transport that carries them.

`PinakesTools.call(name, arguments)` validates every argument at the boundary (`boundary.py`),
answers from the index with per-request freshness (`reader.py`, and the Searcher's own check), and
returns a JSON-ready dict; a refusal is a `PinakesError` whose message and remedy become the tool
error. `server.py` only moves these dicts over MCP, so every behaviour here is testable in-process.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, TypedDict, TypeVar, cast

from pinakes.errors import IndexUnreadableError, PinakesError
from pinakes.ids import format_pnk_uri, is_ulid
from pinakes.index.citations import citation
from pinakes.index.documents import selection_fields
from pinakes.index.schema import is_damage
from pinakes.lexical.filters import SOURCE_TYPES, make_filters
from pinakes.search.calibrated import SOURCE_GUIDANCE
from pinakes.search.core import MODES, Searcher
from pinakes.search.results import Passage, SearchResult
from pinakes.serve import boundary
from pinakes.serve.bounds import Bounds, cut
from pinakes.serve.config import ServedKB
from pinakes.serve.documents import (
    DocumentRow,
    IndexedText,
    Selection,
    find_document,
    read_indexed_text,
    select_chars,
    select_pages,
)
from pinakes.serve.evidence import UNTRUSTED_NOTICE, defused, envelope
from pinakes.serve.reader import IndexReader
from pinakes.serve.specs import (
    FILTER_ARGUMENTS,
    GET_ARGUMENTS,
    GET_RANGE_ARGUMENTS,
    GET_TOOL,
    LINKS_ARGUMENTS,
    LINKS_TOOL,
    LIST_KBS_TOOL,
    MAX_GET_DOCUMENTS,
    SEARCH_ARGUMENTS,
    SEARCH_TOOL,
    STATUS_ARGUMENTS,
    STATUS_TOOL,
)

if TYPE_CHECKING:
    from pinakes.links.traverse import Lookup

_CONFIDENCE_GUIDANCE = {
    "high": "the top passage very likely answers the query; read it and cite it",
    "medium": "the passages are relevant but may not answer fully; read them, then refine if needed",
    "low": "weak evidence: try suggested_next or rephrase before relying on these passages",
    "unknown": "no calibrated score for this KB or mode; judge the passages yourself before relying on them",
}


_Checked = TypeVar("_Checked")

SearcherFactory = Callable[[ServedKB], Searcher]
# A tool's arguments as the transport parsed them (JSON: nothing is trusted until boundary.py checks it),
# and a tool's JSON-ready answer.
Arguments = Mapping[str, object]
Payload = dict[str, object]


class FilterArguments(TypedDict, total=False):
    """pinakes_search's filter arguments, each checked at the boundary."""

    tags: list[str]
    all_tags: bool
    path_prefix: str
    source_type: list[str]
    since: str
    until: str


def default_searcher(kb: ServedKB) -> Searcher:
    return Searcher.for_kb(kb.root, kb.manifest)


class PinakesTools:
    """The tool implementations over a fixed set of served KBs. Thread-safe."""

    def __init__(self, kbs: Sequence[ServedKB], bounds: Bounds | None = None,
                 searcher_factory: SearcherFactory = default_searcher):
        if not kbs:
            raise ValueError("a server needs at least one KB")
        self.kbs = tuple(kbs)
        self.bounds = bounds or Bounds()
        self._by_key: dict[str, ServedKB] = {}
        for kb in self.kbs:
            self._by_key[kb.alias] = kb
            self._by_key[kb.kb_id] = kb
        self._searchers = {kb.kb_id: searcher_factory(kb) for kb in self.kbs}
        self._readers = {kb.kb_id: IndexReader(kb.paths.index_db) for kb in self.kbs}
        self._handlers: dict[str, Callable[[Arguments], Payload]] = {
            SEARCH_TOOL: self.search, GET_TOOL: self.get, LIST_KBS_TOOL: self.list_kbs, LINKS_TOOL: self.links,
            STATUS_TOOL: self.status,
        }

    def close(self) -> None:
        for searcher in self._searchers.values():
            searcher.close()
        for reader in self._readers.values():
            reader.close()

    def call(self, name: str, arguments: object) -> Payload:
        """Run tool `name` on `arguments` as the transport passed them: nothing about them is trusted."""
        handler = self._handlers.get(name)
        if handler is None:
            raise boundary.NotServedError(f"no tool named {name!r}",
                                          remedy=f"use one of: {', '.join(self._handlers)}")
        if arguments is not None and not isinstance(arguments, Mapping):
            raise boundary.ToolArgumentError("tool arguments must be a JSON object", remedy="pass {...}")
        # A JSON object's keys are strings; its values are checked by each tool at the boundary.
        checked = dict(cast(Arguments, arguments or {}))
        try:
            return cast(Payload, defused(handler(checked)))  # the KB's text outside the blocks too
        except sqlite3.DatabaseError as exc:
            # A damaged file is repaired by a rebuild; past the busy timeout, a retry may pass. Not a server bug.
            raise IndexUnreadableError(f"the index could not be read ({exc})",
                                       remedy="run `pnk sync --rebuild` in the KB" if is_damage(exc)
                                       else "retry; if it persists, run `pnk doctor` in the KB") from exc

    def describe_error(self, error: PinakesError) -> Payload:
        """A refusal as the caller sees it: message and remedy, with no machine-local path in it."""
        message, remedy = error.message, error.remedy
        shown_path = None
        if error.path is not None:
            shown_path = self._kb_relative(str(error.path))
        for kb in self.kbs:  # a core error may embed an absolute path in its text
            root = str(kb.root)
            message = message.replace(root + os.sep, "").replace(root, f"<kb {kb.alias}>")
            if remedy:
                remedy = remedy.replace(root + os.sep, "").replace(root, f"<kb {kb.alias}>")
        return cast(Payload, defused({"error": type(error).__name__, "message": message, "remedy": remedy,
                                      "path": shown_path}))  # an error may name a file or quote a title

    def _kb_relative(self, path: str) -> str | None:
        if not os.path.isabs(path):  # already KB-relative (a source path from the index)
            return path.replace(os.sep, "/")
        real = os.path.realpath(path)
        for kb in self.kbs:
            root = str(kb.root)
            if os.path.commonpath([real, root]) == root:
                return os.path.relpath(real, root).replace(os.sep, "/")
        return None

    # -- pinakes_list_kbs ------------------------------------------------------------------------

    def list_kbs(self, arguments: Arguments) -> Payload:
        boundary.check_argument_names(LIST_KBS_TOOL, arguments, ())
        return {"kbs": [self._describe_kb(kb, default=index == 0) for index, kb in enumerate(self.kbs)]}

    def _describe_kb(self, kb: ServedKB, *, default: bool) -> Payload:
        entry: Payload = {
            "alias": kb.alias, "id": kb.kb_id, "name": kb.name, "description": kb.manifest.kb.description,
            "default": default,
        }
        try:
            with self._readers[kb.kb_id].snapshot() as conn:
                entry.update(_index_summary(conn))
        except PinakesError as exc:
            problem = self.describe_error(exc)
            entry.update(indexed=False, documents=0, chunks=0,
                         problem={"message": problem["message"], "remedy": problem["remedy"]})
        return entry

    # -- pinakes_status ------------------------------------------------------------------------

    def status(self, arguments: Arguments) -> Payload:
        from pinakes.serve.status import kb_status

        boundary.check_argument_names(STATUS_TOOL, arguments, STATUS_ARGUMENTS)
        kb = self._kb(arguments.get("kb"))
        try:
            with self._readers[kb.kb_id].snapshot() as conn:
                return {"kb": _kb_reference(kb), **kb_status(kb, conn)}
        except IndexUnreadableError:
            raise
        except PinakesError as exc:  # not indexed yet: still a status
            problem = self.describe_error(exc)
            return {"kb": _kb_reference(kb), "name": kb.name, "indexed": False,
                    "problem": {"message": problem["message"], "remedy": problem["remedy"]},
                    "next_step": "the KB's owner runs `pnk sync` in it (this server never syncs)"}

    # -- pinakes_search --------------------------------------------------------------------------

    def search(self, arguments: Arguments) -> Payload:
        query, kb = self._request(SEARCH_TOOL, arguments, SEARCH_ARGUMENTS, "query", boundary.check_query,
                                  "pass the words to search for")
        mode = boundary.check_choice("mode", arguments.get("mode", "hybrid"), MODES)
        searcher = self._searchers[kb.kb_id]
        filter_arguments = _filter_arguments(arguments)
        requested_k = (boundary.check_int("k", arguments["k"], minimum=1) if "k" in arguments
                       else searcher.settings.final_k)
        k = min(requested_k, self.bounds.max_k)
        filters = make_filters(
            tags=filter_arguments.get("tags"), all_tags=filter_arguments.get("all_tags", False),
            path_prefix=filter_arguments.get("path_prefix"), since=filter_arguments.get("since"),
            until=filter_arguments.get("until"), source_types=filter_arguments.get("source_type"),
        )
        result = searcher.search(query, filters=filters, mode=mode, final_k=k)
        return self._search_response(kb, result, filter_arguments, requested_k)

    def _search_response(self, kb: ServedKB, result: SearchResult, filter_arguments: FilterArguments,
                         requested_k: int) -> Payload:
        bounds = self.bounds
        passages: list[Payload] = []
        chars_cut = 0
        for rank, passage in enumerate(result.passages, start=1):
            rendered, was_cut = self._passage(kb, rank, passage, bounds.passage_chars)
            passages.append(rendered)
            chars_cut += was_cut
        confidence = result.confidence.to_dict()
        confidence["guidance"] = _CONFIDENCE_GUIDANCE.get(result.confidence.level, "")
        confidence["source_guidance"] = SOURCE_GUIDANCE.get(result.confidence.source, "")
        response: Payload = {
            "kb": _kb_reference(kb),
            "query": result.query,
            "mode": result.mode,
            "reranked": result.reranked,
            "notice": UNTRUSTED_NOTICE,
            "passages": [],
            "confidence": confidence,
            "suggested_next": _suggested_next(kb, result, filter_arguments),
            "notes": list(result.notes),
            "truncated": None,
            "usage": {"tokens_estimated": 0, "token_budget": bounds.token_budget},
        }
        kept, dropped, budget_cut = self._fit_passages(kb, response, passages, result.passages)
        response["passages"] = kept
        truncated: Payload = {}
        if requested_k > bounds.max_k:
            truncated["rows"] = {"requested": requested_k, "returned": len(kept), "limit": bounds.max_k}
        if chars_cut:
            truncated["passage_chars"] = {"limit": bounds.passage_chars, "passages_cut": chars_cut}
        if dropped or budget_cut:
            truncated["tokens"] = {"budget": bounds.token_budget, "used": 0, "passages_dropped": dropped,
                                   "passage_cut": budget_cut}
        response["truncated"] = truncated or None
        _stamp_usage(response, bounds)
        return response

    def _passage(self, kb: ServedKB, rank: int, passage: Passage, limit: int) -> tuple[Payload, bool]:
        rendered = passage.to_dict()
        text, was_cut = cut(str(rendered.pop("text")), limit)
        evidence, escaped = envelope(text, citation=passage.citation, doc_id=passage.doc_id)
        entry: Payload = {"rank": rank, **rendered, "doc_uri": format_pnk_uri(kb.kb_id, passage.doc_id),
                                 "evidence": evidence}
        if was_cut:
            entry["evidence_cut"] = {"passage_chars": len(passage.text), "returned_chars": len(text)}
        if escaped:
            entry["delimiters_escaped"] = escaped
        return entry, was_cut

    def _fit_passages(self, kb: ServedKB, response: Payload, passages: list[Payload],
                      originals: Sequence[Passage]) -> tuple[list[Payload], int, bool]:
        """The passages that fit the token budget, in rank order: whole passages while they fit;
        if not even the first does, the first with its text shortened to fit."""
        bounds = self.bounds
        budget_chars = bounds.chars_for(bounds.token_budget)
        used = _json_chars(response) + 200  # the truncation report added afterwards
        kept: list[Payload] = []
        for passage in passages:
            size = _json_chars(passage) + 2
            if used + size > budget_chars:
                break
            kept.append(passage)
            used += size
        if kept or not passages:
            return kept, len(passages) - len(kept), False
        original = originals[0]
        limit = min(bounds.passage_chars, budget_chars - used - _json_chars(dict(passages[0], evidence="")) - 100)
        while limit > 0:  # JSON escaping makes the estimate approximate: shrink until it fits
            shortened, _ = self._passage(kb, 1, original, limit)
            shortened["evidence_cut"] = {"passage_chars": len(original.text),
                                         "returned_chars": min(limit, len(original.text))}
            overflow = used + _json_chars(shortened) + 2 - budget_chars
            if overflow <= 0:
                return [shortened], len(passages) - 1, True
            limit -= overflow + 16
        return [], len(passages), False

    # -- pinakes_get -----------------------------------------------------------------------------

    def get(self, arguments: Arguments) -> Payload:
        if "documents" in arguments:
            return self._get_many(arguments)
        doc_id, kb = self._request(GET_TOOL, arguments, GET_ARGUMENTS, "doc_id", boundary.check_doc_id,
                                   boundary.DOC_ID_REMEDY + " (or `documents` to read several)")
        document, indexed, select = self._reading(kb, doc_id, arguments)
        return self._get_response(kb, document, indexed, select)

    def _reading(self, kb: ServedKB, doc_id: str,
                 arguments: Arguments) -> tuple[DocumentRow, IndexedText, Callable[[int], Selection]]:
        """One document's read: its row, its indexed text, and the selection of its range at a limit."""
        char_start = _optional_int(arguments, "char_start", 0)
        char_end = _optional_int(arguments, "char_end", 1)
        page_start = _optional_int(arguments, "page_start", 1)
        page_end = _optional_int(arguments, "page_end", 1)
        by_pages = page_start is not None or page_end is not None
        if by_pages and (char_start is not None or char_end is not None):
            raise boundary.refuse("page_start", "cannot be combined with char_start/char_end",
                                  "pass either a character range or a page range")
        with self._readers[kb.kb_id].snapshot() as conn:
            document = find_document(conn, kb, doc_id)
        indexed = read_indexed_text(kb, document)
        if by_pages and indexed.pages is None:
            raise boundary.refuse("page_start", f"applies to PDFs; {document.path} is {document.source_type}",
                                  "pass char_start/char_end instead")

        def select(limit: int) -> Selection:
            if by_pages:
                return select_pages(indexed, page_start, page_end, limit)
            return select_chars(indexed, char_start, char_end, limit)

        return document, indexed, select

    def _get_many(self, arguments: Arguments) -> Payload:
        """Several documents in one call: the per-call character limit shared evenly, the whole
        response within the token budget (every share shrunk alike until it fits); a document that
        cannot be read is an error entry, not a failed call."""
        boundary.check_argument_names(GET_TOOL, arguments, GET_ARGUMENTS)
        alone = [name for name in GET_RANGE_ARGUMENTS if name in arguments]
        if alone:
            raise boundary.refuse(alone[0], "cannot be combined with `documents`",
                                  "put each document's doc_id and range inside its entry of `documents`")
        kb = self._kb(arguments.get("kb"))
        entries = boundary.check_objects("documents", arguments["documents"], most=MAX_GET_DOCUMENTS)
        readings: list[tuple[DocumentRow, IndexedText, Callable[[int], Selection]] | Payload] = []
        for number, entry in enumerate(entries):
            boundary.check_argument_names(f"{GET_TOOL} documents[{number}]", entry, GET_RANGE_ARGUMENTS)
            if "doc_id" not in entry:
                raise boundary.refuse(f"documents[{number}].doc_id", "is required", boundary.DOC_ID_REMEDY)
            doc_id = boundary.check_doc_id(entry["doc_id"])
            try:
                readings.append(self._reading(kb, doc_id, entry))
            except boundary.ToolArgumentError:
                raise
            except PinakesError as exc:
                readings.append({"doc_id": doc_id, "ok": False, **self.describe_error(exc)})
        bounds = self.bounds
        budget_chars = bounds.chars_for(bounds.token_budget)
        limit = bounds.get_chars // len(readings)
        while True:
            documents = [reading if isinstance(reading, dict) else self._get_entry(kb, *reading, limit)
                         for reading in readings]
            response: Payload = {"kb": _kb_reference(kb), "notice": UNTRUSTED_NOTICE, "documents": documents,
                                 "usage": {"tokens_estimated": 0, "token_budget": bounds.token_budget}}
            overflow = _json_chars(response) - budget_chars
            if overflow <= 0 or limit == 0:
                break
            limit = max(0, limit - overflow // max(1, len(readings)) - 64)
        _stamp_usage(response, bounds)
        return response

    def _get_entry(self, kb: ServedKB, document: DocumentRow, indexed: IndexedText,
                   select: Callable[[int], Selection], limit: int) -> Payload:
        entry = self._get_payload(kb, document, indexed, select(limit), limit)
        for shared in ("kb", "notice", "usage"):  # said once, by the whole response
            entry.pop(shared, None)
        if isinstance(entry["continue_with"], dict):  # an entry of the next call's `documents`
            entry["continue_with"] = {"doc_id": document.id, **cast("dict[str, object]", entry["continue_with"])}
        return {"ok": True, **entry}

    def _get_response(self, kb: ServedKB, document: DocumentRow, indexed: IndexedText,
                      select: Callable[[int], Selection]) -> Payload:
        bounds = self.bounds
        budget_chars = bounds.chars_for(bounds.token_budget)
        limit = bounds.get_chars
        while True:  # shrink to the token budget; JSON escaping makes each estimate approximate
            selection = select(limit)
            response = self._get_payload(kb, document, indexed, selection, limit)
            overflow = _json_chars(response) - budget_chars
            if overflow <= 0 or limit == 0:
                break
            limit = max(0, min(limit, len(selection.text)) - overflow - 64)
        _stamp_usage(response, bounds)
        return response

    def _get_payload(self, kb: ServedKB, document: DocumentRow, indexed: IndexedText, selection: Selection,
                     limit: int) -> Payload:
        bounds = self.bounds
        cited = citation(document.path, selection.char_start, selection.char_end, selection.page_start,
                         selection.page_end)
        evidence, escaped = envelope(selection.text, citation=cited, doc_id=document.id)
        truncated: Payload = {}
        if selection.cut is not None:
            if limit < bounds.get_chars:
                truncated["tokens"] = {"budget": bounds.token_budget, "used": 0, **selection.cut}
            else:
                truncated["chars"] = selection.cut
        response: Payload = {
            "kb": _kb_reference(kb),
            **selection_fields(document, indexed, selection),
            "doc_uri": format_pnk_uri(kb.kb_id, document.id),
            "notice": UNTRUSTED_NOTICE,
            "evidence": evidence,
            "truncated": truncated or None,
            "continue_with": selection.continue_with,
            "usage": {"tokens_estimated": 0, "token_budget": bounds.token_budget},
        }
        if escaped:
            response["delimiters_escaped"] = escaped
        return response

    # -- pinakes_links ---------------------------------------------------------------------------

    def links(self, arguments: Arguments) -> Payload:
        from pinakes.index.documents import UnknownDocumentError
        from pinakes.links.relevance import by_query
        from pinakes.links.traverse import DIRECTIONS, TraversalLimits, traverse

        doc_id, kb = self._request(LINKS_TOOL, arguments, LINKS_ARGUMENTS, "doc_id", boundary.check_doc_id,
                                   boundary.DOC_ID_REMEDY)
        direction = boundary.check_choice("direction", arguments.get("direction", "both"), DIRECTIONS)
        counts = {name: boundary.check_count(name, arguments[name]) if arguments.get(name) is not None else None
                  for name in ("depth", "adjacent_k", "max_rows", "max_tokens")}
        rels = boundary.check_rels(arguments["rel"]) if arguments.get("rel") is not None else []
        query = boundary.check_query(arguments["query"]) if arguments.get("query") is not None else None
        ranking = by_query(self._searchers[kb.kb_id], query) if query is not None else None
        with ExitStack() as stack:
            conn = stack.enter_context(self._readers[kb.kb_id].snapshot())
            try:
                result = traverse(conn, kb.kb_id, kb.alias, doc_id, lookup=self._link_lookup(kb, stack),
                                  direction=direction, default_adjacent_k=kb.manifest.retrieval.adjacent_k,
                                  limits=TraversalLimits(max_tokens=self.bounds.token_budget), rels=rels,
                                  ranking=ranking, **counts)
            except UnknownDocumentError:
                raise boundary.NotServedError(
                    f"no document {doc_id} in KB {kb.alias!r}, and no link names it",
                    remedy="use a doc_id from a pinakes_search result, and pass the `kb` that result came from",
                ) from None
        return {"kb": _kb_reference(kb), **result}

    def _link_lookup(self, start: ServedKB, stack: ExitStack) -> Lookup:
        """A neighbour's KB as this server sees it: served (read through its own per-request reader)
        or not, and then identified by its id and the alias the start KB's [[links.kb]] gives it."""
        from pinakes.links.traverse import KBView, documents_of

        def lookup(kb_id: str) -> KBView:
            served = next((kb for kb in self.kbs if kb.kb_id == kb_id), None)
            if served is None:
                listed = start.manifest.link(kb_id)
                alias = listed.alias if listed is not None else None
                return KBView(kb_id, alias, False, unreachable_reason=(
                    f"KB {alias or kb_id} is not served by this server; its documents cannot be read here "
                    "(the server's operator can add it with --kb)"))
            try:
                conn = stack.enter_context(self._readers[served.kb_id].snapshot())
            except PinakesError:
                return KBView(kb_id, served.alias, False, unreachable_reason=(
                    f"KB {served.alias} is served but its index cannot be read (`pnk sync` in it; "
                    "pinakes_list_kbs shows the problem)"))
            return KBView(kb_id, served.alias, True, documents_of(conn))

        return lookup

    # -- shared ----------------------------------------------------------------------------------

    def _request(self, tool: str, arguments: Arguments, takes: Sequence[str], required: str,
                 check: Callable[[object], _Checked], remedy: str) -> tuple[_Checked, ServedKB]:
        """What every tool does first: refuse an argument it does not take, refuse a call without its
        `required` argument (`remedy` says what to pass), check that one, and find the KB named."""
        boundary.check_argument_names(tool, arguments, takes)
        if required not in arguments:
            raise boundary.refuse(required, "is required", remedy)
        return check(arguments[required]), self._kb(arguments.get("kb"))

    def _kb(self, value: object) -> ServedKB:
        if value is None:
            return self.kbs[0]
        name = boundary.check_kb_name(value)
        kb = self._by_key.get(name)
        if kb is None:
            served = ", ".join(f"{kb.alias} ({kb.kb_id})" for kb in self.kbs)
            what = "KB ULID" if is_ulid(name) else "KB alias"
            raise boundary.NotServedError(f"this server does not serve a KB with {what} {name!r}",
                                          remedy=f"pass one of: {served} (see pinakes_list_kbs)")
        return kb


def _filter_arguments(arguments: Arguments) -> FilterArguments:
    """The filter arguments, validated at the boundary (make_filters validates their meaning)."""
    clean: FilterArguments = {}
    if "tags" in arguments:
        clean["tags"] = boundary.check_tags(arguments["tags"])
    if "all_tags" in arguments:
        clean["all_tags"] = boundary.check_bool("all_tags", arguments["all_tags"])
        if clean["all_tags"] and not clean.get("tags"):
            raise boundary.refuse("all_tags", "needs at least one tag", "pass `tags`, or drop `all_tags`")
    if "path_prefix" in arguments:
        clean["path_prefix"] = boundary.check_path_prefix(arguments["path_prefix"])
    if "source_type" in arguments:
        clean["source_type"] = boundary.check_choices("source_type", arguments["source_type"], SOURCE_TYPES)
    if "since" in arguments:
        clean["since"] = boundary.check_date("since", arguments["since"])
    if "until" in arguments:
        clean["until"] = boundary.check_date("until", arguments["until"])
    return clean


def _optional_int(arguments: Arguments, name: str, minimum: int) -> int | None:
    value = arguments.get(name)
    return None if value is None else boundary.check_int(name, value, minimum=minimum)


def _kb_reference(kb: ServedKB) -> dict[str, str]:
    return {"alias": kb.alias, "id": kb.kb_id}


def _suggested_next(kb: ServedKB, result: SearchResult, filter_arguments: FilterArguments) -> Payload | None:
    """The search's own suggestion, as the pinakes_search call that follows it."""
    suggestion = result.suggested_next
    if suggestion is None:
        return None
    arguments: Payload = {"query": suggestion.query, "kb": kb.alias}
    if suggestion.mode != "hybrid":
        arguments["mode"] = suggestion.mode
    if suggestion.filters is None:
        arguments.update(filter_arguments)
    else:
        arguments.update({key: value for key, value in suggestion.filters.items()
                          if key in FILTER_ARGUMENTS and value not in (None, [], (), False, "")})
    return {"tool": SEARCH_TOOL, "arguments": arguments, "reason": suggestion.reason}


def _index_summary(conn: sqlite3.Connection) -> Payload:
    documents, last_indexed = conn.execute(
        "SELECT count(*), max(indexed_at) FROM documents WHERE state = 'active'").fetchone()
    chunks = conn.execute(
        "SELECT count(*) FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE d.state = 'active'"
    ).fetchone()[0]
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dim')"))
    return {"indexed": True, "documents": int(documents), "chunks": int(chunks), "last_indexed": last_indexed,
            "embedding_model": meta.get("embedding_model")}


def _json_chars(payload: object) -> int:
    import json

    return len(json.dumps(payload, ensure_ascii=False))


def _stamp_usage(response: Payload, bounds: Bounds) -> None:
    """Fill in the estimated tokens of the final response (the two numbers shift it by a few chars)."""
    estimate = bounds.tokens(response)
    # "usage" and "truncated" are the objects this module put there.
    cast("dict[str, object]", response["usage"])["tokens_estimated"] = estimate
    truncated = cast("dict[str, dict[str, object]] | None", response.get("truncated"))
    tokens = (truncated or {}).get("tokens")
    if tokens is not None:
        tokens["used"] = estimate
