"""Document titles: the sidecar's, else the content's own (Markdown front matter or H1, reST and
AsciiDoc titles, PDF metadata), else the file name where a title is shown — never stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pinakes.extract.titles import (
    MAX_TITLE_CHARS,
    asciidoc_title,
    display_title,
    document_title,
    markdown_h1,
    rst_title,
)
from tests.test_serve_helpers import make_kb, sync_kb

# -- the rules, one format at a time -----------------------------------------------------------------


@pytest.mark.parametrize(("text", "title"), [
    ("# Harbour plan\n\nBody.\n", "Harbour plan"),
    ("Intro line.\n\n## Sub\n\n# Later H1 #\n", "Later H1"),  # the first H1, closing hashes dropped
    ("   #   Spaced   out   title  \n", "Spaced out title"),
    ("#hashtag\n\n# Real\n", "Real"),  # '#' then no space is not a heading
    ("```\n# not a heading\n```\n\n# After the fence\n", "After the fence"),
    ("~~~~\n# no\n~~~\n# still fenced\n~~~~\n# Out\n", "Out"),  # a shorter fence does not close it
    ("---\nowner: ops\n---\n# Under front matter\n", "Under front matter"),
    ("---\n# yaml comment, not a heading\n---\nText.\n", None),
    ("    # indented code\n", None),
    ("#\n\n## Only level two\n", None),
    ("No headings here.\n", None),
])
def test_markdown_h1(text: str, title: str | None) -> None:
    assert markdown_h1(text) == title


def test_markdown_front_matter_title_wins_over_the_h1() -> None:
    text = "---\ntitle: From  front matter\n---\n# From the heading\n"
    assert document_title(text, "markdown", "a.md") == "From front matter"
    assert document_title("---\ntitle: [not, a, string]\n---\n# Heading\n", "markdown", "a.md") == "Heading"


@pytest.mark.parametrize(("text", "title"), [
    ("Guide\n=====\n\nIntro.\n", "Guide"),
    ("=======\n Guide \n=======\n\nIntro.\n", "Guide"),  # overlined, inset text
    (".. comment\n\nInstall\n-------\n\nStep.\n", "Install"),
    ("Too long a title\n=====\n\nBody\n~~~~\n", "Body"),  # a short underline is not an adornment
    ("A paragraph line\nthat ends here\n--------------\n\nNext\n^^^^\n", "Next"),  # not after a blank
    ("Text.\n\n----\n\nAfter a transition.\n", None),
    ("=====\nMixed\n-----\n", None),  # overline and underline must be the same character
    ("Plain text only.\n", None),
    ("Windows\r\n=======\r\n", "Windows"),
])
def test_rst_title(text: str, title: str | None) -> None:
    assert rst_title(text) == title


@pytest.mark.parametrize(("text", "title"), [
    ("= Document Title\n:toc:\n\n== Section\n", "Document Title"),
    ("// a comment\n= Title\n", "Title"),
    ("== Section first\n\n= Late\n", None),
    ("No title.\n", None),
])
def test_asciidoc_title(text: str, title: str | None) -> None:
    assert asciidoc_title(text) == title


def test_text_markup_is_decided_by_the_file_name() -> None:
    rst = "Guide\n=====\n\nBody.\n"
    assert document_title(rst, "text", "docs/guide.rst") == "Guide"
    assert document_title(rst, "text", "docs/guide.rst.txt") == "Guide"
    assert document_title(rst, "text", "docs/guide.txt") is None  # plain text declares no title
    assert document_title("= Manual\n", "text", "docs/manual.adoc") == "Manual"
    assert document_title("# Not markdown\n", "code", "tool.py") is None


def test_titles_are_one_line_and_bounded() -> None:
    assert document_title("# " + "word " * 200 + "\n", "markdown", "a.md") == ("word " * 200)[:MAX_TITLE_CHARS]
    assert document_title("---\ntitle: \"a\\nb\"\n---\n", "markdown", "a.md") == "a b"


def test_the_head_is_read_from_the_file_when_no_text_is_given(tmp_path: Path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"\xef\xbb\xbf# With a BOM\n")
    assert document_title(None, "markdown", path) == "With a BOM"
    assert document_title(None, "markdown", tmp_path / "gone.md") is None


def test_display_title_falls_back_to_the_file_name() -> None:
    assert display_title("Kafka", "docs/kafka.md") == "Kafka"
    assert display_title(None, "docs/notes/travel.md") == "travel.md"
    assert display_title("", "top.txt") == "top.txt"


# -- PDF metadata ------------------------------------------------------------------------------------


def pdf_with_info(text: str, info: str | None) -> bytes:
    """A one-page PDF with a text line and, optionally, an information dictionary."""
    from tests.paid_gate_harness import minimal_pdf

    return minimal_pdf(text, info).encode("latin-1")


@pytest.fixture
def pdfium() -> None:
    pytest.importorskip("pypdfium2", reason="PDF metadata needs the [pdf] extra")


@pytest.mark.usefixtures("pdfium")
@pytest.mark.parametrize(("info", "title"), [
    ("<< /Title (Annual  report 2026) /Author (Finance) >>", "Annual report 2026"),
    ("<< /Title <FEFF00C9007400E9> >>", "\u00c9t\u00e9"),  # UTF-16BE with a BOM
    ("<< /Title (Untitled) >>", None),  # a producer's placeholder
    ("<< /Title () >>", None),
    ("<< /Author (Nobody) >>", None),
    (None, None),
])
def test_pdf_title_comes_from_its_metadata(tmp_path: Path, info: str | None, title: str | None) -> None:
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf_with_info("Revenue grew", info))
    assert document_title(None, "pdf", path) == title


@pytest.mark.usefixtures("pdfium")
def test_an_unreadable_pdf_has_no_title(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nnot really\n")
    assert document_title(None, "pdf", path) is None


# -- through a sync ----------------------------------------------------------------------------------


def titles(root: Path) -> dict[str, str | None]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return dict(conn.execute("SELECT path, title FROM documents WHERE state = 'active'").fetchall())
    finally:
        conn.close()


def test_sync_stores_each_formats_own_title_and_never_the_file_name(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "titles", {
        "h1.md": "Preamble.\n\n# The H1 title\n\nBody text.\n",
        "guide.rst": "=====\nGuide\n=====\n\nIntro text.\n\nInstall\n-------\n\nSteps.\n",
        "manual.adoc": "= The Manual\n\n== Part\n\nText.\n",
        "plain.txt": "Heading-like\n============\n\nPlain text never declares a title.\n",
        "tool.py": "# A comment, not a title\nprint('hi')\n",
    })
    sync_kb(root)
    assert titles(root) == {
        "docs/h1.md": "The H1 title", "docs/guide.rst": "Guide", "docs/manual.adoc": "The Manual",
        "docs/plain.txt": None, "docs/tool.py": None,
    }
    # A sidecar title wins; removing it brings the content's back (the metadata-refresh path).
    sidecar = root / "docs" / "guide.rst.pnk.yaml"
    original = sidecar.read_text(encoding="utf-8")
    sidecar.write_text(original + "title: From the sidecar\n", encoding="utf-8")
    sync_kb(root)
    assert titles(root)["docs/guide.rst"] == "From the sidecar"
    sidecar.write_text(original, encoding="utf-8")
    sync_kb(root)
    assert titles(root)["docs/guide.rst"] == "Guide"


@pytest.mark.usefixtures("pdfium")
def test_sync_takes_a_pdfs_title_from_its_metadata(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "pdfs", {})
    (root / "docs" / "report.pdf").write_bytes(pdf_with_info("Revenue grew", "<< /Title (Annual report) >>"))
    (root / "docs" / "bare.pdf").write_bytes(pdf_with_info("Nothing declared", None))
    sync_kb(root)
    assert titles(root) == {"docs/report.pdf": "Annual report", "docs/bare.pdf": None}
