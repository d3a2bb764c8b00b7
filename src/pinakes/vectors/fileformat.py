"""The vector file, `.pinakes/vectors.ann`: one file, written whole and swapped in by rename.

Layout, front to back:

    payload   the approximate index as its library saves it (usearch: HNSW graph + int8 vectors),
              at offset 0, so it can be memory-mapped where it lies
    ids       the chunk id (int64) of every row, ascending, 8-byte aligned
    checksums each row's 64-bit `embeddings.checksum` (uint64), same order: what an update diffs
    footer    the last FOOTER_BYTES: MAGIC, xxh3-64 of the JSON, its length (u32 LE), the JSON
              (`Header`), zero padding

The footer is read first and checked by its own checksum; `body_xxh3_128` covers every byte before
it (payload, ids, checksums). A file that fails either, or whose sizes disagree with its footer, is
damaged: search answers exactly instead and the next sync rebuilds it. A footer at the end (not a
header at the front) is what lets the library save its payload straight to the temp file.

The file is derived and disposable, like the index beside it: deleting it costs a rebuild, never
data. Nothing in it is read without the checks above passing first.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import xxhash

if TYPE_CHECKING:  # numpy only where rows are written or read: reading a footer (a no-op sync) needs none
    import numpy as np
    from numpy.typing import NDArray

from pinakes.atomic import atomic_write_file
from pinakes.faults import faultpoint

FILE_NAME = "vectors.ann"
MAGIC = b"PNKVANN1"
FORMAT_VERSION = 1
FOOTER_BYTES = 4096
_PREFIX = struct.Struct("<8s8sI")  # magic, xxh3-64 of the JSON, JSON length
_READ_BYTES = 8 << 20


class VectorFileUnusable(Exception):
    """The vector file cannot answer for the index: `reason` is one of missing, damaged, stale,
    unavailable (the library is not installed). Never shown as an error: search falls back."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class Header:
    """The footer's JSON: what the file holds and what it was built from."""

    library: str  # "usearch <version>"
    dim: int
    rows: int
    content_key: str  # source.content_key of the rows it was built from
    params: Mapping[str, object]
    identity: Mapping[str, str]  # the embedding model's meta (embed/base.py identity_meta)
    payload_bytes: int = 0
    ids_offset: int = 0
    body_xxh3_128: str = ""
    format_version: int = FORMAT_VERSION
    extra: Mapping[str, object] = field(default_factory=lambda: {})

    @property
    def footer_offset(self) -> int:
        return self.ids_offset + 16 * self.rows

    @property
    def file_bytes(self) -> int:
        return self.footer_offset + FOOTER_BYTES


def vector_file_path(pinakes_dir: Path) -> Path:
    return pinakes_dir / FILE_NAME


def write_vector_file(path: Path, header: Header, save_payload: Callable[[Path], object],
                      chunk_ids: NDArray[np.int64], checksums: NDArray[np.uint64]) -> Header:
    """Write the file atomically: the payload as `save_payload(temp_path)` saves it, then ids,
    checksums and the footer. Returns the header as written (offsets and checksum filled in)."""
    import numpy as np

    written: list[Header] = []

    def fill(temp: Path, fd: int) -> None:
        save_payload(temp)
        payload_bytes = os.lseek(fd, 0, os.SEEK_END)
        padding = -payload_bytes % 8
        _write_all(fd, b"\0" * padding)
        _write_all(fd, np.ascontiguousarray(chunk_ids, dtype="<i8").tobytes())
        _write_all(fd, np.ascontiguousarray(checksums, dtype="<u8").tobytes())
        body_end = os.lseek(fd, 0, os.SEEK_CUR)
        final = replace(header, payload_bytes=payload_bytes, ids_offset=payload_bytes + padding,
                        rows=int(chunk_ids.shape[0]), body_xxh3_128=_body_digest(temp, body_end))
        faultpoint("vectors.before-footer")  # a writer killed here leaves a temp file, never a target
        _write_all(fd, _footer(final))
        written.append(final)

    atomic_write_file(path, fill)
    return written[0]


