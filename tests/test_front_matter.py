"""Front matter as people write it (issue #26): Obsidian, Logseq, Hugo, Jekyll. Its title, aliases,
description and tags are searchable words, its tags (a YAML list, a comma or space separated string, the
`keywords` alias) filter like the sidecar's; citations and spans stay the document's own characters.
Every index here is built by the product's sync."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pinakes.extract.front_matter import FrontMatter, read_front_matter
from pinakes.index.documents import list_documents
from pinakes.kb import KBPaths
from pinakes.lexical.filters import make_filters
from pinakes.search.core import Searcher, SearchSettings
from pinakes.sidecar import sidecar_path_for
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb, sync

OBSIDIAN = """---
title: "Allotment: the spring plan"
aliases:
  - veg patch
  - Plot 14
tags: [garden, meetings]
created: 2024-03-01
---
# Sowing

Broad beans go in first, then the early potatoes.
"""
HUGO = """---
title: Water butts
description: Rainwater harvesting for the communal greenhouse
keywords: [irrigation, "water supply"]
date: 2024-05-02T10:00:00Z
draft: false
---
The committee bought four barrels last year.
"""
JEKYLL = """---
layout: post
title: 'Compost rota'
tags: compost volunteers
---
Turn the heap every second Saturday.
"""
COMMA_STRING = """---
title: Seed swap
tags: "garden, seed library, #events"
tag: meetings
---
Bring labelled envelopes.
"""
LOGSEQ = """title:: Pond maintenance
tags:: wildlife, [[pond care]], #garden
alias:: frog pond

