"""`pinakes_get` of several documents in one call, and `pinakes_status`, in-process over a real KB
indexed by a real sync (fake embedder). Over MCP: test_serve_e2e.py lists both tools."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinakes.errors import ToolArgumentError
from pinakes.serve.bounds import Bounds
from pinakes.serve.specs import MAX_GET_DOCUMENTS
from pinakes.serve.tools import PinakesTools
from tests.test_serve_helpers import call_tool, doc_ids, make_kb, sync_kb
from tests.test_serve_tools import serve

ALPHA = "# Alpha\n\nThe alpha document talks about aeroplanes.\n\n## Wings\n\nWings generate lift.\n"
HARBOUR = "# Harbour\n\nBoats rest in the harbour at night.\n"
GARDEN = "Gardens need water and sun.\n"
ABSENT = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", "planes", {"alpha.md": ALPHA, "sea/harbour.md": HARBOUR, "garden.txt": GARDEN})
    sync_kb(root)
    return root


@pytest.fixture
def tools(kb: Path) -> Iterator[PinakesTools]:
    served = serve(kb)
    yield served
    served.close()


# -- pinakes_get: several documents ------------------------------------------------------------------


def test_several_documents_in_one_call_each_with_its_own_range(tools: PinakesTools, kb: Path) -> None:
    ids = doc_ids(kb)
    result = call_tool(tools, "pinakes_get", {"documents": [
        {"doc_id": ids["docs/alpha.md"], "char_start": 0, "char_end": 7},
        {"doc_id": ids["docs/sea/harbour.md"]},
    ]})
    first, second = result["documents"]
    assert first["ok"] and first["citation"] == "docs/alpha.md:0-7" and "# Alpha" in first["evidence"]
    assert second["ok"] and second["path"] == "docs/sea/harbour.md" and "harbour at night" in second["evidence"]
    assert set(result) == {"kb", "notice", "documents", "usage"}  # said once for the whole answer
    assert "notice" not in first and "kb" not in first


def test_a_document_that_cannot_be_read_is_an_error_entry_not_a_failed_call(tools: PinakesTools, kb: Path) -> None:
    ids = doc_ids(kb)
    (kb / "docs" / "garden.txt").write_text("Gardens need water, sun and patience.\n", encoding="utf-8")  # not synced
    result = call_tool(tools, "pinakes_get", {"documents": [{"doc_id": ABSENT}, {"doc_id": ids["docs/garden.txt"]},
                                                      {"doc_id": ids["docs/alpha.md"]}]})
    absent, changed, alpha = result["documents"]
    assert absent["ok"] is False and absent["error"] == "NotServedError" and absent["doc_id"] == ABSENT
    assert changed["ok"] is False and "pnk sync" in changed["remedy"]
    assert alpha["ok"] is True


def test_several_documents_share_the_per_call_limit_and_the_token_budget(kb: Path) -> None:
    long_text = "".join(f"Sentence {number} about long documents.\n" for number in range(2_000))
    (kb / "docs" / "long1.md").write_text(long_text, encoding="utf-8")
    (kb / "docs" / "long2.md").write_text(long_text, encoding="utf-8")
    sync_kb(kb)
    ids = doc_ids(kb)
    bounds = Bounds(get_chars=6_000, token_budget=2_500)
    served = serve(kb, bounds=bounds)
    try:
        result = call_tool(served, "pinakes_get", {"documents": [{"doc_id": ids["docs/long1.md"]},
                                                           {"doc_id": ids["docs/long2.md"]}]})
    finally:
        served.close()
    assert len(json.dumps(result, ensure_ascii=False)) <= bounds.chars_for(bounds.token_budget)
    assert result["usage"]["tokens_estimated"] <= bounds.token_budget
    for entry in result["documents"]:
        assert entry["ok"] and entry["truncated"] is not None
        assert entry["continue_with"]["doc_id"] == entry["doc_id"]  # each reads on from where it was cut
        assert entry["char_end"] - entry["char_start"] <= bounds.get_chars // 2


@pytest.mark.parametrize(("arguments", "says"), [
    ({"documents": []}, "non-empty list"),
    ({"documents": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "list of objects"),
    ({"documents": [{"doc_id": ABSENT}] * (MAX_GET_DOCUMENTS + 1)}, f"at most {MAX_GET_DOCUMENTS}"),
    ({"documents": [{"doc_id": ABSENT, "path": "docs/alpha.md"}]}, "does not take `path`"),
    ({"documents": [{"char_start": 0}]}, "documents[0].doc_id` is required"),
    ({"documents": [{"doc_id": "../etc/passwd"}]}, "not a document ULID"),
    ({"documents": [{"doc_id": ABSENT}], "doc_id": ABSENT}, "cannot be combined with `documents`"),
    ({}, "is required"),
])
def test_a_malformed_documents_argument_is_refused(tools: PinakesTools, arguments: dict[str, object],
                                                   says: str) -> None:
    with pytest.raises(ToolArgumentError) as refused:
        tools.call("pinakes_get", arguments)
    assert says in refused.value.message


# -- pinakes_status ----------------------------------------------------------------------------------


def test_status_of_a_fresh_kb(tools: PinakesTools, kb: Path) -> None:
    status = call_tool(tools, "pinakes_status", {})
    assert status["kb"]["alias"] == "planes" and status["name"] == "planes" and status["indexed"] is True
    assert status["documents"] == 3 and status["chunks"] >= 3
    assert status["last_sync"] and status["sync_unfinished"] is False and status["sync_lock_present"] is False
    assert status["model"]["matches"] is True
    assert status["fresh"] is True and status["next_step"] is None
    assert status["stale"]["count"] == 0 and status["failed"]["count"] == 0
    assert status["unresolved_links"]["count"] == 0


def test_status_lists_files_changed_added_and_deleted_since_the_last_sync(tools: PinakesTools, kb: Path) -> None:
    (kb / "docs" / "alpha.md").write_text(ALPHA + "\nA new line.\n", encoding="utf-8")
    (kb / "docs" / "new.md").write_text("# New\n", encoding="utf-8")
    os.remove(kb / "docs" / "garden.txt")
    status = call_tool(tools, "pinakes_status", {})
    stale = status["stale"]
    assert stale["changed"] == ["docs/alpha.md"] and stale["added"] == ["docs/new.md"]
    assert "docs/garden.txt" in stale["deleted"] and stale["count"] == 1 + 1 + stale["deleted_count"]
    assert status["fresh"] is False and "pnk sync" in status["next_step"] and "never syncs" in status["next_step"]
    sync_kb(kb)
    after = call_tool(tools, "pinakes_status", {})["stale"]
    assert after["count"] == 0, after  # what the sync saw is no longer stale


def test_status_reports_an_authored_link_to_no_document_as_unresolved(tools: PinakesTools, kb: Path) -> None:
    ids = doc_ids(kb)
    sidecar = kb / "docs" / "alpha.md.pnk.yaml"
    text = sidecar.read_text(encoding="utf-8").replace("links: []", f"links:\n  - target: pnk://self/{ABSENT}\n    rel: cites\n")
    sidecar.write_text(text, encoding="utf-8")
    sync_kb(kb)
    unresolved = call_tool(tools, "pinakes_status", {})["unresolved_links"]
    assert unresolved["count"] == 1
    assert unresolved["shown"] == [{"from": "docs/alpha.md", "origin": "sidecar", "target": ABSENT, "rel": "cites"}]
    assert ids["docs/alpha.md"] != ABSENT


def test_status_lists_links_written_in_text_that_name_no_document_with_their_line(
        tools: PinakesTools, kb: Path) -> None:
    (kb / "docs" / "bread.md").write_text("# Bread\n\nFed daily.\nSee [[Sourdough starter log]] and "
                                         "[the harbour](sea/harbour.md).\n", encoding="utf-8")
    sync_kb(kb)
    unresolved = call_tool(tools, "pinakes_status", {})["unresolved_links"]
    assert unresolved["count"] == 1  # the Markdown link resolves; the wikilink names no document
    assert unresolved["shown"] == [{"from": "docs/bread.md:4", "origin": "text",
                                    "target": "Sourdough starter log", "status": "unresolved"}]


def test_status_of_a_kb_never_synced_says_what_to_run(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "empty", {"a.md": "# A\n"})
    served = serve(root)
    try:
        status = call_tool(served, "pinakes_status", {})
    finally:
        served.close()
    assert status["indexed"] is False and "pnk sync" in status["problem"]["remedy"]
    assert str(tmp_path) not in json.dumps(status)  # no machine-local path in an answer


def test_status_takes_only_kb(tools: PinakesTools) -> None:
    with pytest.raises(ToolArgumentError, match="does not take `path`"):
        tools.call("pinakes_status", {"path": "/etc"})


@pytest.mark.parametrize("value", ["../other", "/etc/passwd", "file:///etc", "notes*"])
def test_status_refuses_a_path_like_kb(tools: PinakesTools, value: str) -> None:
    with pytest.raises(ToolArgumentError, match="`kb`"):
        tools.call("pinakes_status", {"kb": value})
