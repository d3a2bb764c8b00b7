"""A KB of every source type (issue #43): it syncs, a search cites into each type, `pnk get` and MCP
`pinakes_get` return exactly the indexed text every citation's offsets address, a rerun re-reads
nothing, and the span invariant holds for every extractor the registry declares.

The span invariant table (`SAMPLES`) has one row per extractor: a new extractor is one row, and an
extractor without a row fails `test_every_extractor_has_a_span_invariant_row`."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.extract import ocr_models
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.source_types import SOURCE_TYPES
from pinakes.index import schema
from pinakes.index.documents import find_document, read_indexed_text
from pinakes.kb import KBPaths
from pinakes.search.core import Searcher, SearchSettings
from pinakes.serve.config import load_kb
from pinakes.serve.tools import PinakesTools
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.format_files import docx_bytes, epub_bytes, odt_bytes, w_p
from tests.kb_helpers import init_test_kb, text_pdf
from tests.ocr_helpers import text_image
from tests.test_formats_hostile import index_every_type
from tests.test_serve_helpers import manifest_fake_embedder

pytest.importorskip("selectolax")
pytest.importorskip("defusedxml")
pytest.importorskip("pypdfium2")

HTML_PAGE = ("<html><head><title>Lock gates — Canal Wiki</title></head><body><nav>Home | Index</nav><main>"
             "<h1>Lock gates</h1><p>The lock keeper opens the gates at dawn.</p><h2>Maintenance</h2>"
             "<p>Gate hinges are greased every spring with tallow.</p></main><footer>Canal Wiki</footer></body></html>")

# One row per extractor (a key of EXTRACTORS) that runs free: (file name, the file's bytes, a phrase
# of its text a search finds). The paid extractor runs through the budget and a fake server
# (tests/test_claude_vision*.py), with the same invariant.
SAMPLES: dict[str, tuple[str, Callable[[], bytes], str]] = {
    "text": ("notes.md", lambda: b"# Towpath\n\nHorses once pulled the barges along the towpath.\n",
             "horses pulled barges towpath"),
    "pypdfium2": ("ledger.pdf", lambda: text_pdf([["Toll receipts for the canal were counted weekly."],
                                                  ["The aqueduct carries the canal over the river."]]),
                  "aqueduct carries canal river"),
    "html": ("locks.html", lambda: HTML_PAGE.encode(), "gate hinges greased tallow"),
    "epub": ("voyage.epub", lambda: epub_bytes(
        [("one.xhtml", "Setting Out", "<p>The narrowboat left the basin at first light.</p>"),
         ("two.xhtml", "The Tunnel", "<p>Legging through the tunnel took two hours.</p>")],
        title="A Canal Voyage", creators=["Edith Barge"]), "legging through tunnel hours"),
    "docx": ("survey.docx", lambda: docx_bytes(w_p("Survey", style="Heading1")
                                               + w_p("The embankment leaks near the weir after heavy rain."),
                                               title="Embankment survey"), "embankment leaks weir rain"),
    "odt": ("minutes.odt", lambda: odt_bytes('<text:h text:outline-level="1">Minutes</text:h>'
                                             "<text:p>The committee voted to dredge the summit pound.</text:p>",
                                             title="Committee minutes"), "committee voted dredge summit pound"),
    "rapidocr": ("notice.png", lambda: png_bytes(["Boaters must moor clear of the weir."]), "boaters moor clear weir"),
}
PAID = {name for name, spec in EXTRACTORS.items() if spec.paid}
# The rows this installation can run: an image needs the [ocr] extra (tests/test_ocr_kb.py reads more).
RUNNABLE = {name: row for name, row in SAMPLES.items() if name != "rapidocr" or ocr_models.ocr_installed()}


def png_bytes(lines: list[str]) -> bytes:
    import io

    buffer = io.BytesIO()
    text_image(lines).save(buffer, format="PNG")
    return buffer.getvalue()


def test_every_extractor_has_a_span_invariant_row() -> None:
    assert set(SAMPLES) == set(EXTRACTORS) - PAID
    covered = {source_type for name in SAMPLES for source_type in EXTRACTORS[name].source_types}
    assert covered == set(SOURCE_TYPES)


def test_the_schema_admits_exactly_the_source_types() -> None:
    check = schema.DDL.split("source_type IN (", 1)[1].split(")", 1)[0]
    assert [part.strip().strip("'") for part in check.split(",")] == list(SOURCE_TYPES)


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("every-type") / "kb"
    init_test_kb(root, manifest_identity())
    index_every_type(root)
    for name, data, _phrase in RUNNABLE.values():
        (root / "docs" / name).write_bytes(data())
    (root / "docs" / "code.py").write_text("def lock_level():\n    return 'summit'\n", encoding="utf-8")
    report = run_sync(root, SyncOptions(), embedder=manifest_fake_embedder_for(root))
    assert report.ok and not report.failures, report.failures
    return root


def manifest_identity():  # the FakeEmbedder's identity
    from tests.fakes import FakeEmbedder

    return FakeEmbedder().identity


def manifest_fake_embedder_for(root: Path):
    return manifest_fake_embedder(root)


def rows(root: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_a_kb_of_every_type_indexes_each_with_its_extractor(kb: Path) -> None:
    indexed = dict(rows(kb, "SELECT path, extraction_backend FROM documents WHERE state = 'active'"))
    # A text source's offsets address the file itself: it records no extraction.
    assert indexed == {f"docs/{name}": None if backend == "text" else backend
                       for backend, (name, _, _) in RUNNABLE.items()} | {"docs/code.py": None}
    titles = dict(rows(kb, "SELECT path, title FROM documents WHERE state = 'active'"))
    assert titles["docs/locks.html"] == "Lock gates"  # the <h1>: the <title> only adds the site's name
    assert titles["docs/voyage.epub"] == "A Canal Voyage"
    assert titles["docs/survey.docx"] == "Embankment survey" and titles["docs/minutes.odt"] == "Committee minutes"


@pytest.mark.parametrize("extractor", sorted(SAMPLES))
def test_span_invariant_and_exact_get_for_every_extractor(kb: Path, extractor: str) -> None:
    if extractor not in RUNNABLE:
        pytest.skip(f"{extractor} needs the [{EXTRACTORS[extractor].extra}] extra")
    name, _data, _phrase = SAMPLES[extractor]
    conn = schema.open_reader(KBPaths(kb).index_db)
    try:
        (doc_id,) = conn.execute("SELECT id FROM documents WHERE path = ?", (f"docs/{name}",)).fetchone()
        document = find_document(conn, doc_id)
        chunks = conn.execute("SELECT text, char_start, char_end FROM chunks WHERE doc_id = ? ORDER BY ordinal",
                              (doc_id,)).fetchall()
    finally:
        conn.close()
    indexed = read_indexed_text(KBPaths(kb), document).text
    assert chunks
    for text, start, end in chunks:
        assert indexed[start:end] == text  # the span invariant, through what `pnk get` reads
    code = main(["-C", str(kb), "get", doc_id, "--json"])
    assert code == 0


def test_search_cites_into_each_type_and_get_returns_each_cited_span(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    embedder = manifest_fake_embedder(kb)
    tools = PinakesTools([load_kb(kb)])
    try:
        with Searcher(KBPaths(kb).index_db, SearchSettings(rerank=False), embedder=embedder) as searcher:
            for extractor, (name, _data, phrase) in RUNNABLE.items():
                top = searcher.search(phrase).passages[0]
                assert top.path == f"docs/{name}", (extractor, top.path)
                assert top.source_type == EXTRACTORS[extractor].source_types[0]
                served = tools.call("pinakes_get", {"doc_id": top.doc_id, "char_start": top.char_start,
                                                    "char_end": top.char_end})
                assert f"\n{top.text}\n" in str(served["evidence"]), extractor
                code = main(["-C", str(kb), "get", top.doc_id, "--range", f"{top.char_start}-{top.char_end}",
                             "--json"])
                out, _ = capsys.readouterr()
                assert code == 0 and json.loads(out)["text"] == top.text, extractor
    finally:
        tools.close()


def test_headings_and_declared_metadata_are_the_chunks_context(kb: Path) -> None:
    contexts = dict(rows(kb, "SELECT d.path || ':' || c.ordinal, c.context FROM chunks c JOIN documents d "
                             "ON d.id = c.doc_id"))
    html_contexts = [context for key, context in contexts.items() if key.startswith("docs/locks.html")]
    assert any("Maintenance" in context for context in html_contexts)  # the heading trail
    epub_contexts = [context for key, context in contexts.items() if key.startswith("docs/voyage.epub")]
    assert all("A Canal Voyage" in context and "Edith Barge" in context for context in epub_contexts)
    assert any("The Tunnel" in context for context in epub_contexts)  # the chapter's title
    assert not any("Canal Wiki" in text for (text,) in rows(kb, "SELECT text FROM chunks"))


def test_a_rerun_and_a_rebuild_re_read_nothing(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.extract import docx, epub, html, images, odt, pdf

    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an extractor ran: the extraction cache should have answered")

    for module in (docx, epub, html, images, odt, pdf):
        monkeypatch.setattr(module, "extract", never)
    embedder = manifest_fake_embedder(kb)
    again = run_sync(kb, SyncOptions(), embedder=embedder)
    assert again.ok and again.noop
    rebuilt = run_sync(kb, SyncOptions(rebuild=True), embedder=embedder)
    assert rebuilt.ok and not rebuilt.failures, rebuilt.failures
    assert len(rows(kb, "SELECT id FROM documents WHERE state = 'active'")) == len(RUNNABLE) + 1
