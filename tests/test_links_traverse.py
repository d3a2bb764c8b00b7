"""Traversal (spec §4, §8): `pinakes_links` in-process and `pnk links`, over copies of the two KBs.
From a demo-kb document the partner document is reached and the walk stops there (terminal); each of
the frontier reasons depth, fanout, rows and tokens is produced at absurd bounds, which are clamped
and reported; confidence is always unknown."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.errors import PinakesError
from pinakes.links import authoring
from pinakes.serve import boundary
from pinakes.serve.config import load_kb
from pinakes.serve.tools import PinakesTools
from tests.test_links_helpers import (
    ABSENT_DOC,
    DEMO_ID,
    DEMO_OUTGOING,
    PARTNER_BORROWING,
    PARTNER_ID,
    append_link,
    copy_kbs,
    sync,
)
from tests.test_serve_helpers import call_tool

HUB = "docs/governance/about.md"
CHAIN = ["docs/governance/access-and-closure.md", "docs/governance/collections-development-policy.md",
         "docs/governance/fees-and-charges.txt", "docs/loans/couriers.md"]


@pytest.fixture(scope="module")
def kbs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    demo, partner = copy_kbs(tmp_path_factory.mktemp("traverse"))
    # a chain longer than the depth limit: hub -> c0 -> c1 -> c2 -> c3, and the hub links out wide
    authoring.link(demo, HUB, CHAIN[0], "next")
    for first, second in itertools.pairwise(CHAIN):
        authoring.link(demo, first, second, "next")
    docs = sorted(path for path in (demo / "docs").rglob("*.md") if path.as_posix().count("/governance/") == 0)
    for path in docs[:12]:
        authoring.link(demo, HUB, str(path), "see-also")
    authoring.link(demo, HUB, "partner:docs/about.md", "partner-about")
    sync(demo)
    sync(partner)
    return demo, partner


@pytest.fixture(scope="module")
def both(kbs: tuple[Path, Path]) -> Iterator[PinakesTools]:
    tools = PinakesTools([load_kb(kbs[0], "archive"), load_kb(kbs[1], "museum")])
    yield tools
    tools.close()


@pytest.fixture(scope="module")
def demo_only(kbs: tuple[Path, Path]) -> Iterator[PinakesTools]:
    tools = PinakesTools([load_kb(kbs[0], "archive")])
    yield tools
    tools.close()


def _hub_id(demo: Path) -> str:
    from pinakes.sidecar import read_sidecar

    return read_sidecar(demo / f"{HUB}.pnk.yaml", kb_id=DEMO_ID).id


def test_a_demo_document_reaches_the_partner_document_and_stops_there(both: PinakesTools) -> None:
    result = call_tool(both, "pinakes_links", {"doc_id": DEMO_OUTGOING, "depth": 3})
    partner = [n for n in result["neighbours"] if n["kb"]["id"] == PARTNER_ID]
    assert [n["doc_id"] for n in partner] == [PARTNER_BORROWING]
    neighbour = partner[0]
    assert neighbour["title"] == "Borrowing documents from the record office"
    assert neighbour["path"] == "docs/loans/borrowing-from-the-archive.md"
    assert (neighbour["resolved"], neighbour["reachable"], neighbour["terminal"]) == (True, True, True)
    assert neighbour["direction"] == "both"  # authored both ways: lender-policy in, partner-procedure out
    assert {(e["rel"], e["direction"]) for e in neighbour["edges"]} == {("partner-procedure", "out"),
                                                                        ("lender-policy", "in")}
    assert {"doc_id": PARTNER_BORROWING, "reason": "terminal"}.items() <= next(
        e for e in result["frontier"] if e["doc_id"] == PARTNER_BORROWING).items()
    # nothing beyond the partner document: its own see-also is not followed
    assert all(n["kb"]["id"] == DEMO_ID or n["hop"] == 1 for n in result["neighbours"])
    assert result["confidence"]["level"] == "unknown"


def test_a_kb_the_server_does_not_serve_is_identified_and_unreachable(demo_only: PinakesTools) -> None:
    result = call_tool(demo_only, "pinakes_links", {"doc_id": DEMO_OUTGOING})
    neighbour = next(n for n in result["neighbours"] if n["kb"]["id"] == PARTNER_ID)
    assert neighbour["doc_uri"] == f"pnk://{PARTNER_ID}/{PARTNER_BORROWING}"
    assert neighbour["kb"]["alias"] == "partner"  # from [[links.kb]]: identified, not hidden
    assert (neighbour["reachable"], neighbour["resolved"], neighbour["title"]) == (False, None, None)
    assert "not served" in neighbour["reason"]


def test_depth_is_clamped_and_a_longer_chain_ends_on_a_depth_frontier(both: PinakesTools, kbs: tuple[Path, Path]) -> None:
    result = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), "depth": 10**12, "direction": "out"})
    assert result["bounds"]["depth"] == {"requested": 10**12, "used": 3, "min": 1, "max": 3, "clamped": True}
    depth = [e for e in result["frontier"] if e["reason"] == "depth"]
    assert depth and all(e["hop"] == 3 for e in depth)
    assert max(n["hop"] for n in result["neighbours"]) == 3


def test_adjacent_k_caps_fanout_after_ranking(both: PinakesTools, kbs: tuple[Path, Path]) -> None:
    result = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), "depth": 2, "adjacent_k": 1, "direction": "out"})
    hop_one = [n for n in result["neighbours"] if n["hop"] == 1]
    # the cap bounds which neighbours are expanded, never which are listed (issue #40)
    direct = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), "direction": "out"})["neighbours"]
    assert [n["doc_id"] for n in hop_one] == [n["doc_id"] for n in direct] and len(hop_one) == 14
    hop_two = [n for n in result["neighbours"] if n["hop"] == 2]
    assert hop_two and {n["via"] for n in hop_two} == {hop_one[0]["doc_id"]}  # only the best-ranked expanded
    reasons = {e["reason"] for e in result["frontier"] if e["hop"] == 1}
    assert "fanout" in reasons
    assert all(e["via"] == hop_one[0]["via"] for e in result["frontier"] if e["reason"] == "fanout")
    assert result["truncated"] is None  # nothing found was left unlisted
    # the partner neighbour cut by fan-out is terminal first: retrying with a larger adjacent_k would
    # return it, never expand it
    assert next(e for e in result["frontier"] if e["kb_id"] == PARTNER_ID)["reason"] == "terminal"
    again = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), "depth": 2, "adjacent_k": 1, "direction": "out"})
    assert again["neighbours"] == result["neighbours"]  # ranked, so the same one every time


def test_the_row_cap_cuts_and_says_so(both: PinakesTools, kbs: tuple[Path, Path]) -> None:
    result = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), "depth": 2, "max_rows": 1, "adjacent_k": 10**9})
    assert len(result["neighbours"]) == 1
    assert result["bounds"]["adjacent_k"]["clamped"] and result["bounds"]["adjacent_k"]["used"] == 50
    assert result["truncated"]["rows"]["limit"] == 1 and "tokens" not in result["truncated"]
    assert "rows" in {e["reason"] for e in result["frontier"]}


def test_the_token_cap_cuts_independently_of_rows(both: PinakesTools, kbs: tuple[Path, Path]) -> None:
    result = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), "depth": 2, "max_tokens": 1, "max_rows": 10**9})
    assert result["bounds"]["max_tokens"]["used"] == 1000 and result["bounds"]["max_tokens"]["clamped"]
    assert result["bounds"]["max_rows"]["used"] == 200
    assert "tokens" in result["truncated"] and "rows" not in result["truncated"]
    reasons = {e["reason"] for e in result["frontier"]} | set(result["frontier_omitted"])
    assert "tokens" in reasons
    assert result["usage"]["tokens_estimated"] <= 1000


def test_every_reason_is_one_of_five_and_confidence_is_unknown(both: PinakesTools, kbs: tuple[Path, Path]) -> None:
    for arguments in ({"depth": 3}, {"depth": 2, "adjacent_k": 1}, {"max_rows": 2}, {"max_tokens": 1}):
        result = call_tool(both, "pinakes_links", {"doc_id": _hub_id(kbs[0]), **arguments})
        assert {e["reason"] for e in result["frontier"]} <= {"terminal", "depth", "fanout", "rows", "tokens"}
        assert result["confidence"]["level"] == "unknown"


def test_an_unresolved_target_comes_back_with_its_reason(tmp_path: Path) -> None:
    demo, _partner = copy_kbs(tmp_path)

    append_link(demo / "docs/loans/outgoing.md.pnk.yaml", f"pnk://self/{ABSENT_DOC}", "gone")
    sync(demo)
    tools = PinakesTools([load_kb(demo)])
    try:
        result = call_tool(tools, "pinakes_links", {"doc_id": DEMO_OUTGOING, "direction": "out"})
    finally:
        tools.close()
    gone = next(n for n in result["neighbours"] if n["doc_id"] == ABSENT_DOC)
    assert (gone["resolved"], gone["terminal"]) == (False, True) and "not an active document" in gone["reason"]


@pytest.mark.parametrize(("arguments", "argument"), [
    ({"doc_id": DEMO_OUTGOING, "depth": 0}, "depth"),
    ({"doc_id": DEMO_OUTGOING, "adjacent_k": -1}, "adjacent_k"),
    ({"doc_id": DEMO_OUTGOING, "max_rows": "5"}, "max_rows"),
    ({"doc_id": DEMO_OUTGOING, "max_tokens": True}, "max_tokens"),
    ({"doc_id": DEMO_OUTGOING, "direction": "sideways"}, "direction"),
    ({"doc_id": "docs/loans/outgoing.md"}, "doc_id"),
    ({"doc_id": DEMO_OUTGOING, "path": "/etc"}, "path"),
])
def test_bad_arguments_are_refused_at_the_boundary(both: PinakesTools, arguments: dict[str, object],
                                                   argument: str) -> None:
    with pytest.raises(boundary.ToolArgumentError, match=f"`{argument}`"):
        both.call("pinakes_links", arguments)


def test_an_unknown_start_is_not_found(both: PinakesTools) -> None:
    with pytest.raises(PinakesError, match="no document"):
        both.call("pinakes_links", {"doc_id": ABSENT_DOC})


def test_pnk_links_prints_and_clamps(kbs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    demo, _ = kbs
    assert main(["-C", str(demo), "links", "docs/loans/outgoing.md", "--depth", "99"]) == 0
    out = capsys.readouterr().out
    assert "Borrowing documents from the record office" in out and "KB partner" in out
    assert "depth 99 was clamped to 3" in out
    # the frontier in plain words (issue #26 item 10): no reason codes, and what to do about each
    assert "terminal" not in out and "frontier" not in out
    assert "1 in another KB (to go on, run `pnk links` on it in that KB)" in out
    assert main(["-C", str(demo), "links", HUB, "--depth", "2", "--adjacent-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "at the last hop (--depth 3 follows them)" in out
    assert "beyond the neighbours followed per document (raise --adjacent-k)" in out
    assert main(["-C", str(demo), "links", DEMO_OUTGOING, "--json", "--direction", "in"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {n["doc_id"] for n in result["neighbours"]} >= {PARTNER_BORROWING}
    assert all(n["direction"] in ("in", "both") for n in result["neighbours"])
    assert main(["-C", str(demo), "links", "partner:docs/about.md"]) == 2  # not a document of this KB


def test_every_direct_link_is_listed_by_default_and_a_cut_is_said(kbs: tuple[Path, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #40: at depth 1 with `adjacent_k` 5, a document's sixth link was silently missing and
    `truncated` was null. Every direct link is listed; a neighbour left out is one a row cap cut."""
    demo, _ = kbs
    out_links = 14  # the fixture's hub: next, 12 see-also and the partner document
    assert main(["-C", str(demo), "links", HUB, "--direction", "out", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["bounds"]["adjacent_k"]["used"] == 5  # the KB's default: it bounds expansion only
    assert len(result["neighbours"]) == out_links and result["truncated"] is None
    assert main(["-C", str(demo), "links", HUB, "--direction", "out", "--max-rows", "4", "--json"]) == 0
    cut = json.loads(capsys.readouterr().out)
    assert len(cut["neighbours"]) == 4
    assert cut["truncated"]["rows"] == {"limit": 4, "returned": 4, "neighbours_cut": out_links - 4}
    assert main(["-C", str(demo), "links", HUB, "--direction", "out", "--max-rows", "4"]) == 0
    assert f"note: {out_links - 4} neighbours cut by the rows cap" in capsys.readouterr().out


def test_a_long_relation_is_shown_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue #40: a sidecar's 100 kB relation and a 100 kB `--rel` were printed whole."""
    demo, _partner = copy_kbs(tmp_path)
    huge = "r" * 100_000
    append_link(demo / "docs/loans/outgoing.md.pnk.yaml", f"pnk://self/{ABSENT_DOC}", huge)
    sync(demo)
    assert main(["-C", str(demo), "links", "docs/loans/outgoing.md", "--direction", "out", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (gone,) = [n for n in result["neighbours"] if n["doc_id"] == ABSENT_DOC]
    assert gone["rel"] == gone["edges"][0]["rel"] == "r" * (authoring.MAX_REL_CHARS - 1) + "…"
    assert main(["-C", str(demo), "links", "docs/loans/outgoing.md", "--direction", "out"]) == 0
    out = capsys.readouterr().out
    assert "r" * (authoring.MAX_REL_CHARS - 1) + "…" in out and len(out) < 5_000
    assert main(["-C", str(demo), "links", "docs/loans/outgoing.md", "--rel", huge]) == 2
    err = capsys.readouterr().err
    assert "is not a relation name" in err and len(err) < 1_000
