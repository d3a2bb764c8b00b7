"""The vector file, `.pinakes/vectors.ann`: one file, written whole and swapped in by rename.

Layout, front to back:

    pieces    the approximate index as several usearch indexes ("pieces"), each as its library saves
              it (HNSW graph + int8 vectors), each at an 8-byte aligned offset, so each can be
              memory-mapped where it lies. A piece owns a range of chunk ids [from_id, to_id): the
              ranges are contiguous, ascending, and cover every id (the first from 0, the last to
              `MAX_ID`). A piece holds at most the builder's PIECE_ROWS rows (a few more after an
              update that re-adds rows inside its range; the next update builds such a file whole,
              as it does one cut by a release with larger pieces: the size is not recorded), so a
              build or an update holds one piece in memory at a time, never the whole index (issue
              #45's memory bar).
    ids       the chunk id (int64) of every row, ascending, 8-byte aligned
    checksums each row's 64-bit `embeddings.checksum` (uint64), same order: what an update diffs
    footer    the last FOOTER_BYTES: MAGIC, xxh3-64 of the JSON, its length (u32 LE), the JSON
              (`Header`, with every piece's offset, bytes, rows, id range, where its vector codes
              lie and the checksum of its other bytes), zero padding

The footer is read first and checked by its own checksum; `body_xxh3_128` covers every byte before
it (pieces, ids, checksums). A file that fails either, whose pieces do not tile their ids and
offsets, or whose sizes disagree with its footer, is damaged: search answers exactly instead and
the next sync rebuilds it. A searching process does not read every byte (the vector codes are
most of the file, and a search touches few of them): it checks each piece's `graph_xxh3_64`, every
byte of the piece but its codes — the library's headers and graph, where one damaged byte can send
the library's search through a wrong pointer and kill the process (review9 F2: 23 of 244 offsets
flipped in a graph did). A damaged code costs a candidate, never a wrong cosine (the candidates
are rescored from the index's own float rows). A footer at the end (not a header at the front) is what lets each piece
be copied into place as the library saved it, without holding it in memory.

Format 2 (pieces) replaced format 1 (one index at offset 0), format 3 (each piece's graph
checksummed) format 2: a file of an older format is "stale", search answers exactly until the next
sync, which builds the file whole in the new format.

The file is derived and disposable, like the index beside it: deleting it costs a rebuild, never
data. Nothing in it is read without the checks above passing first.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import struct
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

import xxhash

if TYPE_CHECKING:  # numpy only where rows are written or read: reading a footer (a no-op sync) needs none
    import numpy as np
    from numpy.typing import NDArray

from pinakes.atomic import atomic_write_file, temp_name_for
from pinakes.faults import faultpoint

FILE_NAME = "vectors.ann"
MAGIC = b"PNKVANN1"
FORMAT_VERSION = 3
# The footer's block: ~90 bytes of JSON a piece, so room for ~170 pieces (~89M rows at 2^19 a piece).
FOOTER_BYTES = 16_384
MAX_ID = 2**63 - 1  # the last piece's range ends here: every id above the others' ranges is its
_FORMAT_1_FOOTER_BYTES = 4096  # format 1's block, read only to call such a file stale
_PREFIX = struct.Struct("<8s8sI")  # magic, xxh3-64 of the JSON, JSON length
_READ_BYTES = 8 << 20
_COPY_BYTES = 1 << 20  # the buffer of a copy where the kernel cannot copy between files itself


UNAVAILABLE_DETAIL = "usearch is not installed (pip install 'pinakes-kb[ann]')"
# What brings a file back, by reason (a sync that changes no document still reads the footer: a damaged
# one is rebuilt; doctor's full check, which finds damage past an intact footer, says more).
# Damage behind an intact footer: a sync with nothing to do reads only the footer and keeps the
# file, so the remedy that works is to remove it (doctor reads every byte; a search finds a piece
# that does not load).
REBUILD_BY_HAND = f"delete .pinakes/{FILE_NAME}, then pnk sync (it builds the file again)"
_REMEDIES = {"missing": "pnk sync builds it", "damaged": "pnk sync rebuilds it",
             "stale": "pnk sync brings it up to date", "unavailable": "pip install 'pinakes-kb[ann]', then pnk sync"}


class VectorFileUnusable(Exception):
    """The vector file cannot answer for the index: `reason` is one of missing, damaged, stale,
    unavailable (the library is not installed). Never shown as an error: search falls back."""

    def __init__(self, reason: str, detail: str, remedy: str | None = None):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self._remedy = remedy

    @property
    def remedy(self) -> str:
        return self._remedy or _REMEDIES.get(self.reason, "pnk sync rebuilds it")


@dataclass(frozen=True)
class Piece:
    """Where one piece lies in the file and which chunk ids it owns: [from_id, to_id)."""

    offset: int
    size: int
    rows: int
    from_id: int
    to_id: int
    # The piece's vector codes, `codes_bytes` from `codes_offset` (relative to the piece; 0 and 0
    # when the writer could not place them: then every byte is checked), and the xxh3-64 of every
    # other byte of the piece.
    codes_offset: int = 0
    codes_bytes: int = 0
    graph_xxh3_64: int = 0

    def as_list(self) -> list[int]:
        return [self.offset, self.size, self.rows, self.from_id, self.to_id, self.codes_offset, self.codes_bytes,
                self.graph_xxh3_64]


# Where a saved piece's vector codes lie, (offset, bytes) from its start, given a reader of its bytes
# (offset, length) and its size: the library's own layout (vectors/engine.py codes_span).
CodesSpan = Callable[[Callable[[int, int], bytes], int], tuple[int, int]]


def no_codes(read: Callable[[int, int], bytes], size: int) -> tuple[int, int]:
    """A layout nobody placed: every byte of the piece is checked."""
    del read, size
    return 0, 0


@dataclass(frozen=True)
class PieceContent:
    """A piece to write: saved by the library to a path (`save`), or copied byte for byte from a
    range of another file (`copy_from`: path, offset, size), an unchanged piece of the old file."""

    rows: int
    from_id: int
    to_id: int
    save: Callable[[Path], object] | None = None
    copy_from: tuple[Path, int, int] | None = None
    # A copied piece's entry in the old footer: the copy must reproduce its codes' span and graph
    # checksum (neither depends on where the piece lies), or the copy went wrong.
    copied: Piece | None = None


@dataclass(frozen=True)
class Header:
    """The footer's JSON: what the file holds and what it was built from."""

    library: str  # "usearch <version>"
    dim: int
    rows: int
    content_key: str  # source.content_key of the rows it was built from
    params: Mapping[str, object]
    identity: Mapping[str, str]  # the embedding model's meta (embed/base.py identity_meta)
    pieces: tuple[Piece, ...] = ()
    ids_offset: int = 0
    body_xxh3_128: str = ""
    format_version: int = FORMAT_VERSION
    extra: Mapping[str, object] = field(default_factory=lambda: {})

    @property
    def payload_bytes(self) -> int:
        """The pieces' own bytes, without the padding between them."""
        return sum(piece.size for piece in self.pieces)

    @property
    def footer_offset(self) -> int:
        return self.ids_offset + 16 * self.rows

    @property
    def file_bytes(self) -> int:
        return self.footer_offset + FOOTER_BYTES