- Clear the duckweed in August.
"""
PLAIN = "# Unrelated\n\nNothing declared here about beans or ponds.\n"

DOCS = [Doc("docs/obsidian.md", OBSIDIAN), Doc("docs/hugo.md", HUGO), Doc("docs/jekyll.md", JEKYLL),
        Doc("docs/comma.md", COMMA_STRING), Doc("docs/logseq.md", LOGSEQ), Doc("docs/plain.md", PLAIN),
        Doc("docs/tagged.md", "---\ntags: [garden]\n---\nThe shed key hangs by the door.\n",
            tags=["shed", "garden"])]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_kb(tmp_path_factory.mktemp("front-matter") / "kb", DOCS, HashEmbedder())


def search_paths(index: Path, query: str, **filters: Any) -> list[str]:
    with Searcher(index, SearchSettings(rerank=False, final_k=20), embedder=HashEmbedder()) as searcher:
        result = searcher.search(query, mode="bm25", filters=make_filters(**filters) if filters else None)
    return [passage.path for passage in result.passages]


@pytest.mark.parametrize(("query", "path"), [
    ("allotment", "docs/obsidian.md"),  # the title; the body never says it
    ("veg patch", "docs/obsidian.md"),  # an Obsidian alias
    ("rainwater harvesting", "docs/hugo.md"),  # Hugo's description
    ("compost rota", "docs/jekyll.md"),  # a quoted title
    ("frog pond", "docs/logseq.md"),  # Logseq's alias property is a line of the page itself
    ("irrigation", "docs/hugo.md"),  # a tag (Hugo's `keywords`) is a word too (issue #40)
    ("volunteers", "docs/jekyll.md"),  # one of a space separated string of tags
    ("seed library", "docs/comma.md"),
])
def test_declared_words_find_the_document(index: Path, query: str, path: str) -> None:
    assert search_paths(index, query)[:1] == [path]


@pytest.mark.parametrize(("tag", "paths"), [
    ("garden", {"docs/obsidian.md", "docs/comma.md", "docs/logseq.md", "docs/tagged.md"}),
    ("meetings", {"docs/obsidian.md", "docs/comma.md"}),  # a list; the `tag` key
    ("irrigation", {"docs/hugo.md"}),  # Hugo's `keywords`
    ("water supply", {"docs/hugo.md"}),
    ("volunteers", {"docs/jekyll.md"}),  # a space separated string
    ("seed library", {"docs/comma.md"}),  # a comma separated string keeps the words of one tag together
    ("events", {"docs/comma.md"}),  # `#events`: the hash is not part of the tag
    ("pond care", {"docs/logseq.md"}),  # a Logseq [[page ref]]
    ("shed", {"docs/tagged.md"}),  # the sidecar's own tag still filters
])
def test_front_matter_tags_filter_like_sidecar_tags(index: Path, tag: str, paths: set[str]) -> None:
    broad = "beans potatoes barrels heap envelopes duckweed shed key committee turn bring clear"
    assert set(search_paths(index, broad, tags=[tag])) == paths


def test_all_tags_matches_across_the_sidecar_and_the_front_matter(index: Path) -> None:
    assert search_paths(index, "shed key", tags=["shed", "garden"], all_tags=True) == ["docs/tagged.md"]


def test_the_document_lists_the_union_and_the_sidecar_is_never_written(index: Path) -> None:
    root = index.parent.parent
    with sqlite3.connect(index) as conn:
        documents = {doc.path: doc for doc in list_documents(conn, KBPaths(root))}
    assert documents["docs/tagged.md"].tags == ("shed", "garden")  # the sidecar's first, each once
    assert documents["docs/obsidian.md"].tags == ("garden", "meetings")
    assert documents["docs/obsidian.md"].title == "Allotment: the spring plan"
    assert documents["docs/logseq.md"].title == "Pond maintenance"
    minted = sidecar_path_for(root / "docs/obsidian.md").read_text(encoding="utf-8")
    assert "tags: []" in minted and "garden" not in minted and "title" not in minted  # the document keeps them


def test_spans_and_citations_are_the_documents_own_characters(index: Path) -> None:
    text = (index.parent.parent / "docs/obsidian.md").read_text(encoding="utf-8")
    with sqlite3.connect(index) as conn:
        rows = conn.execute("SELECT c.ordinal, c.text, c.char_start, c.char_end, c.fts_text, c.context "
                            "FROM chunks c JOIN documents d ON d.id = c.doc_id "
                            "WHERE d.path = 'docs/obsidian.md' ORDER BY c.ordinal").fetchall()
    for _ordinal, chunk_text, start, end, fts_text, context in rows:
        assert chunk_text == text[start:end] and "aliases" not in chunk_text and "Allotment" not in chunk_text
        assert fts_text is None  # the declared words live in the chunk's context, beside its text
        assert "veg patch" in context and "Allotment" in context


def test_the_graph_links_documents_sharing_a_front_matter_tag(index: Path) -> None:
    with sqlite3.connect(index) as conn:
        members = conn.execute("SELECT count(*) FROM edges e JOIN nodes n ON n.id = e.src "
                               "WHERE n.kind = 'tag' AND n.key = 'garden' AND e.kind = 'shared-tag'").fetchone()
    assert members == (4,)


def test_an_edited_front_matter_is_re_read_and_a_sidecar_edit_keeps_its_tags(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    index = build_kb(tmp_path / "kb", [Doc("docs/n.md", "---\ntags: [garden]\n---\nBeans.\n")], embedder)
    root = tmp_path / "kb"
    assert search_paths(index, "beans", tags=["garden"]) == ["docs/n.md"]
    (root / "docs/n.md").write_text("---\ntags: [orchard]\ntitle: Fruit trees\n---\nBeans.\n", encoding="utf-8")
    assert sync(root, embedder).changed == ["docs/n.md"]
    assert search_paths(index, "beans", tags=["garden"]) == []
    assert search_paths(index, "fruit", tags=["orchard"]) == ["docs/n.md"]
    sidecar = sidecar_path_for(root / "docs/n.md")
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("tags: []", "tags: [pruning]"), encoding="utf-8")
    assert sync(root, embedder).metadata_refreshed == ["docs/n.md"]  # the sidecar alone changed
    assert search_paths(index, "fruit", tags=["orchard", "pruning"], all_tags=True) == ["docs/n.md"]
    with sqlite3.connect(index) as conn:
        (metadata,) = conn.execute("SELECT metadata FROM documents").fetchone()
    assert json.loads(metadata)["tags"] == ["pruning"]  # the sidecar's own, apart from the front matter's


def test_a_kb_indexed_before_front_matter_was_read_re_indexes_its_markdown_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.pipeline import keys

    embedder = HashEmbedder()
    root = tmp_path / "kb"
    build_kb(root, [Doc("docs/n.md", OBSIDIAN), Doc("docs/t.txt", "Plain text.\n")], embedder)
    monkeypatch.setattr(keys, "FRONT_MATTER_VERSION", "next")
    report = sync(root, embedder)
    assert report.reembedded == ["docs/n.md"]


@pytest.mark.parametrize(("text", "expected"), [
    ("---\ntitle: a: b\n---\nBody.\n",  # not YAML: declares nothing, fails nothing, says why and where
     FrontMatter(problem="not valid YAML: mapping values are not allowed here", problem_line=2)),
    ("---\n- a list\n---\nBody.\n", FrontMatter()),
    ("---\ntitle: 1984\ntags: [2024, true, null, '', '#']\n---\n", FrontMatter(title="1984", tags=("2024",))),
    ("---\ntags:\n  - community garden\n  - garden\n  - garden\n---\n",
     FrontMatter(tags=("community garden", "garden"))),  # a list item is one tag, spaces and all
    ("---\naliases: Plot 14, veg patch\nsummary: Short.\n---\n",
     FrontMatter(aliases=("Plot 14", "veg patch"), description="Short.")),
    ("Body first.\ntitle:: too late\n", FrontMatter()),  # Logseq properties only at the top
    ("+++\ntitle = \"TOML\"\n+++\nBody.\n", FrontMatter()),  # TOML front matter is not read
])
def test_front_matter_shapes(text: str, expected: FrontMatter) -> None:
    assert read_front_matter(text) == expected


def test_deeply_nested_front_matter_declares_nothing_and_costs_nothing() -> None:
    import time

    started = time.perf_counter()
    declared = read_front_matter("---\ntitle: Kept?\ntags: " + "[" * 20_000 + "]" * 20_000 + "\n---\nBody.\n")
    assert declared == FrontMatter(problem="brackets nested more than 64 deep")
    assert time.perf_counter() - started < 1.0


def test_hostile_front_matter_is_bounded() -> None:
    tags = ", ".join(f"t{n}" for n in range(2_000))
    declared = read_front_matter(f"---\ntags: \"{tags}\"\ntitle: {'x' * 5000}\n---\n")
    assert len(declared.tags) == 64 and declared.title is not None and len(declared.title) == 300


def test_a_search_hit_carries_the_documents_tags_from_both_places(index: Path) -> None:
    with Searcher(index, SearchSettings(rerank=False, final_k=5), embedder=HashEmbedder()) as searcher:
        passages = searcher.search("shed key", mode="bm25").passages
    assert passages[0].path == "docs/tagged.md" and passages[0].tags == ("shed", "garden")


def test_the_commands_from_the_issue(index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pnk search --mode bm25 allotment` and `--tag garden`, as issue #26 ran them."""
    from pinakes.cli import main

    root = str(index.parent.parent)
    assert main(["-C", root, "search", "--mode", "bm25", "--json", "allotment"]) == 0
    hits = json.loads(capsys.readouterr().out)["passages"]
    assert [hit["path"] for hit in hits][:1] == ["docs/obsidian.md"]
    assert hits[0]["tags"] == ["garden", "meetings"]
    assert main(["-C", root, "search", "--mode", "bm25", "--json", "--tag", "garden", "beans"]) == 0
    assert {hit["path"] for hit in json.loads(capsys.readouterr().out)["passages"]} == {"docs/obsidian.md"}


