"""The EPUB extractor (EPUB 2 and 3; the `[formats]` extra): the book's chapters in spine order, each
through the HTML walk (`html_text.py`, as a book chapter: no site chrome to remove), written as
Markdown (`blocks.py`), in the isolation child; the container read under `archives.py`'s limits.

- `META-INF/container.xml` names the package document (OPF); its manifest and spine give the
  chapters in reading order. The navigation document (EPUB 3 `properties="nav"`) is a table of
  contents and is not read as text; a spine item that is not XHTML (an image) is skipped.
- **Each chapter's title is in the heading trail**: its title in the table of contents (the EPUB 3
  navigation document, else the EPUB 2 NCX) is the chapter's level-1 heading. A chapter that opens
  with a level-1 heading keeps it; one that opens with a lower heading of the same words has it
  raised to level 1; otherwise the title is written as a level-1 heading before the chapter's text.
  (That line is the only text not in the book's own files; chunks and citations address the
  extracted text, as for every extracted format.)
- **The book's title and authors** (`dc:title`, `dc:creator`) are its declared title and context
  (`declared`), never part of a chunk.

A zip without `META-INF/container.xml`, or whose package names no readable chapter, is refused as
"not an EPUB". DRM-encrypted books (`META-INF/encryption.xml` over the chapters) are refused saying so.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from pinakes.errors import SourceError
from pinakes.extract.archives import Container, local, nesting_refused, require_defusedxml
from pinakes.extract.blocks import BlockWriter
from pinakes.extract.file_size import checked_size
from pinakes.extract.html import require_parser
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

BACKEND = "epub"
MAX_EPUB_BYTES = 512 * 1024 * 1024
CONTAINER = "META-INF/container.xml"
OPF = "{http://www.idpf.org/2007/opf}"
DC = "{http://purl.org/dc/elements/1.1/}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
XHTML = "{http://www.w3.org/1999/xhtml}"
CHAPTER_TYPES = ("application/xhtml+xml", "text/html", "application/x-dtbook+xml")
REMEDY = ("if the book opens in a reader, export it again as EPUB (without DRM) and run `pnk sync`; "
          "otherwise exclude it in [sources]")


def extract(path: Path, source_type: str = "epub") -> ExtractedText:
    if source_type != "epub":
        raise ValueError(f"the {BACKEND} extractor handles epub, not {source_type!r}")
    require_parser()
    require_defusedxml()
    from pinakes.extract.isolation import Limits, run_isolated

    size = checked_size(path, MAX_EPUB_BYTES, "EPUB")
    return run_isolated(extract_in_process, path, limits=Limits.for_input(size), what="the EPUB reader",
                        path=path, remedy=REMEDY)


def extract_in_process(path: Path) -> ExtractedText:
    from pinakes.extract.html import write_html

    checked_size(path, MAX_EPUB_BYTES, "EPUB")
    writer = BlockWriter()
    with Container(path, "EPUB", REMEDY) as container, nesting_refused(path, REMEDY):
        package = _Package.read(container)
        for href, title in package.chapters():
            chapter = BlockWriter()
            write_html(container.read(href), chapter, path=path, site=False)
            _append_chapter(writer, chapter, title)
    text = writer.text()
    if not text.strip():
        raise SourceError("the book has no text in its chapters (images only?); not indexed", remedy=REMEDY, path=path)
    return ExtractedText(text=text, pages=None, backend=BACKEND, fingerprint=EXTRACTORS[BACKEND].fingerprint())


def declared(path: Path) -> tuple[str | None, tuple[str, ...]]:
    """The book's title and authors, from its package document."""
    with Container(path, "EPUB", REMEDY) as container:
        package = _Package.read(container, chapters=False)
    title = next((" ".join((node.text or "").split()) for node in package.opf.iter(f"{DC}title")), "")
    creators = [" ".join((node.text or "").split()) for node in package.opf.iter(f"{DC}creator")]
    return title or None, tuple(dict.fromkeys(creator for creator in creators if creator))


def _append_chapter(writer: BlockWriter, chapter: BlockWriter, title: str | None) -> None:
    """`chapter`'s blocks into `writer` under its level-1 title (see the module docstring)."""
    blocks = chapter.blocks()
    if not blocks:
        return
    first = blocks[0]
    level = len(first) - len(first.lstrip("#")) if first.startswith("#") else 0
    heading = first[level:].strip() if level else ""
    if title and level != 1:
        if level and " ".join(heading.split()).casefold() == " ".join(title.split()).casefold():
            blocks[0] = "# " + heading
        else:
            writer.heading(1, title)
    writer.extend(blocks)


