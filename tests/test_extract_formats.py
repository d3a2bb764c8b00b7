"""The document-format extractors (issue #43): what each reads from real files of its format, how it
writes the structure (Markdown the chunker reads as headings, lists, tables and code), and what it
leaves out (site chrome, comments, deleted text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pinakes.chunking import chunk_text
from pinakes.extract import docx, epub, html, odt
from pinakes.extract.declared import read_declared
from pinakes.extract.source_types import chunked_as, source_type_for
from tests.format_files import docx_bytes, epub_bytes, odt_bytes, w_p

pytest.importorskip("selectolax")
pytest.importorskip("defusedxml")


def write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


SITE_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><title>Tide tables — Harbour Wiki</title>
<style>.x{color:red}</style><script>var tracking = "pixel";</script></head><body>
<header class="site"><a href="/">Harbour Wiki</a><nav><a href="/a">Home</a> <a href="/b">Recent changes</a></nav></header>
<div class="sidebar"><h3>Browse</h3><ul><li><a href="/x">Every page</a></li></ul></div>
<main><div class="breadcrumbs">Home / Tides</div>
<h1>Tide tables</h1>
<p>High water at the <b>north quay</b> comes
forty minutes after the pier.<br>Spring tides reach six metres.</p>
<h2>Reading a table</h2>
<ul><li>Times are local.<ul><li>Summer time applies.</li></ul></li><li>Heights are in metres.</li></ul>
<ol start="3"><li>Find the date.</li><li>Read the row.</li></ol>
<table><tr><th>Day</th><th>High</th></tr><tr><td>Monday</td><td>06:10</td></tr></table>
<pre>def tide(hour):
    return hour  # kept as written

# not a heading</pre>
<p hidden>A hidden survey.</p><div style="display: none">Cookie settings</div>
<div aria-hidden="true">Newsletter popup</div>
<p># a paragraph that starts like a heading</p>
</main>
<aside><h3>On this page</h3><a href="#t">Reading a table</a></aside>
<footer>© Harbour Wiki contributors. Privacy policy.</footer></body></html>"""


def test_html_keeps_the_main_text_with_its_structure_and_drops_the_site_chrome(tmp_path: Path) -> None:
    text = html.extract_in_process(write(tmp_path, "tides.html", SITE_PAGE)).text
    assert text.startswith("# Tide tables\n\nHigh water at the north quay comes forty minutes after the pier.\n"
                           "Spring tides reach six metres.\n\n## Reading a table\n\n")
    assert "- Times are local.\n  - Summer time applies.\n- Heights are in metres." in text
    assert "3. Find the date.\n4. Read the row." in text
    assert "| Day | High |\n| --- | --- |\n| Monday | 06:10 |" in text
    assert "```\ndef tide(hour):\n    return hour  # kept as written\n\n# not a heading\n```" in text  # verbatim
    assert "\\# a paragraph that starts like a heading" in text  # escaped: not a heading to the chunker
    for chrome in ("Harbour Wiki", "Recent changes", "Every page", "Home / Tides", "On this page", "Privacy",
                   "survey", "Cookie", "Newsletter", "tracking", "color:red"):
        assert chrome not in text, chrome


def test_html_headings_become_the_chunks_heading_trail(tmp_path: Path) -> None:
    text = html.extract_in_process(write(tmp_path, "tides.html", SITE_PAGE)).text
    chunks = chunk_text(text, chunked_as("html"), max_tokens=30, overlap=0, count_tokens=lambda s: len(s.split()))
    trails = {chunk.heading_path for chunk in chunks}
    assert ("Tide tables", "Reading a table") in trails
    assert all(chunk.text == text[chunk.char_start:chunk.char_end] for chunk in chunks)


def test_html_title_is_the_h1_when_the_title_adds_only_the_sites_name(tmp_path: Path) -> None:
    assert html.declared_title(write(tmp_path, "a.html", SITE_PAGE)) == "Tide tables"
    other = "<html><head><title>Minutes of the March meeting</title></head><body><h1>Agenda</h1></body></html>"
    assert html.declared_title(write(tmp_path, "b.html", other)) == "Minutes of the March meeting"
    assert html.declared_title(write(tmp_path, "c.html", "<body><h1>Only a heading</h1><p>x</p>")) == "Only a heading"


@pytest.mark.parametrize(("data", "expected"), [
    ("<meta charset='windows-1251'><p>Привет мир</p>".encode("windows-1251"), "Привет мир"),
    ('<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><p>café crème</p>'.encode("latin-1"),
     "café crème"),
    (b"\xef\xbb\xbf<p>caf\xc3\xa9 with a BOM</p>", "café with a BOM"),
    ("<p>Grüße aus Köln</p>".encode("utf-16-le").join([b"\xff\xfe", b""]), "Grüße aus Köln"),
    ("<p>Ünïcödé without a declaration</p>".encode(), "Ünïcödé without a declaration"),
    ("<p>naïve résumé déjà vu, a page saved as latin-1 with no declaration at all</p>".encode("latin-1"),
     "naïve résumé déjà vu"),
])
def test_html_encoding_from_bom_meta_or_detection(tmp_path: Path, data: bytes, expected: str) -> None:
    assert expected in html.extract_in_process(write(tmp_path, "page.htm", data)).text


