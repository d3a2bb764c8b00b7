"""The text extractor: markdown, text and code files are their own indexed text.

Decoding is strict UTF-8 and nothing else is changed, so chunk offsets address the file exactly:
line endings are kept as they are (a CRLF file stays CRLF). The one exception is a UTF-8 byte
order mark, which is dropped: it is an encoding marker, not content, and keeping it would put an
invisible character at the start of the first chunk. Offset 0 is therefore the character after
the BOM, and a citation's character span counts from there.

Refusals are `SourceError`s naming the file: undecodable bytes (with their byte offset), a binary
file carrying a text extension, and a file over `MAX_SOURCE_BYTES` (checked before reading).
"""

from __future__ import annotations

import os
from pathlib import Path

from pinakes.errors import SourceError
from pinakes.extract.registry import EXTRACTORS
from pinakes.extract.types import ExtractedText

BACKEND = "text"
TEXT_SOURCE_TYPES = EXTRACTORS[BACKEND].source_types
# A larger "text" file is almost always a log, a dump or data: refused rather than chunked into
# thousands of passages nobody meant to index.
MAX_SOURCE_BYTES = 50 * 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"

# Signatures of formats that are never text, checked on the first bytes. NUL bytes catch most
# other binaries; these catch the ones whose first kilobytes happen to be NUL-free.
_BINARY_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"PK\x05\x06", "ZIP archive"),
    (b"\x1f\x8b", "gzip archive"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\x7fELF", "ELF executable"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
    (b"\xfd7zXZ\x00", "xz archive"),
    (b"BZh", "bzip2 archive"),
    (b"\x00asm", "WebAssembly module"),
)
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def fingerprint() -> str:
    """The text extractor's fingerprint, from its declared constants (see registry.py)."""
    return EXTRACTORS[BACKEND].fingerprint()


def extract(path: Path, source_type: str) -> ExtractedText:
    """Read `path` (a markdown, text or code source) and return its indexed text."""
    if source_type not in TEXT_SOURCE_TYPES:
        raise ValueError(
            f"the text extractor handles {', '.join(TEXT_SOURCE_TYPES)}, not {source_type!r}"
        )
    data = read_source_bytes(path)
    return ExtractedText(text=decode_source(data, path), pages=None, backend=BACKEND,
                         fingerprint=fingerprint())


def read_source_bytes(path: Path, max_bytes: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of `path`, refusing a file over `max_bytes` before reading it."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise _too_large(path, size, max_bytes)
            # Read one byte past the cap so a file that grew since fstat is still refused.
            data = handle.read(max_bytes + 1)
    except OSError as exc:
        raise SourceError(f"cannot read the file: {exc.strerror or exc}", path=path) from exc
    if len(data) > max_bytes:
        raise _too_large(path, len(data), max_bytes)
    return data


def decode_source(data: bytes, path: Path) -> str:
    """Strict UTF-8 decode of a text source, refusing binaries; a leading UTF-8 BOM is dropped."""
    _refuse_binary(data, path)
    if data.startswith(UTF8_BOM):
        data = data[len(UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start:exc.end].hex(" ")
        raise SourceError(
            f"not valid UTF-8 at byte offset {exc.start} (line {line}): {exc.reason} "
            f"(bytes {bad}); not indexed",
            remedy="re-save the file as UTF-8, or exclude it in [sources]",
            path=path,
        ) from exc


def _refuse_binary(data: bytes, path: Path) -> None:
    sniff_bytes = int(EXTRACTORS[BACKEND].constants["binary_sniff_bytes"])
    head = data[:sniff_bytes]
    if head.startswith(_UTF16_BOMS):
        raise SourceError(
            "UTF-16 encoded; only UTF-8 sources are indexed",
            remedy="re-save the file as UTF-8, or exclude it in [sources]",
            path=path,
        )
    kind = next((name for magic, name in _BINARY_MAGIC if head.startswith(magic)), None)
    if kind is None and b"\x00" in head:
        kind = f"NUL bytes in the first {sniff_bytes} bytes"
    if kind is not None:
        raise SourceError(
            f"binary file with a text extension, not indexed ({kind})",
            remedy="rename it to its real extension, or exclude it in [sources]",
            path=path,
        )


def _too_large(path: Path, size: int, max_bytes: int) -> SourceError:
    return SourceError(
        f"the file is {size:,} bytes, over the {max_bytes:,}-byte limit for a text source; not indexed",
        remedy="split it into smaller documents, or exclude it in [sources]",
        path=path,
    )