BROKEN = "---\nauthor: Ann\ntitle: [broken\ntags: [garden]\n---\n\nThe rhubarb crowns need splitting.\n"


def test_front_matter_that_is_not_yaml_is_warned_about_and_the_document_indexed(tmp_path: Path) -> None:
    """Issue #40: `title: [broken` dropped the whole block without a word."""
    embedder = HashEmbedder()
    index = build_kb(tmp_path / "kb", [Doc("docs/ok.md", OBSIDIAN)], embedder)
    root = tmp_path / "kb"
    (root / "docs/broken.md").write_text(BROKEN, encoding="utf-8")
    report = sync(root, embedder)
    assert report.added == ["docs/broken.md"]
    (warning,) = report.warnings
    assert warning.startswith("docs/broken.md, line 3: the front matter is not read (not valid YAML:")
    assert "the document is indexed without them" in warning
    assert search_paths(index, "rhubarb crowns") == ["docs/broken.md"]  # indexed all the same
    assert "warning: docs/broken.md, line 3: the front matter is not read" in report.render_text()
    (root / "docs/broken.md").write_text(BROKEN.replace("[broken", "Rhubarb"), encoding="utf-8")
    assert sync(root, embedder).warnings == []  # fixed: nothing to say
    assert search_paths(index, "rhubarb", tags=["garden"]) == ["docs/broken.md"]
