"""The graph expansion channel (`[retrieval] graph_channel = "expand"`, search/graph.py): one hop
out of the fused top passages over structural and authored edges, capped per seed after ranking,
within the filter, and only where the vector side ran."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pinakes.init import init_kb
from pinakes.lexical.filters import SearchFilters
from pinakes.links.authoring import link
from pinakes.manifest import load_manifest
from pinakes.search.core import Searcher, SearchSettings
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

QUERY = "zephyr valve"
FILLER = " ".join(f"filler{n}" for n in range(40))


def write(root: Path, path: str, text: str) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`docs/a.md` answers the query outright and links to three pages that each mention only
    `valve`, once, deep in filler, so both retrievers rank them below ten distractors that say
    `zephyr valve` plainly (each alone in its folder: no hub joins them). Every passage is returned."""
    root = tmp_path_factory.mktemp("graph") / "kb"
    init_kb(root, name="graph")
    write(root, "docs/a.md", "# Alpha\n\nZephyr valve: the zephyr valve keeps the zephyr valve line.\n")
    for n in range(10):
        write(root, f"docs/noise{n}/n.md", f"# Noise {n}\n\nzephyr valve notes, number {n} of many.\n")
    write(root, "docs/linked/b.md", f"# Bravo\n\n{FILLER} valve {FILLER}\n")  # best cosine of the three
    write(root, "docs/linked/c.md", f"# Charlie\n\n{FILLER} {FILLER} valve {FILLER} {FILLER}\n")
    write(root, "elsewhere/d.md", f"# Delta\n\n{FILLER} {FILLER} {FILLER} valve {FILLER} {FILLER}\n")
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text().replace('roots = ["docs"]', 'roots = ["docs", "elsewhere"]'))
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    for target in ("docs/linked/b.md", "docs/linked/c.md", "elsewhere/d.md"):
        link(root, "docs/a.md", target, "references")
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    return root


def search(kb: Path, channel: str, *, adjacent_k: int = 5, mode: str = "hybrid",
           filters: SearchFilters | None = None) -> list[tuple[str, int | None]]:
    settings = SearchSettings(candidates_per_source=3, fusion_top_k=20, final_k=20, rerank=False,
                              graph_channel=channel, adjacent_k=adjacent_k)
    with Searcher(kb / ".pinakes" / "index.db", settings, embedder=FakeEmbedder()) as searcher:
        result = searcher.search(QUERY, mode=mode, filters=filters)
    return [(p.path, p.scores.graph_rank) for p in result.passages]


def test_the_roots_cover_the_fixture(kb: Path) -> None:
    assert load_manifest(kb / "pinakes.toml").sources.roots == ("docs", "elsewhere")


def order(found: list[tuple[str, int | None]]) -> list[str]:
    return [path for path, _ in found]


def test_off_ranks_the_linked_pages_below_the_distractors(kb: Path) -> None:
    found = search(kb, "off")
    assert all(rank is None for _, rank in found)
    paths = order(found)
    assert paths[0] == "docs/a.md"
    assert paths.index("docs/linked/b.md") > max(paths.index(f"docs/noise{n}/n.md") for n in range(10))


def test_expand_lifts_the_linked_pages_of_the_top_passage(kb: Path) -> None:
    off, expanded = order(search(kb, "off")), search(kb, "expand")
    ranks = dict(expanded)
    paths = order(expanded)
    for page in ("docs/linked/b.md", "docs/linked/c.md", "elsewhere/d.md"):
        assert ranks[page] is not None, page
        assert paths.index(page) < off.index(page), page
    # the graph list is ranked by the query's cosine: b (valve in the least filler) first
    b, c, d = (ranks[page] or 0 for page in ("docs/linked/b.md", "docs/linked/c.md", "elsewhere/d.md"))
    assert 0 < b < c < d
    assert paths.index("docs/linked/b.md") < min(paths.index(f"docs/noise{n}/n.md") for n in range(10))


def test_adjacent_k_caps_each_seed_after_ranking(kb: Path) -> None:
    found = dict(search(kb, "expand", adjacent_k=1))
    expanded = {path for path, rank in found.items() if rank is not None}
    assert expanded == {"docs/linked/b.md"}  # the best of the three by cosine, not by storage order


def test_expansion_stays_inside_the_filter(kb: Path) -> None:
    found = dict(search(kb, "expand", filters=SearchFilters(path_prefix="docs/")))
    assert "elsewhere/d.md" not in found
    assert found["docs/linked/b.md"] is not None


def test_a_keyword_only_search_is_not_expanded(kb: Path) -> None:
    assert all(rank is None for _, rank in search(kb, "expand", mode="bm25"))


def test_the_manifest_setting_reaches_the_searcher(kb: Path) -> None:
    manifest = load_manifest(kb / "pinakes.toml")
    expanded = dataclasses.replace(manifest, retrieval=dataclasses.replace(manifest.retrieval,
                                                                           graph_channel="expand"))
    with Searcher.for_kb(kb, expanded) as searcher:
        assert searcher.settings.graph_channel == "expand"
        assert searcher.settings.adjacent_k == manifest.retrieval.adjacent_k


def test_expand_is_accepted_and_ppr_refused(tmp_path: Path) -> None:
    from pinakes.errors import ManifestError

    init_kb(tmp_path / "kb", name="kb")
    manifest = tmp_path / "kb" / "pinakes.toml"
    original = manifest.read_text()
    manifest.write_text(original.replace('graph_channel = "off"', 'graph_channel = "expand"'))
    assert load_manifest(manifest).retrieval.graph_channel == "expand"
    manifest.write_text(original.replace('graph_channel = "off"', 'graph_channel = "ppr"'))
    with pytest.raises(ManifestError, match="ppr"):
        load_manifest(manifest)


def test_chunk_edges_reach_the_neighbouring_sections_only_when_followed(tmp_path: Path) -> None:
    from pinakes.index import schema
    from pinakes.search import graph
    from pinakes.search.vectors import load_matrix

    root = tmp_path / "kb"
    init_kb(root, name="sections")
    write(root, "docs/guide.md", "# Guide\n\n## Alpha\n\nzephyr valve alpha.\n\n## Beta\n\nvalve beta notes.\n\n"
                                 "## Gamma\n\nvalve gamma notes.\n")
    run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    conn = schema.open_reader(root / ".pinakes" / "index.db")
    try:
        ids = {text.split("\n")[-1]: chunk_id for chunk_id, text in conn.execute("SELECT id, text FROM chunks")}
        alpha, beta, gamma = (ids[f"valve {name} notes." if name != "alpha" else "zephyr valve alpha."]
                              for name in ("alpha", "beta", "gamma"))
        view = graph.GraphView(load_matrix(conn, None))
        query = FakeEmbedder().embed_query(QUERY)
        siblings = graph.expand(conn, view, query, [alpha], adjacent_k=5, edges=("sibling",))
        assert [(n.chunk_id, n.edge, n.seed) for n in siblings] == [(beta, "sibling", alpha)]
        around_beta = graph.expand(conn, view, query, [beta], adjacent_k=5, edges=("sibling",))
        assert [n.chunk_id for n in around_beta] == [alpha, gamma]  # both sides, best cosine first
        assert [n.chunk_id for n in graph.expand(conn, view, query, [beta], adjacent_k=1,
                                                 edges=("sibling",))] == [alpha]
        assert graph.expand(conn, view, query, [alpha], adjacent_k=5, edges=("authored",)) == []
    finally:
        conn.close()