def test_malformed_html_is_repaired_as_a_browser_would(tmp_path: Path) -> None:
    text = html.extract_in_process(write(tmp_path, "bad.html", "<p>one<p>two <b>bold <i>both</b> after</i>"
                                                                 "<table><tr><td>cell<td>next</table><div>end")).text
    assert "one\n\ntwo bold both after" in text and "| cell | next |" in text and text.rstrip().endswith("end")


def test_the_new_suffixes_are_their_types() -> None:
    assert [source_type_for(name) for name in ("a.html", "b.HTM", "c.xhtml", "d.epub", "e.docx", "f.odt")] == [
        "html", "html", "html", "epub", "docx", "odt"]


# --- DOCX ------------------------------------------------------------------------------------------

DOCX_BODY = "".join([
    w_p("Harbour report", style="Title"),
    w_p("Berths", style="Heading1"),
    w_p("German-named third level", style="Berschrift3"),
    w_p("Chapter by a custom style", style="MyChapter"),
    w_p("Dredging", style="Heading2"),
    w_p("first bullet", num=(1, 0)),
    w_p("nested bullet", num=(1, 1)),
    w_p("by the list style", style="ListBullet"),
    w_p("step one", num=(2, 0)),
    w_p("step two", num=(2, 0)),
    w_p("def berth():", style="SourceCode"),
    w_p("    return 7", style="SourceCode"),
    w_p(runs='<w:r><w:t>The quay was </w:t></w:r><w:del w:id="1"><w:r><w:delText>never</w:delText></w:r></w:del>'
             '<w:ins w:id="2"><w:r><w:t>recently </w:t></w:r></w:ins><w:r><w:t>rebuilt</w:t></w:r>'
             '<w:commentRangeStart w:id="0"/><w:r><w:commentReference w:id="0"/></w:r>'
             '<w:r><w:footnoteReference w:id="1"/></w:r><w:r><w:t xml:space="preserve">.</w:t></w:r>'),
    w_p(runs='<w:r><w:t>Anchor of a box.</w:t></w:r><w:r><mc:AlternateContent><mc:Choice Requires="wps">'
             '<w:drawing><wps:txbx><w:txbxContent><w:p><w:r><w:t>Text box: crane capacity 40 t</w:t></w:r></w:p>'
             '</w:txbxContent></wps:txbx></w:drawing></mc:Choice><mc:Fallback><w:pict><v:textbox><w:txbxContent>'
             '<w:p><w:r><w:t>Text box: crane capacity 40 t</w:t></w:r></w:p></w:txbxContent></v:textbox></w:pict>'
             "</mc:Fallback></mc:AlternateContent></w:r>"),
    "<w:tbl><w:tr><w:tc>" + w_p("Berth") + "</w:tc><w:tc>" + w_p("Depth") + "</w:tc></w:tr><w:tr><w:tc>"
    + w_p("North") + "</w:tc><w:tc>" + w_p("9 m") + "</w:tc></w:tr></w:tbl>",
    w_p(runs='<w:r><w:t>Field result</w:t></w:r><w:r><w:instrText> PAGE \\* MERGEFORMAT </w:instrText></w:r>'),
])
DOCX_FOOTNOTES = ('<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> Rebuilt in '
                  "2019 after the storm.</w:t></w:r></w:p></w:footnote>")


def test_docx_headings_lists_tables_code_notes_and_boxes(tmp_path: Path) -> None:
    path = write(tmp_path, "report.docx", docx_bytes(DOCX_BODY, footnotes=DOCX_FOOTNOTES, title="Harbour report 2024",
                                                     creators=["Ada Quay", "Ben Pier"]))
    text = docx.extract_in_process(path).text
    assert text.startswith("# Harbour report\n\n# Berths\n\n### German-named third level\n\n"
                           "# Chapter by a custom style\n\n## Dredging\n\n")
    assert "- first bullet\n  - nested bullet\n- by the list style\n1. step one\n2. step two" in text
    assert "```\ndef berth():\n    return 7\n```" in text
    assert "The quay was recently rebuilt[^1].\n\n[^1]: Rebuilt in 2019 after the storm." in text
    assert "never" not in text  # a tracked deletion: changes are accepted
    assert text.count("crane capacity") == 1  # the box once, not also its VML fallback
    assert text.index("Anchor of a box.") < text.index("Text box: crane capacity 40 t")
    assert "| Berth | Depth |\n| --- | --- |\n| North | 9 m |" in text
    assert "Field result" in text and "MERGEFORMAT" not in text
    assert read_declared(path, "docx") == ("Harbour report 2024", ("Ada Quay", "Ben Pier"))