class _Package:
    def __init__(self, container: Container, opf_path: str, opf: Element) -> None:
        self.container = container
        self.opf_path = opf_path
        self.opf = opf
        self.base = posixpath.dirname(opf_path)
        self.items: dict[str, tuple[str, str, str]] = {}  # id -> (zip path, media type, properties)
        manifest = opf.find(f"{OPF}manifest")
        for item in manifest.iter(f"{OPF}item") if manifest is not None else ():
            href = item.get("href")
            if item.get("id") and href:
                self.items[item.get("id") or ""] = (self.resolve(self.base, href), item.get("media-type") or "",
                                                    item.get("properties") or "")

    @classmethod
    def read(cls, container: Container, *, chapters: bool = True) -> _Package:
        container.require(CONTAINER, "EPUB book")
        rootfile = next((node for node in container.xml(CONTAINER, 1024 * 1024).iter()
                         if local(node.tag) == "rootfile" and node.get("full-path")), None)
        if rootfile is None:
            raise container.refused("its META-INF/container.xml names no package document; not an EPUB")
        opf_path = rootfile.get("full-path") or ""
        if not container.has(opf_path):
            raise container.refused(f"its package document {opf_path} is missing; not an EPUB")
        package = cls(container, opf_path, container.xml(opf_path, 16 * 1024 * 1024))
        if chapters and container.has("META-INF/encryption.xml"):
            encrypted = {node.get("URI") for node in container.xml("META-INF/encryption.xml").iter()
                         if local(node.tag) == "CipherReference"}
            if any(path in encrypted for path, _, _ in package.items.values()):
                raise container.refused("the book is encrypted (DRM)")
        return package

    def chapters(self) -> list[tuple[str, str | None]]:
        """(zip path, table-of-contents title) of each XHTML spine item, in reading order."""
        spine = self.opf.find(f"{OPF}spine")
        if spine is None:
            raise self.container.refused("its package document has no spine (reading order); not an EPUB")
        titles = self._toc_titles(spine)
        chapters: list[tuple[str, str | None]] = []
        for reference in spine.iter(f"{OPF}itemref"):
            item = self.items.get(reference.get("idref") or "")
            if item is None:
                continue
            href, media_type, properties = item
            if media_type not in CHAPTER_TYPES or "nav" in properties.split() or not self.container.has(href):
                continue
            chapters.append((href, titles.get(href)))
        if not chapters:
            raise self.container.refused("its spine names no readable chapter; not indexed")
        return chapters

    def _toc_titles(self, spine: Element) -> dict[str, str]:
        """Chapter file -> its first title in the table of contents (EPUB 3 nav, else EPUB 2 NCX)."""
        titles: dict[str, str] = {}
        nav = next((href for href, _, properties in self.items.values() if "nav" in properties.split()), None)
        if nav is not None and self.container.has(nav):
            from selectolax.lexbor import LexborHTMLParser

            tree = LexborHTMLParser(self.container.read(nav, 16 * 1024 * 1024).decode("utf-8", errors="replace"))
            toc = next((node for node in tree.css("nav") if "toc" in (node.attributes.get("epub:type") or "")),
                       tree.css_first("nav"))
            for link in toc.css("a[href]") if toc is not None else ():
                href = self.resolve(posixpath.dirname(nav), link.attributes.get("href") or "")
                label = " ".join(link.text(deep=True).split())
                if label:
                    titles.setdefault(href, label)
        ncx_id = spine.get("toc")
        ncx = self.items.get(ncx_id or "")
        if not titles and ncx is not None and self.container.has(ncx[0]):
            root = self.container.xml(ncx[0], 16 * 1024 * 1024)
            for point in root.iter(f"{NCX}navPoint"):
                label = point.find(f"{NCX}navLabel/{NCX}text")
                content = point.find(f"{NCX}content")
                if label is not None and content is not None and label.text:
                    href = self.resolve(posixpath.dirname(ncx[0]), content.get("src") or "")
                    titles.setdefault(href, " ".join(label.text.split()))
        return titles

    @staticmethod
    def resolve(base: str, href: str) -> str:
        """A zip path from an href relative to `base`, its fragment and percent-escapes resolved."""
        target = unquote(href.split("#", 1)[0])
        return posixpath.normpath(posixpath.join(base, target)) if target else ""