def vector_file_path(pinakes_dir: Path) -> Path:
    return pinakes_dir / FILE_NAME


def write_vector_file(path: Path, header: Header, pieces: Iterable[PieceContent],
                      chunk_ids: NDArray[np.int64], checksums: NDArray[np.uint64], codes_span: CodesSpan = no_codes
                      ) -> Header:
    """Write the file atomically: each piece in turn (saved to a temp file of its own, then copied
    in by the kernel, so its bytes are never held in this process), then ids, checksums and the
    footer. `pieces` is iterated lazily: a builder that yields one piece at a time and frees it when
    asked for the next holds one at a time. Each piece's codes are placed by `codes_span` and its
    other bytes checksummed as they lie in the file, read back (from the page cache). Returns the
    header as written."""
    import numpy as np

    written: list[Header] = []

    def fill(temp: Path, fd: int) -> None:
        laid: list[Piece] = []
        for content in pieces:
            offset = os.lseek(fd, 0, os.SEEK_END)
            _write_all(fd, b"\0" * (-offset % 8))
            offset += -offset % 8
            if content.save is not None:
                with piece_temp(path) as piece_path:
                    content.save(piece_path)
                    size = _append_file(piece_path, fd)
            elif content.copy_from is not None:
                source, source_offset, size = content.copy_from
                with open(source, "rb") as handle:
                    copy_range(handle.fileno(), source_offset, size, fd)
            else:
                raise ValueError("a piece to write has neither a save nor a range to copy")
            laid.append(_laid_piece(temp, offset, size, content, codes_span))
            del content  # before the next is asked for: a builder frees a piece only when nothing holds it
        end = os.lseek(fd, 0, os.SEEK_END)
        _write_all(fd, b"\0" * (-end % 8))
        ids_offset = end + -end % 8
        _write_all(fd, np.ascontiguousarray(chunk_ids, dtype="<i8").tobytes())
        _write_all(fd, np.ascontiguousarray(checksums, dtype="<u8").tobytes())
        body_end = os.lseek(fd, 0, os.SEEK_CUR)
        final = replace(header, pieces=tuple(laid), ids_offset=ids_offset, rows=int(chunk_ids.shape[0]),
                        body_xxh3_128=_body_digest(temp, body_end))
        _check_pieces(final)  # a writer's own mistake is caught before a reader could meet it
        faultpoint("vectors.before-footer")  # a writer killed here leaves a temp file, never a target
        _write_all(fd, _footer(final))
        written.append(final)

    atomic_write_file(path, fill)
    return written[0]


