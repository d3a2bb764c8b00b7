"""The ODT extractor (OpenDocument text: LibreOffice, OpenOffice; the `[formats]` extra): the body's text
with its structure, written as Markdown (`blocks.py`), read from `content.xml` itself (`archives.py`:
zip and XML limits, entities refused) in the isolation child. The same rules as DOCX (`docx.py`):

- **headings**: `text:h` at its outline level;
- **lists**: `text:list` items at their depth, `1.`-style where the list style numbers that level,
  `-` where it is a bullet;
- **tables**: one line per row (`table:table-row`, repeated rows once), cells in order;
- **code**: consecutive paragraphs in a code style (`Preformatted Text`, `Source Code`, any style
  whose name says code) as one fenced block, verbatim (`text:s` spaces and `text:tab` kept);
- **footnotes and endnotes** (`text:note`): `[^N]` where cited, `[^N]: …` after the paragraph;
- **frames and text boxes** (`draw:frame`/`draw:text-box`): after the paragraph they are anchored in;
- **tracked changes are accepted**: the deletions ODF keeps in `text:tracked-changes` are left out
  and insertions read as text; **annotations (comments) are left out**; so are headers, footers and
  the table of contents a word processor generates (`text:table-of-content`, `text:index-*`).

A zip that lacks `content.xml`, or whose `mimetype` names another OpenDocument kind, is refused as
"not an ODT". The title and authors are `meta.xml`'s `dc:title` and `meta:initial-creator`/`dc:creator`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import SourceError
from pinakes.extract.archives import Container, local, nesting_refused, require_defusedxml
from pinakes.extract.blocks import BlockWriter
from pinakes.extract.file_size import checked_size
from pinakes.extract.html import require_parser
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

BACKEND = "odt"
MAX_ODT_BYTES = 256 * 1024 * 1024
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
STYLE = "{urn:oasis:names:tc:opendocument:xmlns:style:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
DC = "{http://purl.org/dc/elements/1.1/}"
META = "{urn:oasis:names:tc:opendocument:xmlns:meta:1.0}"
MIMETYPE = "application/vnd.oasis.opendocument.text"
REMEDY = ("if it opens in a word processor, save it again as .odt and run `pnk sync`; otherwise exclude it "
          "in [sources]")
_CODE_STYLE_WORDS = ("code", "preformatted", "verbatim")
_SKIPPED = frozenset({"annotation", "annotation-end", "tracked-changes", "change", "change-start", "change-end",
                      "bookmark", "bookmark-start", "bookmark-end", "reference-mark", "soft-page-break",
                      "table-of-content", "illustration-index", "alphabetical-index", "bibliography",
                      "user-index", "object-index", "table-index", "sequence-decls", "variable-decls",
                      "user-field-decls", "forms", "note-citation", "title", "desc"})


def extract(path: Path, source_type: str = "odt") -> ExtractedText:
    if source_type != "odt":
        raise ValueError(f"the {BACKEND} extractor handles odt, not {source_type!r}")
    require_parser()
    require_defusedxml()
    from pinakes.extract.isolation import Limits, run_isolated

    size = checked_size(path, MAX_ODT_BYTES, "ODT")
    return run_isolated(extract_in_process, path, limits=Limits.for_input(size), what="the ODT reader",
                        path=path, remedy=REMEDY)


def extract_in_process(path: Path) -> ExtractedText:
    checked_size(path, MAX_ODT_BYTES, "ODT")
    with Container(path, "ODT", REMEDY) as container, nesting_refused(path, REMEDY):
        _check_kind(container)
        root = container.xml("content.xml")
        reader = _Reader([root, *_styles(container)])
        text = reader.write(root)
    return ExtractedText(text=text, pages=None, backend=BACKEND, fingerprint=EXTRACTORS[BACKEND].fingerprint())


def declared(path: Path) -> tuple[str | None, tuple[str, ...]]:
    """`meta.xml`'s title and authors."""
    with Container(path, "ODT", REMEDY) as container:
        if not container.has("meta.xml"):
            return None, ()
        meta = container.xml("meta.xml", 1024 * 1024)
    title = next((" ".join((node.text or "").split()) for node in meta.iter(f"{DC}title")), "")
    creators = [" ".join((node.text or "").split()) for tag in (f"{META}initial-creator", f"{DC}creator")
                for node in meta.iter(tag)]
    return title or None, tuple(dict.fromkeys(creator for creator in creators if creator))


