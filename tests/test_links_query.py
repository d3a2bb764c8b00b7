"""Issue #26 item 11: `pnk links DOC --rel REL --query TEXT` and the `rel` / `query` arguments of
MCP `pinakes_links`. Relations from real `pnk link` calls, indexed by sync; neighbours ranked by the
search pipeline itself (the same order `pnk search` gives those documents), the frontier and the set
of neighbours unchanged by a query, and every argument checked at the server boundary."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.links import authoring
from pinakes.search.core import Searcher, SearchSettings
from pinakes.serve import boundary
from pinakes.serve.config import ServedKB, load_kb
from pinakes.serve.tools import PinakesTools
from tests.fakes import FakeEmbedder, substitute_embedder
from tests.test_links_helpers import copy_kbs, sync
from tests.test_serve_helpers import call_tool, manifest_fake_embedder

HUB = "docs/governance/about.md"
CITED = ["docs/loans/insurance-and-valuation.md", "docs/loans/couriers.md", "docs/loans/outgoing.md",
         "docs/loans/incoming.md"]
SEEN = ["docs/governance/access-and-closure.md", "docs/governance/fees-and-charges.txt"]
QUERY = "insurance valuation of loaned documents"


@pytest.fixture(scope="module")
def kbs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    demo, partner = copy_kbs(tmp_path_factory.mktemp("links-query"))
    for path in CITED:
        authoring.link(demo, HUB, path, "cites")
    for path in SEEN:
        authoring.link(demo, HUB, path, "see-also")
    authoring.link(demo, HUB, "partner:docs/about.md", "cites")
    authoring.link(demo, CITED[1], CITED[2], "cites")  # a second hop, for the frontier
    sync(demo)
    sync(partner)
    return demo, partner


@pytest.fixture(autouse=True)
def fake_query_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake embedder for query vectors too, under each KB's own model identity (as sync used)."""
    def fake(section: Any, **_: object) -> FakeEmbedder:
        return FakeEmbedder(dim=section.dim, model=section.model, provider=section.provider)

    substitute_embedder(monkeypatch, fake)