def _laid_piece(temp: Path, offset: int, size: int, content: PieceContent, codes_span: CodesSpan) -> Piece:
    """The footer's entry for a piece as written at `offset` of `temp`: its codes placed, its other
    bytes checksummed as they lie in the file."""
    with opened_file(temp) as fd:
        def read(at: int, length: int) -> bytes:
            return _read_exactly(fd, length, offset + at)

        codes_offset, codes_bytes = codes_span(read, size)
        laid = Piece(offset, size, content.rows, content.from_id, content.to_id, codes_offset, codes_bytes,
                     _graph_digest(fd, offset, size, codes_offset, codes_bytes))
    old = content.copied
    if old is not None and (old.size, old.codes_offset, old.codes_bytes, old.graph_xxh3_64) != (
            laid.size, laid.codes_offset, laid.codes_bytes, laid.graph_xxh3_64):
        raise VectorFileUnusable("damaged", "a piece copied from the old file does not match its checksum there")
    return laid


@contextlib.contextmanager
def piece_temp(target: Path) -> Generator[Path]:
    """A temp file beside `target` for the library to save one piece to, named and locked as the
    atomic writer's own (pinakes.atomic), so a sweep takes it only when its writer died."""
    temp = target.with_name(temp_name_for(f"{target.name}-piece"))
    fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        with contextlib.suppress(ImportError, OSError):  # no locks: the sweep's age rule still holds
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield temp
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        os.close(fd)


def _append_file(source: Path, fd: int) -> int:
    """Copy the whole of `source` to the end of `fd`; its size."""
    with open(source, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        copy_range(handle.fileno(), 0, size, fd)
    return size


def copy_range(source_fd: int, offset: int, size: int, fd: int) -> None:
    """`size` bytes of `source_fd` from `offset` to the end of `fd`: by the kernel where it can
    (copy_file_range: no bytes pass through this process), else through a small buffer."""
    left = size
    copy_file_range = getattr(os, "copy_file_range", None)
    while left > 0 and copy_file_range is not None:
        try:
            done = copy_file_range(source_fd, fd, left, offset + size - left)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM):
                raise
            break
        if done == 0:
            raise VectorFileUnusable("damaged", "a piece's source ended before its size")
        left -= done
    while left > 0:
        block = _pread(source_fd, min(_COPY_BYTES, left), offset + size - left)
        if not block:
            raise VectorFileUnusable("damaged", "a piece's source ended before its size")
        _write_all(fd, block)
        left -= len(block)


