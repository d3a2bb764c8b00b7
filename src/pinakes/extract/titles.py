"""A document's title: the one home of the rules (spec §3, `documents.title`).

What is stored is the sidecar's `title`, else the title the document's own content declares
(`document_title`):

- Markdown: the front matter's `title:`, else the first ATX level-1 heading (`# Title`) outside the
  front matter and fenced code;
- reStructuredText (`.rst`, `.rest`, `.rst.txt`): the first section title, a line underlined (and
  optionally overlined) by a run of one punctuation character at least as long as the line;
- AsciiDoc (`.adoc`, `.asciidoc`): the document title line (`= Title`);
- PDF: the `Title` of the document information dictionary (read with pypdfium2; None without the
  `[pdf]` extra);
- HTML: the `<title>`, or the page's `<h1>` where the title is that heading plus a site's name;
  EPUB, DOCX, ODT: the title their metadata declares (`dc:title`); never the text, so the title is
  the same whether the document was just extracted or only its sidecar changed (extract/declared.py);
- anything else (plain text, code): none.

The file name is *not* stored: it is the fallback where a title is shown (`display_title`), so a
sidecar or content title added later still wins and a rename needs no re-index.

The front matter block itself is left out of the indexed passages (`pinakes.chunking`), so its raw
YAML never becomes a search hit; what it declares (title, description, aliases, tags) is read by
`pinakes.extract.front_matter`, which also reads Logseq's `title::` page property.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

# Titles are declared at the top (HEAD_CHARS) and are one line of at most MAX_TITLE_CHARS: the
# front matter's rules, re-exported for the other formats' readers.
from pinakes.extract.front_matter import HEAD_CHARS as HEAD_CHARS
from pinakes.extract.front_matter import MAX_TITLE_CHARS as MAX_TITLE_CHARS
from pinakes.extract.front_matter import clean_title, document_head, read_front_matter

# PDF producers fill `Title` with these when the author gave none.
_PLACEHOLDER_TITLES = frozenset({"untitled", "untitled document", "no title", "title"})

# reST adornment: one repeated punctuation character (docutils' set), two or more of it.
_RST_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*\r?$")
_ASCIIDOC_TITLE = re.compile(r"=[ \t]+(\S.*?)[ \t]*\r?$")


def document_title(text: str | None, source_type: str, path: Path | str) -> str | None:
    """The title the document's own content declares, or None.

    `text` is its indexed text (or at least its first `HEAD_CHARS` characters); None reads the
    head of the file at `path`. A PDF's title comes from the file at `path`, never from `text`.
    """
    if source_type == "pdf":
        return pdf_metadata_title(Path(path))
    from pinakes.extract.source_types import MARKDOWN_WRITTEN

    if source_type in MARKDOWN_WRITTEN:  # its own metadata, never its text (extract/declared.py)
        from pinakes.extract.front_matter import document_front_matter

        return document_front_matter(None, source_type, path).title
    if source_type == "markdown":
        head = document_head(text, path)
        return None if head is None else read_front_matter(head).title or markdown_h1(head)
    if source_type == "text":
        from pinakes.extract.source_types import markup_for

        markup = markup_for(path)
        if markup is None:
            return None
        head = document_head(text, path)
        if head is None:
            return None
        return rst_title(head) if markup == "rst" else asciidoc_title(head)
    return None


def display_title(title: str | None, path: str) -> str:
    """What a person or agent is shown as a document's name: its title, else its file name."""
    if title:
        return title
    return PurePosixPath(path).name or path


def front_matter_title(text: str) -> str | None:
    """The title the front matter of a Markdown text declares, or None."""
    return read_front_matter(text).title


def markdown_h1(text: str) -> str | None:
    """The text of the first ATX level-1 heading (`# Title`) outside front matter and fenced code."""
    from pinakes.chunking import markdown_headings

    return next((clean_title(title) for level, title in markdown_headings(text) if level == 1 and clean_title(title)),
                None)


def rst_title(text: str) -> str | None:
    """The first reST section title: a line underlined by an adornment at least as long as it, either
    overlined by the same adornment (the text may then be inset) or not indented and after a blank
    line or the start of the text."""
    lines = text.split("\n")
    for index in range(len(lines) - 1):
        line = lines[index].rstrip()
        if not line.strip() or _RST_ADORNMENT.match(line):
            continue
        under = _RST_ADORNMENT.match(lines[index + 1])
        if under is None or len(lines[index + 1].rstrip()) < len(line):
            continue
        above = lines[index - 1] if index > 0 else ""
        overline = _RST_ADORNMENT.match(above)
        if overline is not None and overline.group(1) == under.group(1) \
                and len(above.rstrip()) == len(lines[index + 1].rstrip()):
            return clean_title(line)  # overlined: the text may be inset
        if above.strip() or line[:1].isspace():
            continue  # the last line of a paragraph, a mismatched overline, or indented text
        return clean_title(line)
    return None


def asciidoc_title(text: str) -> str | None:
    """The AsciiDoc document title: the first `= Title` line (level 0), before any section."""
    for line in text.split("\n"):
        if line.startswith("=="):
            return None  # a section came first: the document has no title line
        match = _ASCIIDOC_TITLE.match(line)
        if match:
            return clean_title(match.group(1))
    return None


def pdf_metadata_title(path: Path) -> str | None:
    """The `Title` of a PDF's information dictionary, or None (none, a placeholder, unreadable, or
    the `[pdf]` extra not installed). Opening a PDF reads its cross-reference table, not its pages,
    but a hostile file's dictionary can still be a decompression bomb: it is read in the isolated
    parser process (`isolation.py`), and a crash or a limit there is no title, never a dead sync."""
    import importlib.util

    if importlib.util.find_spec("pypdfium2") is None:
        return None
    from pinakes.errors import PinakesError
    from pinakes.extract.isolation import Limits, run_isolated

    try:
        return run_isolated(_read_pdf_title, path, limits=Limits.for_input(path.stat().st_size),
                            what="the PDF metadata reader", path=path)
    except (OSError, PinakesError):
        return None


def _read_pdf_title(path: Path) -> str | None:
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(str(path))
    except (pdfium.PdfiumError, OSError):
        return None
    try:
        title = clean_title(document.get_metadata_value("Title"))
    except pdfium.PdfiumError:
        return None
    finally:
        document.close()
    if title is None or title.lower() in _PLACEHOLDER_TITLES:
        return None
    return title
