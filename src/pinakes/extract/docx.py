"""The DOCX extractor (Word 2007 and later; the `[formats]` extra): the body's text with its structure,
written as Markdown (`blocks.py`), read from the WordprocessingML parts themselves (`archives.py`:
zip and XML limits, entities refused) in the isolation child.

What is read, in reading order:

- **headings** from paragraph styles: a style named `heading N` (Word's built-in names are English
  whatever the interface language) or with an outline level, followed through `basedOn`; `Title` is
  a level-1 heading;
- **lists**: a paragraph with numbering (its own or its style's) is an item at its level, `1.`-style
  where the level's format is a number, `-` where it is a bullet;
- **tables**: one line per row, cells in order (a nested table's text inside its cell; a merged
  cell's continuation empty);
- **code**: consecutive paragraphs in a code style (`Source Code`, `HTML Preformatted`, `Plain Text`,
  any style whose name says code) as one fenced block, kept verbatim;
- **footnotes and endnotes**: a reference is written `[^N]` where it stands, and the note's text
  `[^N]: …` right after the paragraph that cites it, so a note is chunked with the text it explains;
- **text boxes** (DrawingML and VML): after the paragraph they are anchored in; of Word's two copies
  of one box (`mc:Choice` and its `mc:Fallback`), the first only;
- **tracked changes are accepted**: insertions and moves read as the text they leave, deletions
  (`w:del`, `w:moveFrom`) left out; **comments are left out** (annotations about the text, not the
  text); headers, footers and field codes are left out too (page furniture and instructions).

A zip that lacks `word/document.xml` is refused as "not a DOCX". The title and authors are the core
properties' `dc:title` and `dc:creator` (`declared`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.extract.archives import Container, local, nesting_refused, require_defusedxml
from pinakes.extract.blocks import BlockWriter
from pinakes.extract.file_size import checked_size
from pinakes.extract.html import require_parser
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

BACKEND = "docx"
MAX_DOCX_BYTES = 256 * 1024 * 1024
W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
DC = "{http://purl.org/dc/elements/1.1/}"
MAIN_PART = "word/document.xml"
REMEDY = ("if it opens in a word processor, save it again as .docx and run `pnk sync`; otherwise exclude it "
          "in [sources]")
_CODE_STYLE_WORDS = ("code", "preformatted", "plain text", "verbatim")
_SKIPPED = frozenset({"del", "moveFrom", "instrText", "delText", "commentReference", "commentRangeStart",
                      "commentRangeEnd", "rPr", "pPr", "bookmarkStart", "bookmarkEnd", "proofErr",
                      "lastRenderedPageBreak", "fldChar", "delInstrText"})


def extract(path: Path, source_type: str = "docx") -> ExtractedText:
    if source_type != "docx":
        raise ValueError(f"the {BACKEND} extractor handles docx, not {source_type!r}")
    require_parser()
    require_defusedxml()
    from pinakes.extract.isolation import Limits, run_isolated

    size = checked_size(path, MAX_DOCX_BYTES, "DOCX")
    return run_isolated(extract_in_process, path, limits=Limits.for_input(size), what="the DOCX reader",
                        path=path, remedy=REMEDY)


def extract_in_process(path: Path) -> ExtractedText:
    checked_size(path, MAX_DOCX_BYTES, "DOCX")
    with Container(path, "DOCX", REMEDY) as container, nesting_refused(path, REMEDY):
        container.require(MAIN_PART, "Word document")
        reader = _Reader(container)
        text = reader.write()
    return ExtractedText(text=text, pages=None, backend=BACKEND, fingerprint=EXTRACTORS[BACKEND].fingerprint())


def declared(path: Path) -> tuple[str | None, tuple[str, ...]]:
    """The core properties' title and authors."""
    with Container(path, "DOCX", REMEDY) as container:
        if not container.has("docProps/core.xml"):
            return None, ()
        core = container.xml("docProps/core.xml", 1024 * 1024)
    title = core.find(f"{DC}title")
    creators = tuple(" ".join((node.text or "").split()) for node in core.iter(f"{DC}creator"))
    return (" ".join((title.text or "").split()) or None if title is not None else None,
            tuple(creator for creator in creators if creator))


@dataclass
class _Style:
    name: str = ""
    level: int | None = None  # heading level
    based_on: str | None = None
    numbering: tuple[str, int] | None = None  # (numId, ilvl)


@dataclass
class _Paragraph:
    text: list[str] = field(default_factory=list[str])
    notes: list[tuple[str, Element]] = field(default_factory=list[tuple[str, "Element"]])  # (marker, note body)
    boxes: list[Element] = field(default_factory=list["Element"])  # w:txbxContent, in order