def read_header(path: Path, fd: int | None = None) -> Header:
    """The footer of `path`, checked against itself and the file's size (not yet the body). With
    `fd` (an open descriptor of `path`), the size and the footer are read through it: a reader that
    also maps or checks that same descriptor sees one file, even when a sync renames a new one over
    the path meanwhile (a footer read by path paired with bytes opened again would not be)."""
    try:
        with _reading(path, fd) as readable:
            size = os.fstat(readable).st_size
            tail = _read_exactly(readable, min(size, FOOTER_BYTES), max(0, size - FOOTER_BYTES))
    except OSError as exc:  # a read that failed (a file that cannot be opened: `opened_file`)
        raise VectorFileUnusable("damaged", f"{path.name} could not be read ({exc.strerror})") from exc
    text = _footer_text(tail, FOOTER_BYTES)
    if text is None:
        legacy = _footer_text(tail[-_FORMAT_1_FOOTER_BYTES:], _FORMAT_1_FOOTER_BYTES)
        if legacy is not None and b'"format_version": 1' in legacy:
            raise VectorFileUnusable("stale", f"{path.name} is format 1 (one index), this build reads "
                                              f"{FORMAT_VERSION} (pieces)")
        raise VectorFileUnusable("damaged", f"{path.name} has no intact footer")
    try:
        parsed = cast("object", json.loads(text))
        version = _format_of(parsed)
        if isinstance(version, int) and not isinstance(version, bool) and version != FORMAT_VERSION:
            raise VectorFileUnusable("stale", f"{path.name} is format {version}, this build reads {FORMAT_VERSION}")
        header = _header_from(parsed)
    except (ValueError, TypeError) as exc:
        raise VectorFileUnusable("damaged", f"{path.name}'s footer does not parse") from exc
    if header.file_bytes != size:
        raise VectorFileUnusable("damaged", f"{path.name} is {size} bytes, its footer says {header.file_bytes}")
    try:
        _check_pieces(header)
    except ValueError as exc:
        raise VectorFileUnusable("damaged", f"{path.name}'s pieces {exc}") from exc
    return header


def check_answers_for(path: Path, header: Header, expected_key: str, identity: Mapping[str, str], dim: int) -> None:
    """Whether a file with this (checked) footer answers for the rows whose content key is
    `expected_key`, under this model: VectorFileUnusable("stale") saying why not."""
    if header.content_key != expected_key:
        raise VectorFileUnusable("stale", f"{path.name} was built from other rows than the index holds now")
    if dict(header.identity) != dict(identity) or header.dim != dim:
        raise VectorFileUnusable("stale", f"{path.name} was built by another embedding model")


def _check_pieces(header: Header) -> None:
    """The pieces tile the ids (contiguous ranges from 0 to MAX_ID) and lie in order, aligned,
    before the ids section, their rows adding up to the file's: ValueError saying how not."""
    if not header.pieces:
        raise ValueError("are none")
    if sum(piece.rows for piece in header.pieces) != header.rows:
        raise ValueError(f"hold {sum(piece.rows for piece in header.pieces)} rows, the file {header.rows}")
    if header.pieces[0].from_id != 0 or header.pieces[-1].to_id != MAX_ID:
        raise ValueError("do not cover every chunk id")
    end = 0
    for number, piece in enumerate(header.pieces):
        if piece.offset % 8 or piece.offset < end or piece.from_id >= piece.to_id or (
                number and piece.from_id != header.pieces[number - 1].to_id):
            raise ValueError(f"do not tile the file or the ids (piece {number})")
        if piece.codes_offset + piece.codes_bytes > piece.size:
            raise ValueError(f"place codes outside their piece (piece {number})")
        end = piece.offset + piece.size
    if end > header.ids_offset or header.ids_offset % 8:
        raise ValueError("overlap the ids")


def verify_body(path: Path, header: Header, fd: int | None = None) -> None:
    """Every byte before the footer against its checksum (through `fd` when given: `read_header`).
    Read with plain reads, not through a mapping, so checking does not make the whole file resident
    in the reading process."""
    try:
        with _reading(path, fd) as readable:
            digest = _body_digest(path, header.footer_offset, readable)
    except OSError as exc:
        raise VectorFileUnusable("damaged", f"{path.name} could not be read ({exc.strerror})") from exc
    if digest != header.body_xxh3_128:
        raise VectorFileUnusable("damaged", f"{path.name} does not match its checksum")


def verify_graphs(path: Path, header: Header, fd: int | None = None, codes_span: CodesSpan = no_codes) -> None:
    """Every byte of each piece but its vector codes against the piece's checksum (through `fd` when
    given): what a searching process checks before the library reads a piece (the module's
    docstring). Plain reads, as `verify_body`'s: the pages stay in the page cache for the mapping
    that follows, not in this process. A footer's span of the codes is what leaves bytes unchecked,
    so it must be the one `codes_span` finds in the piece's own (checked) bytes, or none."""
    try:
        with _reading(path, fd) as readable:
            for number, piece in enumerate(header.pieces):
                _check_codes_span(path, number, piece, readable, codes_span)
                digest = _graph_digest(readable, piece.offset, piece.size, piece.codes_offset, piece.codes_bytes)
                if digest != piece.graph_xxh3_64:
                    raise VectorFileUnusable("damaged", f"{path.name}'s piece {number} does not match its checksum",
                                             REBUILD_BY_HAND)
    except OSError as exc:
        raise VectorFileUnusable("damaged", f"{path.name} could not be read ({exc.strerror})") from exc