def _styles(container: Container) -> list[Element]:
    """`styles.xml`, which only tells code styles and list numbering apart: a document whose styles
    part is damaged (some writers repeat a namespace declaration) is still read, as plain paragraphs."""
    if not container.has("styles.xml"):
        return []
    try:
        return [container.xml("styles.xml")]
    except SourceError as exc:
        if "declares XML entities" in exc.message:
            raise  # hostile, not damaged: the document is refused
        return []


def _check_kind(container: Container) -> None:
    if container.has("mimetype"):
        kind = container.read("mimetype", 256).decode("ascii", errors="replace").strip()
        if kind != MIMETYPE:
            raise container.refused(f"it is not an ODT text document (its mimetype is {kind[:80]!r})")
    container.require("content.xml", "OpenDocument text")


class _Reader:
    def __init__(self, style_roots: list[Element]) -> None:
        self.writer = BlockWriter()
        self.code: list[str] = []
        self.parents: dict[str, str] = {}
        self.display: dict[str, str] = {}
        self.numbered: dict[str, dict[int, bool]] = {}
        for root in style_roots:
            self._read_styles(root)

    def write(self, root: Element) -> str:
        body = root.find(f"{OFFICE}body")
        text = body.find(f"{OFFICE}text") if body is not None else None
        if text is not None:
            self.blocks(text, list_depth=-1, list_style=None)
        self.end_code()
        return self.writer.text()

    def blocks(self, parent: Element, *, list_depth: int, list_style: str | None,
               counters: list[int] | None = None) -> None:
        # Iterative over siblings; lists and sections recurse by nesting level, which ODF bounds in
        # practice and the isolation child's limits bound in any case.
        for child in parent:
            name = local(child.tag)
            if name in _SKIPPED:
                continue
            if child.tag == f"{TEXT}h":
                self.end_code()
                level = _int(child.get(f"{TEXT}outline-level")) or 1
                self.emit(child, heading=level)
            elif child.tag == f"{TEXT}p":
                self.emit(child)
            elif child.tag == f"{TEXT}list":
                self.end_code()
                style = child.get(f"{TEXT}style-name") or list_style
                self.list(child, list_depth + 1, style)
            elif child.tag == f"{TABLE}table":
                self.end_code()
                self.table(child)
            else:  # text:section, table:table-header-rows and other containers
                self.blocks(child, list_depth=list_depth, list_style=list_style)

    def list(self, element: Element, depth: int, style: str | None) -> None:
        numbered = self.numbered.get(style or "", {}).get(depth + 1, False)
        number = 0
        for item in element:
            if local(item.tag) not in ("list-item", "list-header"):
                continue
            number += 1
            marker = f"{number}." if numbered else "-"
            first = True
            for child in item:
                if child.tag in (f"{TEXT}p", f"{TEXT}h") and first:
                    text, notes, boxes = self.inline(child)
                    self.writer.item(depth, marker, text)
                    self.after(notes, boxes)
                    first = False
                elif child.tag == f"{TEXT}list":
                    self.list(child, depth + 1, child.get(f"{TEXT}style-name") or style)
                elif child.tag in (f"{TEXT}p", f"{TEXT}h"):
                    text, notes, boxes = self.inline(child)
                    self.writer.paragraph(text, indent=depth + 1)
                    self.after(notes, boxes)

    def emit(self, paragraph: Element, *, heading: int | None = None) -> None:
        text, notes, boxes = self.inline(paragraph)
        style = paragraph.get(f"{TEXT}style-name") or ""
        if heading is None and self.is_code(style):
            self.code.append(text)
            return
        self.end_code()
        if heading is not None:
            self.writer.heading(heading, text)
        else:
            self.writer.paragraph(text)
        self.after(notes, boxes)

    def after(self, notes: list[tuple[str, Element]], boxes: list[Element]) -> None:
        for box in boxes:
            self.blocks(box, list_depth=-1, list_style=None)
        for marker, body in notes:
            parts = [self.inline(paragraph)[0] for paragraph in body.iter() if paragraph.tag in (f"{TEXT}p", f"{TEXT}h")]
            self.writer.paragraph(f"[^{marker}]: " + " ".join(parts))

    def table(self, table: Element) -> None:
        first = True
        for row in table.iter(f"{TABLE}table-row"):
            cells: list[str] = []
            for cell in row:
                if local(cell.tag) not in ("table-cell", "covered-table-cell"):
                    continue
                cells.append(" ".join(self.inline(paragraph)[0] for paragraph in cell.iter()
                                      if paragraph.tag in (f"{TEXT}p", f"{TEXT}h")))
            if cells:
                self.writer.row(cells, first=first)
                first = False
        self.writer.end_table()

    def inline(self, element: Element) -> tuple[str, list[tuple[str, Element]], list[Element]]:
        """A paragraph's text, its notes (marker, body) and its text boxes, in document order."""
        parts: list[str] = [_spaced(element.text)]
        notes: list[tuple[str, Element]] = []
        boxes: list[Element] = []
        # (node, whether its tail is due): children first, each followed by its tail
        stack: list[tuple[Element, bool]] = [(child, False) for child in reversed(list(element))]
        while stack:
            node, tail_due = stack.pop()
            if tail_due:
                parts.append(_spaced(node.tail))
                continue
            stack.append((node, True))
            name = local(node.tag)
            if name in _SKIPPED:
                continue
            if node.tag == f"{TEXT}s":
                parts.append(" " * (_int(node.get(f"{TEXT}c")) or 1))
            elif node.tag == f"{TEXT}tab":
                parts.append("\t")
            elif node.tag == f"{TEXT}line-break":
                parts.append("\n")
            elif node.tag == f"{TEXT}note":
                citation = node.find(f"{TEXT}note-citation")
                marker = (citation.text or "").strip() if citation is not None else ""
                marker = marker or node.get(f"{TEXT}id") or "*"
                if node.get(f"{TEXT}note-class") == "endnote":
                    marker = f"e{marker}"
                parts.append(f"[^{marker}]")
                body = node.find(f"{TEXT}note-body")
                if body is not None:
                    notes.append((marker, body))
            elif name == "text-box":
                boxes.append(node)
            else:
                parts.append(_spaced(node.text))
                stack.extend((child, False) for child in reversed(list(node)))
        return "".join(parts), notes, boxes

    def is_code(self, style: str) -> bool:
        seen: set[str] = set()
        while style and style not in seen:
            seen.add(style)
            shown = (self.display.get(style) or style).lower().replace("_20_", " ")
            if any(word in shown for word in _CODE_STYLE_WORDS):
                return True
            style = self.parents.get(style, "")
        return False

    def end_code(self) -> None:
        if self.code:
            self.writer.code("\n".join(self.code))
            self.code = []

    def _read_styles(self, root: Element) -> None:
        for style in root.iter(f"{STYLE}style"):
            name = style.get(f"{STYLE}name") or ""
            parent = style.get(f"{STYLE}parent-style-name")
            if parent:
                self.parents[name] = parent
            shown = style.get(f"{STYLE}display-name")
            if shown:
                self.display[name] = shown
        for list_style in root.iter(f"{TEXT}list-style"):
            levels: dict[int, bool] = {}
            for level in list_style:
                index = _int(level.get(f"{TEXT}level"))
                if index is not None:
                    levels[index] = local(level.tag) == "list-level-style-number" and bool(
                        level.get(f"{STYLE}num-format"))
            self.numbered[list_style.get(f"{STYLE}name") or ""] = levels


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _spaced(text: str | None) -> str:
    """Character content as ODF reads it: a line break in the XML is a space (`text:line-break` is the break)."""
    return (text or "").replace("\r", " ").replace("\n", " ")
