"""The full derivation's rows, node ids included (pipeline/graph.py, graph_rows.py): documents in path
order (written in SQL, never held as ids), then each document's chunks and heading hubs in id order,
then directory and tag hubs in order of first member, their members as path ranks. Pinned against a
reference computed here from the documents and chunks tables, on a KB built by sync; a derivation
over an existing graph (which it deletes a batch at a time) writes the same rows again."""

from __future__ import annotations

import json
import sqlite3
import weakref
from pathlib import Path

import pytest

from pinakes.init import init_kb
from pinakes.lexical.filters import document_tags
from pinakes.manifest import load_manifest
from pinakes.pipeline import graph as graph_stage
from pinakes.pipeline.graph import derive_structure
from pinakes.pipeline.graph_rows import documents_in_path_order, hub_members
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.kb_helpers import stable_ulid

Rows = tuple[list[tuple[int, str, str]], list[tuple[int, int, str]]]


def page(title: str, tags: list[str], sections: list[str]) -> str:
    front = f"---\ntags: [{', '.join(tags)}]\n---\n" if tags else ""
    body = "".join(f"\n## {section}\n\n{'Words under it. ' * 40}\n\n### Detail of {section}\n\n{'More. ' * 60}\n"
                   f"\n## {section}\n\nThe same heading again.\n" for section in sections)
    return f"{front}# {title}\n{body}"


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("graph-rows") / "kb"
    init_kb(root, name="graph-rows")
    files = {f"{folder}/{name}.md": page(f"{folder} {name}", tags, [f"S {name}", "Common"])
             for folder, names, tags in (("zeta", ["b", "a", "c"], ["shared", "z"]), ("alpha", ["y", "x"], ["shared"]),
                                         ("alpha/deep", ["only"], ["z"]), ("mid", ["m1", "m2"], []))
             for name in names}
    files["top.md"] = page("top", ["lonely"], ["Top"])
    for path, text in files.items():
        (root / "docs" / path).parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / path).write_text(text, encoding="utf-8")
        # ids of their own (from a hash of the path), so id order is not path order
        (root / "docs" / f"{path}.pnk.yaml").write_text(f"id: {stable_ulid(path)}\n", encoding="utf-8")
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    assert report.ok, report.render_text()
    return root


def connect(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / ".pinakes" / "index.db", isolation_level=None)


def rows(conn: sqlite3.Connection) -> Rows:
    return (conn.execute("SELECT id, kind, key FROM nodes ORDER BY id").fetchall(),
            conn.execute("SELECT src, dst, kind FROM edges ORDER BY rowid").fetchall())


def reference_nodes(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """The nodes in id order as the whole-graph build made them, from the tables' rows."""
    documents = conn.execute("SELECT id, path, metadata FROM documents WHERE state = 'active'").fetchall()
    nodes = [("doc", doc_id) for doc_id, _, _ in sorted(documents, key=lambda row: row[1])]
    for doc_id in sorted(doc_id for doc_id, _, _ in documents):
        chunks = conn.execute("SELECT ordinal, heading_path FROM chunks WHERE doc_id = ? ORDER BY ordinal",
                              (doc_id,)).fetchall()
        nodes += [("chunk", f"{doc_id}:{ordinal}") for ordinal, _ in chunks]
        headings = [tuple(json.loads(heading)) for _, heading in chunks if heading]
        nodes += [("heading", f"{doc_id}:{' > '.join(heading)}") for heading in dict.fromkeys(headings)
                  if headings.count(heading) >= 2]
    dirs: dict[str, list[str]] = {}
    tags: dict[str, list[str]] = {}
    for doc_id, path, metadata in sorted(documents, key=lambda row: row[1]):
        dirs.setdefault(path.rsplit("/", 1)[0], []).append(doc_id)
        for tag in document_tags(json.loads(metadata)):
            tags.setdefault(tag, []).append(doc_id)
    nodes += [("dir", key) for key, members in dirs.items() if len(members) >= 2]
    nodes += [("tag", key) for key, members in tags.items() if len(members) >= 2]
    return nodes


def test_node_ids_are_documents_by_path_then_chunks_by_document_then_hubs(kb: Path) -> None:
    conn = connect(kb)
    try:
        nodes, edges = rows(conn)
        expected = reference_nodes(conn)
        ids = [doc_id for kind, doc_id in expected if kind == "doc"]
        assert ids != sorted(ids)  # path order is not id order here, so the two orders are told apart
        assert {kind for kind, _ in expected} == {"doc", "chunk", "heading", "dir", "tag"}
        assert [(kind, key) for _, kind, key in nodes] == expected
        assert [node_id for node_id, _, _ in nodes] == list(range(1, len(nodes) + 1))
        key_of = {node_id: (kind, key) for node_id, kind, key in nodes}
        hubs = {(kind, key): [key_of[dst][1] for src, dst, _ in edges if src == node_id]
                for node_id, kind, key in nodes if kind in ("dir", "tag")}
        by_path = documents_in_path_order(conn)
        assert hubs == {hub: [by_path[rank] for rank in ranks] for hub, ranks in hub_members(conn).items()}
        path_of = dict(conn.execute("SELECT id, path FROM documents"))
        assert [path_of[doc_id] for doc_id in hubs[("tag", "shared")]] == [
            f"docs/{name}.md" for name in ("alpha/x", "alpha/y", "zeta/a", "zeta/b", "zeta/c")]
    finally:
        conn.close()


def test_deriving_over_an_existing_graph_writes_the_same_rows(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn = connect(kb)
    try:
        before = rows(conn)
        monkeypatch.setattr(graph_stage, "_DELETE_ROWS", 7)  # many batches: more rows than that in each table
        assert len(before[0]) > 7 * 3 and len(before[1]) > 7 * 3
        census = derive_structure(conn)
        assert rows(conn) == before
        assert sum(census.values()) == len(before[1])
    finally:
        conn.close()


def test_a_full_derivation_does_not_hold_the_set_of_changed_documents(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[weakref.ref[set[str]]] = []
    held: list[bool] = []

    def every_document(conn: sqlite3.Connection) -> set[str]:  # what a first sync passes
        ids = {doc_id for (doc_id,) in conn.execute("SELECT id FROM documents")}
        made.append(weakref.ref(ids))
        return ids

    def full(conn: sqlite3.Connection) -> dict[str, int]:
        held.append(made[0]() is not None)
        return derive_structure(conn)

    monkeypatch.setattr(graph_stage, "derive_structure", full)
    conn = connect(kb)
    try:
        graph_stage.derive_graph(conn, load_manifest(kb / "pinakes.toml").kb.id, changed=every_document(conn))
    finally:
        conn.close()
    assert held == [False]
