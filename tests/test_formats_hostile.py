"""Hostile and broken files of the document formats (issue #43), each a real file on disk: a zip bomb,
XML entity expansion (billion laughs), an external entity (XXE), markup nested 100,000 deep, a
200 MB page, malformed XML, ODT lists and DOCX text boxes nested past Python's recursion limit, a DOCX
that is a ZIP of photos, a file that is no ZIP at all. Each fails
alone with a reason that names it; a sync over all of them indexes everything else."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from pinakes.errors import SourceError
from pinakes.extract import archives, docx, epub, html, odt
from pinakes.pipeline.report import UNEXTRACTABLE
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.format_files import (
    billion_laughs_docx,
    docx_bytes,
    epub_bytes,
    odt_bytes,
    photos_zip,
    w_p,
    xxe_docx,
    zip_bomb_docx,
    zip_bytes,
)
from tests.kb_helpers import init_test_kb

pytest.importorskip("selectolax")
pytest.importorskip("defusedxml")

ALL_TYPES = '["markdown", "text", "code", "pdf", "html", "epub", "docx", "odt", "image"]'


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def index_every_type(root: Path) -> None:
    """The KB's manifest set to index every type (whichever template `pnk init` stamped)."""
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    text, replaced = re.subn(r"^types = .*$", f"types = {ALL_TYPES}", text, flags=re.M)
    if not replaced:
        text = text.replace("[sources]\n", f"[sources]\ntypes = {ALL_TYPES}\n", 1)
    manifest.write_text(text, encoding="utf-8")