def _check_codes_span(path: Path, number: int, piece: Piece, fd: int, codes_span: CodesSpan) -> None:
    if piece.codes_bytes == 0:
        return  # nothing left unchecked
    def read(at: int, length: int) -> bytes:
        return _read_exactly(fd, length, piece.offset + at) if at + length <= piece.size else b""

    if codes_span(read, piece.size) != (piece.codes_offset, piece.codes_bytes):
        raise VectorFileUnusable("damaged", f"{path.name}'s piece {number} does not hold its codes where its "
                                            "footer says", REBUILD_BY_HAND)


def _graph_digest(fd: int, offset: int, size: int, codes_offset: int, codes_bytes: int) -> int:
    """xxh3-64 of the piece at `offset` of `size` bytes, its codes' span left out."""
    digest = xxhash.xxh3_64()
    for start, end in ((0, codes_offset), (codes_offset + codes_bytes, size)):
        _hash_range(digest, fd, offset + start, offset + end, "a piece ends before its footer says")
    return digest.intdigest()


def read_rows(path: Path, header: Header, fd: int | None = None) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """The ids and checksums sections (call after `verify_body`; through `fd` when given)."""
    import numpy as np

    with _reading(path, fd) as readable:
        ids = np.frombuffer(_read_exactly(readable, 8 * header.rows, header.ids_offset), dtype="<i8")
        checksums = np.frombuffer(_read_exactly(readable, 8 * header.rows, header.ids_offset + 8 * header.rows),
                                  dtype="<u8")
    return ids.astype(np.int64), checksums.astype(np.uint64)


def check_piece_ids(path: Path, header: Header, ids: NDArray[np.int64]) -> None:
    """Each piece's row count against the ids (ascending) that fall in its range: a footer whose
    checksums hold but whose ranges disagree with the rows (a writer's bug) would leave a row in two
    pieces, or a deleted one in none that a later update reaches; such a file is damaged and is built
    whole again."""
    import numpy as np

    if len(ids) > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        raise VectorFileUnusable("damaged", f"{path.name}'s chunk ids are not ascending")
    for number, piece in enumerate(header.pieces):
        inside = int(np.searchsorted(ids, piece.to_id, side="left") - np.searchsorted(ids, piece.from_id, side="left"))
        if inside != piece.rows:
            raise VectorFileUnusable("damaged", f"{path.name}'s piece {number} says {piece.rows} rows, its id range "
                                                f"holds {inside}")


def _format_of(parsed: object) -> object:
    """The footer JSON's format_version, read before its other fields, which differ by format."""
    return cast("dict[str, object]", parsed).get("format_version") if isinstance(parsed, dict) else None


def _header_from(parsed: object) -> Header:
    """A Header from the footer's JSON, every field present and of its type (TypeError if not)."""
    if not isinstance(parsed, dict):
        raise TypeError("the footer is not a JSON object")
    values = cast("dict[str, object]", parsed)
    expected = {item.name for item in fields(Header)}
    if set(values) != expected:
        raise TypeError(f"the footer's fields are {sorted(values)}, not {sorted(expected)}")
    numbers = {name: values[name] for name in ("dim", "rows", "ids_offset", "format_version")}
    texts = {name: values[name] for name in ("library", "content_key", "body_xxh3_128")}
    maps = {name: values[name] for name in ("params", "identity", "extra")}
    if not all(_count(value) for value in numbers.values()):
        raise TypeError("a size in the footer is not a non-negative integer")
    if not all(isinstance(value, str) for value in texts.values()) or not all(
            isinstance(value, dict) for value in maps.values()):
        raise TypeError("a field of the footer is not of its type")
    identity = cast("dict[str, object]", maps["identity"])
    pieces = values["pieces"]
    if not isinstance(pieces, list) or not all(
            isinstance(piece, list) and len(cast("list[object]", piece)) == len(fields(Piece))
            and all(_count(number) for number in cast("list[object]", piece))
            for piece in cast("list[object]", pieces)):
        raise TypeError(f"the footer's pieces are not lists of {len(fields(Piece))} non-negative integers")
    return Header(
        library=cast("str", texts["library"]), dim=cast("int", numbers["dim"]), rows=cast("int", numbers["rows"]),
        content_key=cast("str", texts["content_key"]), params=cast("dict[str, object]", maps["params"]),
        identity={str(key): str(value) for key, value in identity.items()},
        pieces=tuple(Piece(*cast("list[int]", piece)) for piece in cast("list[object]", pieces)),
        ids_offset=cast("int", numbers["ids_offset"]),
        body_xxh3_128=cast("str", texts["body_xxh3_128"]), format_version=cast("int", numbers["format_version"]),
        extra=cast("dict[str, object]", maps["extra"]))