def read_header(path: Path) -> Header:
    """The footer of `path`, checked against itself and the file's size (not yet the body)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            if size < FOOTER_BYTES:
                raise VectorFileUnusable("damaged", f"{path.name} is {size} bytes, shorter than its footer")
            handle.seek(size - FOOTER_BYTES)
            block = handle.read(FOOTER_BYTES)
    except FileNotFoundError as exc:
        raise VectorFileUnusable("missing", f"{path.name} does not exist") from exc
    except OSError as exc:
        raise VectorFileUnusable("damaged", f"{path.name} could not be read ({exc.strerror})") from exc
    magic, digest, length = _PREFIX.unpack_from(block)
    text = block[_PREFIX.size:_PREFIX.size + length]
    if magic != MAGIC or length > FOOTER_BYTES - _PREFIX.size or xxhash.xxh3_64_digest(text) != digest:
        raise VectorFileUnusable("damaged", f"{path.name} has no intact footer")
    try:
        header = _header_from(json.loads(text))
    except (ValueError, TypeError) as exc:
        raise VectorFileUnusable("damaged", f"{path.name}'s footer does not parse") from exc
    if header.format_version != FORMAT_VERSION:
        raise VectorFileUnusable("stale", f"{path.name} is format {header.format_version}, this build reads "
                                          f"{FORMAT_VERSION}")
    if header.file_bytes != size:
        raise VectorFileUnusable("damaged", f"{path.name} is {size} bytes, its footer says {header.file_bytes}")
    return header


def verify_body(path: Path, header: Header) -> None:
    """Every byte before the footer against its checksum. Read with plain reads, not through a
    mapping, so checking does not make the whole file resident in the reading process."""
    try:
        digest = _body_digest(path, header.footer_offset)
    except OSError as exc:
        raise VectorFileUnusable("damaged", f"{path.name} could not be read ({exc.strerror})") from exc
    if digest != header.body_xxh3_128:
        raise VectorFileUnusable("damaged", f"{path.name} does not match its checksum")


def read_rows(path: Path, header: Header) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """The ids and checksums sections (call after `verify_body`)."""
    import numpy as np

    with open(path, "rb") as handle:
        handle.seek(header.ids_offset)
        ids = np.frombuffer(handle.read(8 * header.rows), dtype="<i8").astype(np.int64)
        checksums = np.frombuffer(handle.read(8 * header.rows), dtype="<u8").astype(np.uint64)
    return ids, checksums


def _header_from(parsed: object) -> Header:
    """A Header from the footer's JSON, every field present and of its type (TypeError if not)."""
    if not isinstance(parsed, dict):
        raise TypeError("the footer is not a JSON object")
    values = cast("dict[str, object]", parsed)
    expected = {item.name for item in fields(Header)}
    if set(values) != expected:
        raise TypeError(f"the footer's fields are {sorted(values)}, not {sorted(expected)}")
    numbers = {name: values[name] for name in ("dim", "rows", "payload_bytes", "ids_offset", "format_version")}
    texts = {name: values[name] for name in ("library", "content_key", "body_xxh3_128")}
    maps = {name: values[name] for name in ("params", "identity", "extra")}
    if not all(isinstance(value, int) and value >= 0 for value in numbers.values()):
        raise TypeError("a size in the footer is not a non-negative integer")
    if not all(isinstance(value, str) for value in texts.values()) or not all(
            isinstance(value, dict) for value in maps.values()):
        raise TypeError("a field of the footer is not of its type")
    identity = cast("dict[str, object]", maps["identity"])
    return Header(
        library=cast("str", texts["library"]), dim=cast("int", numbers["dim"]), rows=cast("int", numbers["rows"]),
        content_key=cast("str", texts["content_key"]), params=cast("dict[str, object]", maps["params"]),
        identity={str(key): str(value) for key, value in identity.items()},
        payload_bytes=cast("int", numbers["payload_bytes"]), ids_offset=cast("int", numbers["ids_offset"]),
        body_xxh3_128=cast("str", texts["body_xxh3_128"]), format_version=cast("int", numbers["format_version"]),
        extra=cast("dict[str, object]", maps["extra"]))


def _footer(header: Header) -> bytes:
    text = json.dumps(asdict(header), sort_keys=True).encode()
    if len(text) > FOOTER_BYTES - _PREFIX.size:
        raise ValueError("the vector file's footer does not fit its block")
    block = _PREFIX.pack(MAGIC, xxhash.xxh3_64_digest(text), len(text)) + text
    return block + b"\0" * (FOOTER_BYTES - len(block))


def _body_digest(path: Path, end: int) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        left = end
        while left > 0:
            piece = handle.read(min(_READ_BYTES, left))
            if not piece:
                raise VectorFileUnusable("damaged", f"{path.name} ends before its footer says")
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