def test_docx_comments_are_left_out(tmp_path: Path) -> None:
    path = write(tmp_path, "c.docx", docx_bytes(w_p("Body text.")))
    with_comments = path.read_bytes()
    import io
    import zipfile

    buffer = io.BytesIO(with_comments)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("word/comments.xml", f'<w:comments xmlns:w="{docx.W[1:-1]}"><w:comment w:id="0"><w:p><w:r>'
                                              "<w:t>Reviewer: cut this</w:t></w:r></w:p></w:comment></w:comments>")
    path.write_bytes(buffer.getvalue())
    assert docx.extract_in_process(path).text == "Body text.\n"


# --- ODT -------------------------------------------------------------------------------------------

ODT_BODY = (
    '<text:h text:outline-level="1">Harbour minutes</text:h>'
    '<text:p>Present:<text:s text:c="2"/>the board.<text:line-break/>Absent: none.</text:p>'
    '<text:h text:outline-level="2">Decisions</text:h>'
    '<text:list text:style-name="L1"><text:list-item><text:p>Dredge the basin</text:p></text:list-item>'
    "<text:list-item><text:p>Paint the cranes</text:p></text:list-item></text:list>"
    '<text:list text:style-name="L2"><text:list-item><text:p>bullet</text:p><text:list><text:list-item><text:p>'
    "sub bullet</text:p></text:list-item></text:list></text:list-item></text:list>"
    '<text:p text:style-name="P1">x = 1</text:p><text:p text:style-name="P1">  y = x</text:p>'
    "<text:p>The crane<text:note text:note-class=\"footnote\"><text:note-citation>1</text:note-citation>"
    "<text:note-body><text:p>Bought in 1998.</text:p></text:note-body></text:note> is old."
    "<office:annotation><text:p>Reviewer: check the year</text:p></office:annotation></text:p>"
    '<text:p>Anchor<draw:frame><draw:text-box><text:p>Box: berth 4 closed</text:p></draw:text-box></draw:frame></text:p>'
    "<text:tracked-changes><text:changed-region><text:deletion><text:p>Deleted wording</text:p></text:deletion>"
    "</text:changed-region></text:tracked-changes>"
    "<table:table><table:table-row><table:table-cell><text:p>Item</text:p></table:table-cell><table:table-cell>"
    "<text:p>Cost</text:p></table:table-cell></table:table-row><table:table-row><table:table-cell><text:p>Paint"
    "</text:p></table:table-cell><table:table-cell><text:p>400</text:p></table:table-cell></table:table-row>"
    "</table:table>"
    "<text:table-of-content><text:index-body><text:p>Decisions ..... 1</text:p></text:index-body></text:table-of-content>"
)


def test_odt_headings_lists_tables_code_notes_and_boxes(tmp_path: Path) -> None:
    path = write(tmp_path, "minutes.odt", odt_bytes(ODT_BODY, title="Minutes", creator="Clara Dock"))
    text = odt.extract_in_process(path).text
    assert text.startswith("# Harbour minutes\n\nPresent: the board.\nAbsent: none.\n\n## Decisions\n\n"
                           "1. Dredge the basin\n2. Paint the cranes\n- bullet\n  - sub bullet")
    assert "```\nx = 1\n  y = x\n```" in text  # verbatim: text:s spaces kept
    assert "The crane[^1] is old.\n\n[^1]: Bought in 1998." in text
    assert text.index("Anchor") < text.index("Box: berth 4 closed")
    assert "| Item | Cost |\n| --- | --- |\n| Paint | 400 |" in text
    for left_out in ("Reviewer", "Deleted wording", "....."):
        assert left_out not in text
    assert read_declared(path, "odt") == ("Minutes", ("Clara Dock",))


# --- EPUB ------------------------------------------------------------------------------------------

CHAPTERS = [
    ("one.xhtml", "Chapter One: The Quay", "<h1>Chapter One: The Quay</h1><p>Ships came at dawn.</p>"),
    ("two.xhtml", "Chapter Two: The Storm", "<p>The wind rose.</p><h2>Aftermath</h2><p>Boats were lost.</p>"),
    ("three.xhtml", "Chapter Three", "<header><h2>Chapter Three</h2></header><p>Calm returned.</p>"),
]


@pytest.mark.parametrize("toc", ["nav", "ncx"])
def test_epub_chapters_in_spine_order_each_under_its_title(tmp_path: Path, toc: str) -> None:
    data = epub_bytes(CHAPTERS, title="Harbour Tales", creators=["Dora Wharf"], nav=toc == "nav", ncx=toc == "ncx")
    path = write(tmp_path, "tales.epub", data)
    text = epub.extract_in_process(path).text
    assert text == ("# Chapter One: The Quay\n\nShips came at dawn.\n\n# Chapter Two: The Storm\n\nThe wind rose.\n\n"
                    "## Aftermath\n\nBoats were lost.\n\n# Chapter Three\n\nCalm returned.\n")
    assert "Contents" not in text  # the navigation document is a table of contents, not text
    chunks = chunk_text(text, chunked_as("epub"), max_tokens=8, overlap=0, count_tokens=lambda s: len(s.split()))
    assert ("Chapter Two: The Storm", "Aftermath") in {chunk.heading_path for chunk in chunks}
    assert read_declared(path, "epub") == ("Harbour Tales", ("Dora Wharf",))
