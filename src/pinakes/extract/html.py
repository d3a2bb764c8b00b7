"""The HTML extractor (`.html`, `.htm`, `.xhtml`; the `[formats]` extra): a page's main text with its
structure, written as Markdown (`blocks.py`), its site boilerplate left out (`html_text.py`).

The bytes are decoded by the first that speaks: a byte order mark (UTF-8, UTF-16), a `<meta charset>`
or `<meta http-equiv="Content-Type">` in the first 4 KiB (the HTML standard's prescan window), valid
UTF-8, then detection (charset-normalizer, on the head of the file), else windows-1252, the web's
default. Undecodable bytes become U+FFFD: a page is never refused for one bad byte.

Refused, each a `SourceError` for this one file: over `MAX_HTML_BYTES` (before reading), elements
nested deeper than `MAX_NESTING` (the parser's time grows with the square of the depth: a hostile page
of 100,000 nested `<div>`s takes it 40 s, one of 10,000 a third of a second), and a page with no
text at all. The parse runs in the isolation child (`isolation.py`) under the limits a PDF has, so
whatever else a page does to the parser fails this page alone.

The title (`declared`) is the `<title>`, or the page's `<h1>` where the title is that heading plus a
site's name, read from the head of the file in the same child.
"""

from __future__ import annotations

import codecs
import importlib.util
import re
from pathlib import Path

from pinakes.errors import MissingExtraError, SourceError
from pinakes.extract.blocks import BlockWriter
from pinakes.extract.file_size import checked_size
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

BACKEND = "html"
MAX_HTML_BYTES = 64 * 1024 * 1024
MAX_NESTING = 5_000
PRESCAN_BYTES = 4096
DETECT_BYTES = 64 * 1024
WESTERN_CHAOS_MARGIN = 0.1
HEAD_BYTES = 256 * 1024  # what the title reader parses: a page's <title> and first <h1> are near its top
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9-]*)|<!--|-->")
# Elements that are never nested by their markup: void elements, and the ones a parser closes
# implicitly (an unclosed <p>, <li> or <td> is a sibling of the next one, not its parent).
_NOT_NESTING = frozenset({
    b"area", b"base", b"br", b"col", b"embed", b"hr", b"img", b"input", b"link", b"meta", b"source",
    b"track", b"wbr", b"param", b"keygen", b"p", b"li", b"dt", b"dd", b"tr", b"td", b"th", b"option",
    b"optgroup", b"thead", b"tbody", b"tfoot", b"colgroup", b"rp", b"rt", b"html", b"head", b"body",
})
REMEDY = "if the page opens in a browser, save it again (as \"Web page, HTML only\") and run `pnk sync`; otherwise exclude it in [sources]"


def extract(path: Path, source_type: str = "html") -> ExtractedText:
    """`extract_in_process` in the isolation child, under limits sized to the file."""
    if source_type != "html":
        raise ValueError(f"the {BACKEND} extractor handles html, not {source_type!r}")
    require_parser()
    from pinakes.extract.isolation import Limits, run_isolated

    size = checked_size(path, MAX_HTML_BYTES, "HTML page")
    return run_isolated(extract_in_process, path, limits=Limits.for_input(size), what="the HTML parser",
                        path=path, remedy=REMEDY)


def extract_in_process(path: Path) -> ExtractedText:
    checked_size(path, MAX_HTML_BYTES, "HTML page")
    data = path.read_bytes()
    writer = BlockWriter()
    write_html(data, writer, path=path, site=True)
    text = writer.text()
    if not text.strip():
        raise SourceError("the page has no text once its markup, scripts and navigation are left out; not indexed",
                          remedy="check that it is the page itself and not a redirect or an app shell, or "
                                 "exclude it in [sources]", path=path)
    return ExtractedText(text=text, pages=None, backend=BACKEND, fingerprint=EXTRACTORS[BACKEND].fingerprint())


def write_html(data: bytes, writer: BlockWriter, *, path: Path, site: bool) -> None:
    """One page's (or one EPUB chapter's) text into `writer`: decoded, bounded, parsed and walked."""
    from selectolax.lexbor import LexborHTMLParser

    from pinakes.extract.html_text import write_page

    check_nesting(data, path)
    tree = LexborHTMLParser(decode_html(data))
    write_page(tree, writer, site=site)


def declared_title(path: Path) -> str | None:
    """The page's title, read from the head of the file (see the module docstring); made one short
    line by its reader, `front_matter.document_front_matter`, as every format's declared title is."""
    from selectolax.lexbor import LexborHTMLParser

    from pinakes.extract.html_text import page_title

    with open(path, "rb") as handle:
        head = handle.read(HEAD_BYTES)
    check_nesting(head, path)
    return page_title(LexborHTMLParser(decode_html(head)))


def decode_html(data: bytes) -> str:
    """`data` as text (see the module docstring for the order of the evidence)."""
    for bom, encoding in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                          (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(encoding, errors="replace")
    declared = _meta_charset(data[:PRESCAN_BYTES])
    if declared is not None:
        return data.decode(declared, errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    detected = _detected(data[:DETECT_BYTES])
    return data.decode(detected or "windows-1252", errors="replace")


def check_nesting(data: bytes, path: Path) -> None:
    """Refuse markup nested deeper than MAX_NESTING, counted from the tags before any parse (a close
    estimate: implicitly closed and void elements never count)."""
    depth = deepest = 0
    in_comment = False
    for match in _TAG.finditer(data):
        token = match.group(0)
        if in_comment:
            in_comment = token != b"-->"
            continue
        if token == b"<!--":
            in_comment = True
            continue
        if token == b"-->":
            continue
        name = match.group(2).lower()
        if name in _NOT_NESTING:
            continue
        if match.group(1):
            depth = max(0, depth - 1)
        else:
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    raise SourceError(f"elements are nested more than {MAX_NESTING:,} deep (a malformed or hostile "
                                      "page: parsing it would take minutes); not indexed", remedy=REMEDY, path=path)


def require_parser() -> None:
    if importlib.util.find_spec("selectolax") is None:
        raise MissingExtraError("formats", "HTML, EPUB, DOCX and ODT extraction", missing_module="selectolax")


def _meta_charset(head: bytes) -> str | None:
    match = _META_CHARSET.search(head)
    if match is None:
        return None
    try:
        name = codecs.lookup(match.group(1).decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None
    # The HTML standard: a page declaring UTF-16 in its bytes is read as UTF-8 (it cannot be UTF-16);
    # x-user-defined and latin-1 labels are windows-1252.
    if name.startswith("utf-16"):
        return "utf-8"
    return "windows-1252" if name in ("latin-1", "iso8859-1", "ascii") else name


def _detected(head: bytes) -> str | None:
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return None
    matches = from_bytes(head)
    best = matches.best()
    if best is None:
        return None
    # On a short page detection cannot tell one Latin code page from another: where windows-1252 reads
    # the bytes nearly as cleanly as the best guess (a page in another script reads as noise in it, or
    # is no candidate at all), the web's default wins.
    western = next((match for match in matches if match.encoding == "cp1252"), None)
    if western is not None and western.chaos <= best.chaos + WESTERN_CHAOS_MARGIN:
        return "cp1252"
    return best.encoding
