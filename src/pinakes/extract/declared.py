"""What a file of the document formats declares about itself: its title and authors (HTML's `<title>`,
an EPUB's package metadata, a DOCX's core properties, an ODT's `meta.xml`).

The document's context reads them (`front_matter.document_front_matter`, `titles.document_title`),
as it reads a Markdown note's front matter: never part of a chunk, so citations are unchanged. They
are read from the file, in the isolation child (a hostile container fails there, and a failure is
no title, never a failed sync), and remembered per file version, since the chunk and the embed step
both ask. What is read here is in the format's extractor fingerprint (`registry.py`): a change to it
re-extracts, and so re-reads, those documents.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

Declared = tuple[str | None, tuple[str, ...]]
NOTHING: Declared = (None, ())


def declared_metadata(path: Path, source_type: str) -> Declared:
    """(title, authors) the file at `path` declares; nothing when it declares none or cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return NOTHING
    return _remembered(str(path), source_type, info.st_size, info.st_mtime_ns)


@lru_cache(maxsize=256)
def _remembered(path: str, source_type: str, size: int, mtime_ns: int) -> Declared:
    import importlib.util

    from pinakes.errors import PinakesError
    from pinakes.extract.isolation import Limits, run_isolated

    if importlib.util.find_spec("selectolax") is None or importlib.util.find_spec("defusedxml") is None:
        return NOTHING
    try:
        return run_isolated(read_declared, Path(path), source_type, limits=Limits.for_input(size),
                            what="the metadata reader", path=path)
    except (OSError, PinakesError):
        return NOTHING


def read_declared(path: Path, source_type: str) -> Declared:
    """The reading itself (what the isolation child runs)."""
    if source_type == "html":
        from pinakes.extract.html import declared_title

        return declared_title(path), ()
    if source_type == "epub":
        from pinakes.extract.epub import declared
    elif source_type == "docx":
        from pinakes.extract.docx import declared
    elif source_type == "odt":
        from pinakes.extract.odt import declared
    else:
        return NOTHING
    return declared(path)
