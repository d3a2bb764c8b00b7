"""Links from text through the real sync (#44): derived edges in the index with their spans, shown by
`pnk links` (marked from text), MCP `pinakes_links` (with spans) and the graph channel (with the
span that reached a neighbour); unresolved and ambiguous ones in `pnk doctor` and `pnk status` with
file:line; a renamed target's edges become unresolved and reported, and a later file of that name
resolves them at the next sync; an unchanged document is not parsed again; `pnk link` says to sync."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from pinakes.cli import main
from pinakes.doctor import DoctorContext
from pinakes.doctor.checks_links import checks
from pinakes.kb import KBPaths
from pinakes.links import authoring
from pinakes.links.text_links import TextLink
from pinakes.search import graph
from pinakes.search.vectors import load_matrix
from pinakes.serve.config import load_kb
from pinakes.serve.tools import PinakesTools
from pinakes.sync.status import kb_status
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, init_test_kb, sync, write_documents

EMBEDDER = HashEmbedder()
HUB = ("# Hub\n\nThe zephyr valve is described in [[Valve]] and [[Valve#Fitting|its fitting]].\n"
       "Its seal: [the seal](parts/seal%20ring.md#size), and ![[Gasket]].\n\n"
       "```\n[[Valve]] in code is no link, nor `[[Gasket]]`\n```\n\n"
       "Missing: [[Nowhere]]. Two notes share a name: [[Twin]].\n")
DOCS = [
    Doc("docs/hub.md", HUB),
    Doc("docs/Valve.md", "# Valve\n\nA valve.\n\n## Fitting\n\nThe fitting.\n"),
    Doc("docs/parts/seal ring.md", "# Seal ring\n\nThe seal. Back to [the hub](../hub.md).\n"),
    Doc("docs/parts/Gasket.md", "# Gasket\n\nA gasket.\n"),
    Doc("docs/a/Twin.md", "# Twin A\n\nOne twin.\n"),
    Doc("docs/bb/Twin.md", "# Twin B\n\nThe other twin.\n"),
    Doc("docs/plain.md", "# Plain\n\nNo links here at all.\n"),
]


def make_kb(root: Path) -> Path:
    init_test_kb(root, EMBEDDER.identity)
    write_documents(root, DOCS)
    sync(root, EMBEDDER)
    return root


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_kb(tmp_path_factory.mktemp("text-links") / "kb")


def connect(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(KBPaths(root).index_db)


def doc_id(root: Path, path: str) -> str:
    with connect(root) as conn:
        return conn.execute("SELECT id FROM documents WHERE path = ? AND state = 'active'", (path,)).fetchone()[0]


def text_edges(root: Path) -> set[tuple[str, str]]:
    with connect(root) as conn:
        return set(conn.execute(
            "SELECT s.path, d.path FROM links l JOIN documents s ON s.id = l.src_doc_id "
            "JOIN documents d ON d.id = l.dst_doc_id WHERE l.origin = 'text' AND l.rel = 'links-to'"))


def test_links_from_text_are_derived_edges_and_never_written_to_sidecars(kb: Path) -> None:
    assert text_edges(kb) == {("docs/hub.md", "docs/Valve.md"), ("docs/hub.md", "docs/parts/seal ring.md"),
                              ("docs/hub.md", "docs/parts/Gasket.md"), ("docs/hub.md", "docs/a/Twin.md"),
                              ("docs/parts/seal ring.md", "docs/hub.md")}
    for sidecar in (kb / "docs").rglob("*.pnk.yaml"):
        assert "pnk://" not in sidecar.read_text(encoding="utf-8"), sidecar  # `links: []` as minted


def test_each_link_keeps_its_span_in_the_source_text(kb: Path) -> None:
    with connect(kb) as conn:
        rows = conn.execute("SELECT t.target, t.char_start, t.char_end, t.line, t.status FROM text_links t "
                            "JOIN documents d ON d.id = t.doc_id WHERE d.path = 'docs/hub.md' ORDER BY t.char_start"
                            ).fetchall()
    text = HUB
    assert [(target, text[start:end], line, status) for target, start, end, line, status in rows] == [
        ("Valve", "[[Valve]]", 3, "resolved"), ("Valve", "[[Valve#Fitting|its fitting]]", 3, "resolved"),
        ("parts/seal ring.md", "[the seal](parts/seal%20ring.md#size)", 4, "resolved"),
        ("Gasket", "![[Gasket]]", 4, "resolved"),
        ("Nowhere", "[[Nowhere]]", 10, "unresolved"), ("Twin", "[[Twin]]", 10, "ambiguous")]


def test_pnk_links_marks_links_from_text_with_their_lines(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    authoring.link(kb, "docs/hub.md", "docs/plain.md", "see-also")
    sync(kb, EMBEDDER)
    assert main(["-C", str(kb), "links", "docs/hub.md", "--direction", "out"]) == 0
    out = capsys.readouterr().out
    assert "-> links-to (from text: line 3): Valve — docs/Valve.md" in out
    assert "-> see-also (authored): Plain — docs/plain.md" in out
    assert main(["-C", str(kb), "links", "docs/parts/seal ring.md", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (hub,) = [item for item in result["neighbours"] if item["path"] == "docs/hub.md"]
    assert hub["direction"] == "both"
    by_direction = {edge["direction"]: edge for edge in hub["edges"]}
    assert by_direction["out"]["spans"][0]["line"] == 3  # in seal ring.md's own text
    assert by_direction["in"]["spans"][0]["line"] == 4  # in the hub's text


def test_mcp_pinakes_links_returns_the_source_spans(kb: Path) -> None:
    tools = PinakesTools([load_kb(kb, "kb")])
    try:
        result = json.loads(json.dumps(tools.links({"doc_id": doc_id(kb, "docs/hub.md"), "direction": "out"})))
    finally:
        tools.close()
    (valve,) = [item for item in result["neighbours"] if item["path"] == "docs/Valve.md"]
    (edge,) = valve["edges"]
    assert edge["origin"] == "text" and edge["rel"] == "links-to"
    spans = [(span["line"], HUB[span["char_start"]:span["char_end"]]) for span in edge["spans"]]
    assert spans == [(3, "[[Valve]]"), (3, "[[Valve#Fitting|its fitting]]")]
    assert edge["spans_omitted"] == 0


def test_the_graph_channel_follows_links_from_text_and_cites_the_span(kb: Path) -> None:
    conn = connect(kb)
    try:
        matrix = load_matrix(conn, EMBEDDER.identity.dim)
        seed = conn.execute("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
                            "WHERE d.path = 'docs/hub.md' AND c.ordinal = 0").fetchone()[0]
        query = np.asarray(EMBEDDER.embed_query("valve seal gasket twin hub fitting"), dtype=np.float32)
        found = graph.expand(conn, graph.GraphView(matrix), query, [seed], adjacent_k=20, edges=("links-to",))
        paths = dict(conn.execute("SELECT c.id, d.path FROM chunks c JOIN documents d ON d.id = c.doc_id"))
    finally:
        conn.close()
    reached = {paths[n.chunk_id]: n for n in found}
    assert set(reached) <= {"docs/Valve.md", "docs/parts/seal ring.md", "docs/parts/Gasket.md", "docs/a/Twin.md"}
    assert "docs/Valve.md" in reached and all(n.edge == "links-to" for n in found)
    span = reached["docs/Valve.md"].span
    assert span is not None and HUB[span.char_start:span.char_end] == "[[Valve]]" and span.line == 3


def test_doctor_and_status_list_unresolved_and_ambiguous_links_with_file_and_line(kb: Path) -> None:
    found = {check.name: check for check in checks(DoctorContext(kb))}
    check = found["links from text"]
    assert check.status == "WARN"
    assert "docs/hub.md:10 [[Nowhere]]: no document by that name" in check.detail
    assert "docs/hub.md:10 [[Twin]]: 2 documents match; took docs/a/Twin.md" in check.detail
    status = kb_status(kb)
    assert [problem.where for problem in status.link_problems] == ["docs/hub.md:10", "docs/hub.md:10"]
    assert status.link_problem_counts == {"unresolved": 1, "ambiguous": 1}
    assert "links from text at the last sync: 1 name no document, 1 name several" in status.render_text()
    assert status.up_to_date  # a link problem is no work for the next sync


def test_a_renamed_target_is_unresolved_and_reported_until_a_file_of_that_name_returns(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    (root / "docs/parts/Gasket.md").rename(root / "docs/parts/Seal gasket.md")
    (root / "docs/parts/Gasket.md.pnk.yaml").rename(root / "docs/parts/Seal gasket.md.pnk.yaml")
    report = sync(root, EMBEDDER)
    assert report.graph_census is not None and report.graph_census["links-to-unresolved"] == 2
    assert ("docs/hub.md", "docs/parts/Seal gasket.md") not in text_edges(root)
    check = {check.name: check for check in checks(DoctorContext(root))}["links from text"]
    assert "docs/hub.md:4 [[Gasket]]: no document by that name" in check.detail
    write_documents(root, [Doc("docs/other/gasket.md", "# A new gasket\n\nAnother.\n")])
    sync(root, EMBEDDER)
    assert ("docs/hub.md", "docs/other/gasket.md") in text_edges(root)
    assert [p.where for p in kb_status(root).link_problems] == ["docs/hub.md:10", "docs/hub.md:10"]


def test_a_deleted_target_drops_its_edge(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb")
    (root / "docs/Valve.md").unlink()
    sync(root, EMBEDDER)
    assert not any(dst == "docs/Valve.md" for _, dst in text_edges(root))
    assert sum(p.target == "Valve" for p in kb_status(root).link_problems) == 2


def test_an_unchanged_document_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb")
    with connect(root) as conn:
        before = conn.execute("SELECT id, doc_id FROM text_links ORDER BY id").fetchall()
    parsed: list[int] = []
    import pinakes.pipeline.embed as embed_stage

    original = embed_stage.parse_text_links

    def counted(text: str, kind: str) -> list[TextLink]:
        return parsed.append(1) or original(text, kind)

    monkeypatch.setattr(embed_stage, "parse_text_links", counted)
    write_documents(root, [Doc("docs/new.md", "# New\n\nSee [[Plain]].\n")])
    sync(root, EMBEDDER)
    assert len(parsed) == 1  # the new document only
    with connect(root) as conn:
        after = conn.execute("SELECT id, doc_id FROM text_links ORDER BY id").fetchall()
    assert after[: len(before)] == before  # the others' rows were not rewritten
    assert ("docs/new.md", "docs/plain.md") in text_edges(root)


def test_pnk_link_says_to_sync_and_the_sync_shows_the_edge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_kb(tmp_path / "kb")
    assert main(["-C", str(root), "link", "docs/plain.md", "docs/Valve.md", "--rel", "cites"]) == 0
    assert "run `pnk sync` to see it in `pnk links`" in capsys.readouterr().out
    sync(root, EMBEDDER)
    assert main(["-C", str(root), "links", "docs/plain.md", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [item["path"] for item in result["neighbours"]] == ["docs/Valve.md"]