def _count(value: object) -> bool:
    """A non-negative integer of the footer's JSON (true and false are not: Python's bool is an int)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _footer_text(block: bytes, block_bytes: int) -> bytes | None:
    """The JSON of a footer block of `block_bytes`, when the block is whole and matches its checksum."""
    if len(block) != block_bytes:
        return None
    magic, digest, length = _PREFIX.unpack_from(block)
    text = block[_PREFIX.size:_PREFIX.size + length]
    if magic != MAGIC or length > block_bytes - _PREFIX.size or xxhash.xxh3_64_digest(text) != digest:
        return None
    return text


def _footer(header: Header) -> bytes:
    fields_of = {**asdict(header), "pieces": [piece.as_list() for piece in header.pieces]}
    text = json.dumps(fields_of, sort_keys=True, separators=(",", ":")).encode()
    if len(text) > FOOTER_BYTES - _PREFIX.size:
        raise ValueError("the vector file's footer does not fit its block")
    block = _PREFIX.pack(MAGIC, xxhash.xxh3_64_digest(text), len(text)) + text
    return block + b"\0" * (FOOTER_BYTES - len(block))


def _body_digest(path: Path, end: int, fd: int | None = None) -> str:
    digest = xxhash.xxh3_128()
    with _reading(path, fd) as readable:
        _hash_range(digest, readable, 0, end, f"{path.name} ends before its footer says")
    return digest.hexdigest()


def _hash_range(digest: xxhash.xxh3_64 | xxhash.xxh3_128, fd: int, start: int, end: int, short: str) -> None:
    """Feed bytes [start, end) of `fd` to `digest`, a bounded block at a time (plain reads: nothing
    stays resident); VectorFileUnusable("damaged", `short`) when the file ends first."""
    done = start
    while done < end:
        block = _pread(fd, min(_READ_BYTES, end - done), done)
        if not block:
            raise VectorFileUnusable("damaged", short)
        digest.update(block)
        done += len(block)


@contextlib.contextmanager
def opened_file(path: Path) -> Generator[int]:
    """`path` open for reading, as a descriptor to hand to `read_header` and the checks (closed on
    leaving); VectorFileUnusable when it is missing or cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError as exc:
        raise VectorFileUnusable("missing", f"{path.name} does not exist") from exc
    except OSError as exc:
        raise VectorFileUnusable("damaged", f"{path.name} could not be read ({exc.strerror})") from exc
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _reading(path: Path, fd: int | None) -> Generator[int]:
    """`fd` when the caller holds the file open (read through it, left open), else `path` opened for this read."""
    if fd is not None:
        yield fd
        return
    with opened_file(path) as opened:
        yield opened


def _pread(fd: int, size: int, offset: int) -> bytes:
    """Up to `size` bytes of `fd` at `offset`: pread where the OS has it (Windows has not: seek, then read)."""
    pread = getattr(os, "pread", None)
    if pread is not None:
        return cast("bytes", pread(fd, size, offset))
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, size)


def _read_exactly(fd: int, size: int, offset: int) -> bytes:
    """`size` bytes of `fd` from `offset` (pread may return fewer at a time)."""
    parts: list[bytes] = []
    while size > 0:
        part = _pread(fd, size, offset)
        if not part:
            break  # a file shorter than its footer says: the caller's checks refuse what it read
        parts.append(part)
        size -= len(part)
        offset += len(part)
    return b"".join(parts)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