def test_a_zip_bomb_is_refused_by_its_expansion_ratio(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.docx", zip_bomb_docx(8 * 1024 * 1024))
    assert path.stat().st_size < 100_000
    with pytest.raises(SourceError, match=r"expands more than 200 times .*a zip bomb\?\); not indexed"):
        docx.extract(path)


def test_a_container_past_the_total_limit_is_refused_before_reading(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The real limit is 512 MiB; a real container of 3 MiB of parts against a 2 MiB limit, in process.
    monkeypatch.setattr(archives, "MAX_TOTAL_BYTES", 2 * 1024 * 1024)
    parts = [(f"word/media/part{n}.bin", os.urandom(1024 * 1024)) for n in range(3)]
    path = write(tmp_path, "big.docx", zip_bytes([("word/document.xml", "<x/>"), *parts]))
    with pytest.raises(SourceError, match=r"its entries expand to 3,145,\d+ bytes, over the 2,097,152-byte limit"):
        docx.extract_in_process(path)


def test_billion_laughs_is_refused_not_expanded(tmp_path: Path) -> None:
    path = write(tmp_path, "laughs.docx", billion_laughs_docx())
    with pytest.raises(SourceError, match=r"declares XML entities or external references .*refused") as caught:
        docx.extract(path)
    assert caught.value.path is not None and Path(caught.value.path).name == "laughs.docx"


def test_an_external_entity_is_never_resolved(tmp_path: Path) -> None:
    secret = write(tmp_path, "secret.txt", "TOP-SECRET-TOKEN")
    path = write(tmp_path, "xxe.docx", xxe_docx(str(secret)))
    with pytest.raises(SourceError, match=r"declares XML entities or external references") as caught:
        docx.extract(path)
    assert "TOP-SECRET-TOKEN" not in caught.value.render()


def test_an_entity_in_an_epub_package_or_an_odt_is_refused_too(tmp_path: Path) -> None:
    laughs = "<!DOCTYPE x [<!ENTITY a \"aaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;\">]>"
    book = write(tmp_path, "laughs.epub", zip_bytes([
        ("mimetype", "application/epub+zip"),
        ("META-INF/container.xml", f'<?xml version="1.0"?>{laughs}<container><rootfiles><rootfile full-path="&b;"/>'
                                   "</rootfiles></container>")], stored_first=True))
    with pytest.raises(SourceError, match=r"META-INF/container\.xml of the EPUB declares XML entities"):
        epub.extract_in_process(book)
    document = write(tmp_path, "laughs.odt", zip_bytes([
        ("mimetype", "application/vnd.oasis.opendocument.text"),
        ("content.xml", f'<?xml version="1.0"?>{laughs}<office:document-content xmlns:office="urn:oasis:names:tc:'
                        'opendocument:xmlns:office:1.0">&b;</office:document-content>')], stored_first=True))
    with pytest.raises(SourceError, match=r"content\.xml of the ODT declares XML entities"):
        odt.extract_in_process(document)


def test_markup_nested_100_000_deep_fails_fast(tmp_path: Path) -> None:
    path = write(tmp_path, "deep.html", "<html><body>" + "<div>" * 100_000 + "x" + "</div>" * 100_000)
    with pytest.raises(SourceError, match=r"nested more than 5,000 deep"):
        html.extract(path)


def test_a_page_nested_deep_but_closed_implicitly_is_read(tmp_path: Path) -> None:
    items = "".join(f"<li>item {n}" for n in range(6000))  # 6,000 unclosed <li>: siblings, not nesting
    text = html.extract_in_process(write(tmp_path, "long-list.html", f"<ul>{items}</ul>")).text
    assert "- item 5999" in text


def test_a_200_mb_page_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.html"
    with open(path, "wb") as handle:
        handle.write(b"<html><body><p>")
        handle.truncate(200 * 1024 * 1024)  # a real 200 MB file (sparse on disk)
    with pytest.raises(SourceError, match=r"the HTML page is 209,715,200 bytes, over the 67,108,864-byte limit"):
        html.extract(path)


def test_malformed_xml_names_the_part(tmp_path: Path) -> None:
    broken = docx_bytes(w_p("fine")).replace(b"</w:body>", b"</w:bod")
    path = write(tmp_path, "broken.docx", zip_bytes([("[Content_Types].xml", "<x/>"),
                                                      ("word/document.xml", "<w:document><w:body><w:p>")]))
    with pytest.raises(SourceError, match=r"word/document\.xml of the DOCX is not well-formed XML"):
        docx.extract_in_process(path)
    assert broken  # the writer itself is sound: only the damaged part fails


@pytest.mark.parametrize(("name", "data", "reason"), [
    ("holiday.docx", photos_zip(), "it is a ZIP file but not a Word document (it has no word/document.xml)"),
    ("notes.docx", b"just some text that was renamed", "it is not a valid DOCX (not a ZIP container"),
    ("sheet.odt", None, "it is not an ODT text document (its mimetype is 'application/vnd.oasis.opendocument"
                        ".spreadsheet')"),
    ("book.epub", photos_zip(), "it is a ZIP file but not a EPUB book (it has no META-INF/container.xml)"),
])
def test_a_container_of_something_else_is_refused_saying_so(tmp_path: Path, name: str, data: bytes | None,
                                                            reason: str) -> None:
    if data is None:
        data = odt_bytes("<text:p>cells</text:p>", mimetype="application/vnd.oasis.opendocument.spreadsheet")
    path = write(tmp_path, name, data)
    module = {"docx": docx, "odt": odt, "epub": epub}[name.rsplit(".", 1)[1]]
    with pytest.raises(SourceError) as caught:
        module.extract_in_process(path)
    assert reason in caught.value.message


@pytest.mark.heavy
def test_a_sync_over_hostile_files_fails_each_alone_and_indexes_the_rest(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    embedder = FakeEmbedder()
    init_test_kb(root, embedder.identity)
    index_every_type(root)
    docs = root / "docs"
    secret = write(tmp_path, "secret.txt", "TOP-SECRET-TOKEN")
    hostile = {
        "docs/bomb.docx": zip_bomb_docx(8 * 1024 * 1024),
        "docs/laughs.docx": billion_laughs_docx(),
        "docs/xxe.docx": xxe_docx(str(secret)),
        "docs/deep.html": ("<div>" * 20_000).encode(),
        "docs/photos.docx": photos_zip(),
        "docs/empty.epub": b"",
    }
    for relative, data in hostile.items():
        write(root, relative, data)
    with open(docs / "huge.htm", "wb") as handle:
        handle.truncate(200 * 1024 * 1024)
    hostile["docs/huge.htm"] = b""
    write(root, "docs/good.html", "<html><body><main><h1>Breakwater</h1><p>The breakwater shelters the "
                                  "marina.</p></main></body></html>")
    write(root, "docs/good.docx", docx_bytes(w_p("The lighthouse keeper logs every ship.")))
    write(root, "docs/good.epub", epub_bytes([("c.xhtml", "Logbook", "<p>Gulls nest on the pier.</p>")]))
    write(root, "docs/good.odt", odt_bytes("<text:p>The ferry leaves at noon.</text:p>"))
    write(root, "docs/note.md", "# Note\n\nThe harbour master signs the permits.\n")

    report = run_sync(root, SyncOptions(), embedder=embedder)

    failures = {failure.path: failure for failure in report.failures}
    assert set(failures) == set(hostile)
    assert all(failure.stage == UNEXTRACTABLE for failure in failures.values())
    assert "zip bomb" in failures["docs/bomb.docx"].error
    assert "XML entities" in failures["docs/laughs.docx"].error
    assert "TOP-SECRET-TOKEN" not in failures["docs/xxe.docx"].error
    assert "nested more than" in failures["docs/deep.html"].error
    assert "not a Word document" in failures["docs/photos.docx"].error
    assert "over the 67,108,864-byte limit" in failures["docs/huge.htm"].error
    assert "empty" in failures["docs/empty.epub"].error
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        indexed = {path for (path,) in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
        texts = " ".join(text for (text,) in conn.execute("SELECT text FROM chunks"))
    finally:
        conn.close()
    assert indexed == {"docs/good.html", "docs/good.docx", "docs/good.epub", "docs/good.odt", "docs/note.md"}
    for words in ("breakwater shelters", "lighthouse keeper", "Gulls nest", "ferry leaves", "harbour master"):
        assert words in texts
    assert "TOP-SECRET-TOKEN" not in texts


def test_lists_nested_past_the_recursion_limit_fail_with_a_reason(tmp_path: Path) -> None:
    depth = 5000
    body = "<text:list><text:list-item>" * depth + "<text:p>deep</text:p>" + "</text:list-item></text:list>" * depth
    path = write(tmp_path, "deep.odt", odt_bytes(body))
    with pytest.raises(SourceError, match="nested too deeply to read"):
        odt.extract(path)


def test_text_boxes_nested_past_the_recursion_limit_fail_with_a_reason(tmp_path: Path) -> None:
    depth = 3000
    body = "<w:p><w:r><w:txbxContent>" * depth + w_p("deep") + "</w:txbxContent></w:r></w:p>" * depth
    path = write(tmp_path, "deep.docx", docx_bytes(body))
    with pytest.raises(SourceError, match="nested too deeply to read"):
        docx.extract(path)