def _links(root: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["-C", str(root), "links", HUB, *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _paths(result: dict[str, Any]) -> list[str | None]:
    return [item["path"] for item in result["neighbours"]]


def test_rel_follows_only_links_with_those_relations(kbs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    demo, _ = kbs
    cited = _links(demo, capsys, "--rel", "cites", "--direction", "out", "--adjacent-k", "20")
    assert cited["rel"] == ["cites"]
    assert {edge["rel"] for item in cited["neighbours"] for edge in item["edges"]} == {"cites"}
    assert set(_paths(cited)) == {*CITED, "docs/about.md"}  # the last: the partner's document
    both = _links(demo, capsys, "--rel", "cites", "--rel", "see-also", "--direction", "out", "--adjacent-k", "20")
    assert set(_paths(both)) == {*CITED, *SEEN, "docs/about.md"}
    everything = _links(demo, capsys, "--direction", "out", "--adjacent-k", "20")
    assert everything["rel"] is None and set(_paths(everything)) >= set(_paths(both))
    capsys.readouterr()
    assert main(["-C", str(demo), "links", HUB, "--rel", "no-such-relation"]) == 0
    assert "no linked documents with that relation" in capsys.readouterr().out


def test_query_orders_this_kbs_neighbours_as_search_does_and_changes_nothing_else(
        kbs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    demo, _ = kbs
    plain = _links(demo, capsys, "--rel", "cites", "--depth", "2", "--adjacent-k", "3")
    ranked = _links(demo, capsys, "--rel", "cites", "--depth", "2", "--adjacent-k", "3", "--query", QUERY)
    assert ranked["query"] == QUERY and "query" in plain and plain["query"] is None
    # the same neighbours, expansions and frontier: only the order within each hop moves
    assert sorted(map(str, _paths(ranked))) == sorted(map(str, _paths(plain)))
    assert ranked["frontier"] == plain["frontier"] and ranked["frontier_omitted"] == plain["frontier_omitted"]
    hop1 = [item for item in ranked["neighbours"] if item["hop"] == 1]
    ranks = [item["relevance"]["rank"] for item in hop1 if item["relevance"]]
    assert ranks == sorted(ranks) and len(ranks) >= 2
    assert all(item["relevance"] is None for item in ranked["neighbours"] if not item["kb"]["this_kb"])
    # the order is the search pipeline's: `pnk search` ranks these documents the same way
    capsys.readouterr()
    assert main(["-C", str(demo), "search", QUERY, "--json", "-k", "50"]) == 0
    searched = [passage["path"] for passage in json.loads(capsys.readouterr().out)["passages"]]
    listed = {item["path"] for item in hop1 if item["relevance"]}
    expected = list(dict.fromkeys(path for path in searched if path in listed))
    # (the first only: restricted to these documents, each retriever's ranks are renumbered, and the
    # reciprocal-rank fusion of renumbered ranks may order the later ones differently)
    assert [item["path"] for item in hop1 if item["relevance"]][:1] == expected[:1]
    # with every neighbour listed, the document about the query comes first, whatever its link count
    wide = _links(demo, capsys, "--rel", "cites", "--adjacent-k", "20", "--query", QUERY)
    assert wide["neighbours"][0]["path"] == "docs/loans/insurance-and-valuation.md"
    assert _paths(_links(demo, capsys, "--rel", "cites", "--adjacent-k", "20"))[0] != wide["neighbours"][0]["path"]


def test_query_in_the_text_output(kbs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    demo, _ = kbs
    capsys.readouterr()
    assert main(["-C", str(demo), "links", HUB, "--rel", "cites", "--query", QUERY]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  only links with relation cites"
    assert out[2].startswith(f"  ranked by relevance to '{QUERY}'")
    assert "Insurance and valuation" in out[3] and out[3].endswith("relevance #1)")
    assert main(["-C", str(demo), "links", HUB, "--query", "  "]) == 2
    assert main(["-C", str(demo), "links", HUB, "--rel", "x" * 65]) == 2


@pytest.fixture(scope="module")
def tools(kbs: tuple[Path, Path]) -> Iterator[PinakesTools]:
    def searcher(kb: ServedKB) -> Searcher:
        return Searcher(kb.paths.index_db, SearchSettings.from_retrieval(kb.manifest.retrieval),
                        embedder=manifest_fake_embedder(kb.root), embedding_section=kb.manifest.embedding)

    served = PinakesTools([load_kb(kbs[0], "archive"), load_kb(kbs[1], "museum")], searcher_factory=searcher)
    yield served
    served.close()


def test_mcp_takes_rel_and_query_and_answers_as_the_cli_does(tools: PinakesTools, kbs: tuple[Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.sidecar import read_sidecar
    from tests.test_links_helpers import DEMO_ID

    hub = read_sidecar(kbs[0] / f"{HUB}.pnk.yaml", kb_id=DEMO_ID).id
    result = call_tool(tools, "pinakes_links", {"doc_id": hub, "rel": ["cites"], "query": QUERY, "direction": "out"})
    cli = _links(kbs[0], capsys, "--rel", "cites", "--query", QUERY, "--direction", "out")
    assert [item["doc_id"] for item in result["neighbours"]] == [item["doc_id"] for item in cli["neighbours"]]
    assert result["rel"] == ["cites"] and result["query"] == QUERY
    assert result["neighbours"][0]["relevance"]["rank"] == 1
    single = call_tool(tools, "pinakes_links", {"doc_id": hub, "rel": "see-also"})
    assert {item["path"] for item in single["neighbours"]} == set(SEEN)


@pytest.mark.parametrize(("value", "says"), [
    ({"rel": "/etc/passwd"}, "absolute path"),
    ({"rel": "../cites"}, "`..` segment"),
    ({"rel": "file:///etc"}, "URI"),
    ({"rel": "x" * 65}, "the limit is 64"),
    ({"rel": ["cites"] * 17}, "the limit is 16"),
    ({"rel": 3}, "must be a relation name"),
    ({"rel": []}, "must be a relation name"),
    ({"rel": ["cites\x00"]}, "NUL"),
    ({"query": "x" * (boundary.MAX_QUERY_CHARS + 1)}, "the limit is"),
    ({"query": "loans\x07"}, "control character"),
    ({"query": 5}, "must be a string"),
])
def test_rel_and_query_are_checked_at_the_boundary(tools: PinakesTools, kbs: tuple[Path, Path],
                                                   value: dict[str, Any], says: str) -> None:
    from tests.test_links_helpers import DEMO_OUTGOING

    with pytest.raises(boundary.ToolArgumentError, match=f"`{next(iter(value))}`") as refused:
        tools.call("pinakes_links", {"doc_id": DEMO_OUTGOING, **value})
    assert says in str(refused.value) and refused.value.remedy


def test_a_ranked_response_stays_within_its_token_cap(tools: PinakesTools, kbs: tuple[Path, Path]) -> None:
    """`relevance` is added after the walk sized each neighbour (it reserves room for it): the estimate still
    fits the cap. (The envelope estimate leaves slack, so this checks the property, not the reserve alone.)"""
    from pinakes.sidecar import read_sidecar
    from tests.test_links_helpers import DEMO_ID

    hub = read_sidecar(kbs[0] / f"{HUB}.pnk.yaml", kb_id=DEMO_ID).id
    result = call_tool(tools, "pinakes_links", {"doc_id": hub, "query": QUERY, "max_tokens": 1000, "adjacent_k": 50,
                                          "depth": 3})
    assert result["usage"]["tokens_estimated"] <= result["usage"]["token_budget"] == 1000
    assert result["truncated"] and "tokens" in result["truncated"]  # the cap did cut: the test means something
    assert any(item["relevance"] for item in result["neighbours"])