class _Reader:
    def __init__(self, container: Container) -> None:
        self.container = container
        self.styles = self._styles()
        self.formats = self._numbering()
        self.notes = {kind: self._notes(kind) for kind in ("footnote", "endnote")}
        self.counters: dict[tuple[str, int], int] = {}
        self.writer = BlockWriter()
        self.code: list[str] = []

    def write(self) -> str:
        body = self.container.xml(MAIN_PART).find(f"{W}body")
        if body is not None:
            self.blocks(body)
        self.end_code()
        return self.writer.text()

    # -- the body, block by block ----------------------------------------------------------------

    def blocks(self, parent: Element) -> None:
        for child in _content(parent):
            name = local(child.tag)
            if name == "p":
                self.paragraph(child)
            elif name == "tbl":
                self.end_code()
                self.table(child)

    def paragraph(self, element: Element) -> None:
        style_id, numbering = self.paragraph_style(element)
        style = self.resolved(style_id)
        collected = _Paragraph()
        self.inline(element, collected)
        text = "".join(collected.text)
        if style.name and any(word in style.name.lower() for word in _CODE_STYLE_WORDS) and style.level is None:
            self.code.append(text)
        else:
            self.end_code()
            numbering = numbering or style.numbering
            if style.level is not None:
                self.writer.heading(style.level, text)
            elif numbering is not None and numbering[0] != "0" and text.strip():
                self.writer.item(numbering[1], self.marker(numbering), text)
            else:
                self.writer.paragraph(text)
        for box in collected.boxes:
            self.blocks(box)
        for marker, note in collected.notes:
            note_text = _Paragraph()
            for note_paragraph in note.iter(f"{W}p"):
                self.inline(note_paragraph, note_text)
                note_text.text.append(" ")
            self.writer.paragraph(f"[^{marker}]: " + "".join(note_text.text))

    def table(self, table: Element) -> None:
        first = True
        for row in (child for child in _content(table) if local(child.tag) == "tr"):
            cells: list[str] = []
            for cell in (child for child in _content(row) if local(child.tag) == "tc"):
                collected = _Paragraph()
                for paragraph in cell.iter(f"{W}p"):
                    self.inline(paragraph, collected)
                    collected.text.append(" ")
                cells.append("".join(collected.text))
            if cells:
                self.writer.row(cells, first=first)
                first = False
        self.writer.end_table()

    def end_code(self) -> None:
        if self.code:
            self.writer.code("\n".join(self.code))
            self.code = []

    # -- inside a paragraph ----------------------------------------------------------------------

    def inline(self, element: Element, into: _Paragraph) -> None:
        """The paragraph's text in document order (iteratively: a hostile file may nest deeply)."""
        stack: list[Element] = list(reversed(list(element)))
        while stack:
            node = stack.pop()
            name = local(node.tag)
            if name in _SKIPPED or node.tag == f"{MC}Fallback":
                continue
            if name == "t":
                into.text.append((node.text or "").replace("\n", " "))
            elif name == "tab":
                into.text.append("\t")
            elif name in ("br", "cr"):
                into.text.append("\n")
            elif name == "noBreakHyphen":
                into.text.append("-")
            elif name in ("footnoteReference", "endnoteReference"):
                kind = "footnote" if name == "footnoteReference" else "endnote"
                note_id = node.get(f"{W}id") or ""
                marker = note_id if kind == "footnote" else f"e{note_id}"
                into.text.append(f"[^{marker}]")
                note = self.notes[kind].get(note_id)
                if note is not None:
                    into.notes.append((marker, note))
            elif name == "txbxContent":
                into.boxes.append(node)
            else:
                stack.extend(reversed(list(node)))

    # -- styles and numbering --------------------------------------------------------------------

    def paragraph_style(self, paragraph: Element) -> tuple[str | None, tuple[str, int] | None]:
        properties = paragraph.find(f"{W}pPr")
        if properties is None:
            return None, None
        style = properties.find(f"{W}pStyle")
        outline = properties.find(f"{W}outlineLvl")
        numbering = _numbering_of(properties)
        style_id = style.get(f"{W}val") if style is not None else None
        if outline is not None and style_id is None:
            level = _int(outline.get(f"{W}val"))
            if level is not None and level < 9:
                self.styles.setdefault("\0outline", _Style(name="outline", level=level + 1))
                return "\0outline", numbering
        return style_id, numbering

    def resolved(self, style_id: str | None) -> _Style:
        """The style with its heading level and numbering inherited through `basedOn`."""
        resolved = _Style()
        seen: set[str] = set()
        current = style_id
        while current is not None and current not in seen and current in self.styles:
            seen.add(current)
            style = self.styles[current]
            resolved.name = resolved.name or style.name
            if resolved.level is None:
                resolved.level = style.level
            if resolved.numbering is None:
                resolved.numbering = style.numbering
            current = style.based_on
        return resolved

    def marker(self, numbering: tuple[str, int]) -> str:
        num_id, level = numbering
        if not self.formats.get((num_id, level), False):
            return "-"
        number = self.counters.get((num_id, level), 0) + 1
        self.counters[(num_id, level)] = number
        for deeper in [key for key in self.counters if key[0] == num_id and key[1] > level]:
            del self.counters[deeper]  # a sub-list starts again under each item
        return f"{number}."

    def _styles(self) -> dict[str, _Style]:
        if not self.container.has("word/styles.xml"):
            return {}
        styles: dict[str, _Style] = {}
        for element in self.container.xml("word/styles.xml").iter(f"{W}style"):
            style_id = element.get(f"{W}styleId")
            if style_id is None:
                continue
            name_node = element.find(f"{W}name")
            name = (name_node.get(f"{W}val") or "") if name_node is not None else ""
            based = element.find(f"{W}basedOn")
            properties = element.find(f"{W}pPr")
            level: int | None = None
            lowered = name.lower()
            if lowered.startswith("heading ") and _int(lowered[8:]) is not None:
                level = _int(lowered[8:])
            elif lowered == "title":
                level = 1
            elif properties is not None and (outline := properties.find(f"{W}outlineLvl")) is not None:
                value = _int(outline.get(f"{W}val"))
                level = value + 1 if value is not None and value < 9 else None
            styles[style_id] = _Style(name=name, level=level,
                                      based_on=based.get(f"{W}val") if based is not None else None,
                                      numbering=_numbering_of(properties) if properties is not None else None)
        return styles

    def _numbering(self) -> dict[tuple[str, int], bool]:
        """(numId, level) -> whether that level is numbered (else a bullet)."""
        if not self.container.has("word/numbering.xml"):
            return {}
        root = self.container.xml("word/numbering.xml")
        abstract: dict[str, dict[int, bool]] = {}
        for definition in root.iter(f"{W}abstractNum"):
            levels: dict[int, bool] = {}
            for level in definition.iter(f"{W}lvl"):
                index = _int(level.get(f"{W}ilvl"))
                fmt = level.find(f"{W}numFmt")
                value = (fmt.get(f"{W}val") or "") if fmt is not None else ""
                if index is not None:
                    levels[index] = value not in ("bullet", "none", "")
            abstract[definition.get(f"{W}abstractNumId") or ""] = levels
        formats: dict[tuple[str, int], bool] = {}
        for num in root.iter(f"{W}num"):
            reference = num.find(f"{W}abstractNumId")
            levels = abstract.get((reference.get(f"{W}val") or "") if reference is not None else "", {})
            for index, numbered in levels.items():
                formats[(num.get(f"{W}numId") or "", index)] = numbered
        return formats

    def _notes(self, kind: str) -> dict[str, Element]:
        part = f"word/{kind}s.xml"
        if not self.container.has(part):
            return {}
        return {note.get(f"{W}id") or "": note for note in self.container.xml(part).iter(f"{W}{kind}")}


def _content(parent: Element) -> Iterator[Element]:
    """Block-level children, looking through content controls, custom XML, tracked insertions and
    Word's alternate-content wrappers (the first choice only)."""
    stack: list[Element] = list(reversed(list(parent)))
    while stack:
        node = stack.pop()
        name = local(node.tag)
        if name in ("sdt", "sdtContent", "customXml", "ins", "moveTo", "smartTag", "AlternateContent", "Choice"):
            if node.tag == f"{MC}AlternateContent":
                choice = node.find(f"{MC}Choice")
                stack.extend(reversed(list(choice)) if choice is not None else ())
            else:
                stack.extend(reversed(list(node)))
        elif name in ("del", "moveFrom", "sdtPr", "sdtEndPr", "Fallback"):
            continue
        else:
            yield node


def _numbering_of(properties: Element) -> tuple[str, int] | None:
    numbering = properties.find(f"{W}numPr")
    if numbering is None:
        return None
    num_id = numbering.find(f"{W}numId")
    level = numbering.find(f"{W}ilvl")
    if num_id is None:
        return None
    return num_id.get(f"{W}val") or "0", _int(level.get(f"{W}val") if level is not None else "0") or 0


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
