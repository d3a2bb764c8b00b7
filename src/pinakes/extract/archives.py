"""Zip containers and their XML, read so that a hostile file fails itself and nothing else (issue #43).

EPUB, DOCX and ODT are zip files of XML (and XHTML). What a hostile one can do, and what stops it:

- **a zip bomb**: members are read by streaming decompression with the bytes *actually produced*
  counted, never trusting a header's sizes: a member over MAX_MEMBER_BYTES, a container whose members
  declare more than MAX_TOTAL_BYTES uncompressed or produce more than that when read, a member that
  expands more than MAX_RATIO times (past MIN_RATIO_BYTES, below which ratios mean nothing), and a
  container of more than MAX_MEMBERS entries are each refused with the number that gave it away;
- **XML entity expansion (billion laughs) and external entities (XXE)**: XML is parsed by defusedxml
  with entity declarations and external references forbidden: a part that declares an entity is
  refused, never expanded, and nothing is ever fetched. A DOCTYPE alone (an EPUB 2 table of contents
  names its DTD) is allowed: it is never loaded;
- **a container of something else** (a `.docx` that is a zip of photos): the format's own required
  part is missing, which the caller says in its words (`require`);
- **malformed XML or a broken zip**: a `SourceError` naming the part and the parser's reason.

Everything runs in the extraction isolation child (the extractors' `extract`), so memory and time
are also bounded by the kernel; these limits make the common attacks fail fast with a reason.
"""

from __future__ import annotations

import zipfile
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from pinakes.errors import SourceError

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

MAX_MEMBERS = 20_000
MAX_MEMBER_BYTES = 128 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024
MAX_RATIO = 200
MIN_RATIO_BYTES = 1024 * 1024
MAX_CONTAINER_BYTES = 512 * 1024 * 1024
_CHUNK = 1024 * 1024


class Container:
    """A zip container opened for reading under the limits above. Use as a context manager."""

    def __init__(self, path: Path, kind: str, remedy: str) -> None:
        self.path = path
        self.kind = kind  # "EPUB", "DOCX", "ODT": how a refusal names the file
        self.remedy = remedy
        self._read_total = 0
        try:
            self._zip = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise self.refused(f"it is not a valid {kind} (not a ZIP container: {exc})") from exc
        except OSError as exc:
            raise SourceError(f"cannot read the file: {exc.strerror or exc}",
                              remedy="fix its permissions, then run `pnk sync`", path=path) from exc
        infos = self._zip.infolist()
        if len(infos) > MAX_MEMBERS:
            self.close()
            raise self.refused(f"the {kind} holds {len(infos):,} entries, over the limit of {MAX_MEMBERS:,}")
        declared = sum(info.file_size for info in infos)
        if declared > MAX_TOTAL_BYTES:
            self.close()
            raise self.refused(f"its entries expand to {declared:,} bytes, over the {MAX_TOTAL_BYTES:,}-byte limit "
                               "(a zip bomb?)")
        self._infos = {info.filename: info for info in infos}

    def __enter__(self) -> Container:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    def names(self) -> Iterator[str]:
        return iter(self._infos)

    def has(self, name: str) -> bool:
        return name in self._infos

    def read(self, name: str, limit: int = MAX_MEMBER_BYTES) -> bytes:
        """The member's bytes, counted as they are decompressed (see the module docstring)."""
        info = self._infos.get(name)
        if info is None:
            raise self.refused(f"the {self.kind} names a part it does not contain ({name})")
        if info.flag_bits & 0x1:
            raise self.refused(f"its part {name} is encrypted")
        cap = min(limit, MAX_MEMBER_BYTES)
        parts: list[bytes] = []
        produced = 0
        try:
            with self._zip.open(info) as member:
                while chunk := member.read(_CHUNK):
                    produced += len(chunk)
                    self._read_total += len(chunk)
                    if produced > cap:
                        raise self.refused(f"its part {name} expands past {cap:,} bytes (a zip bomb?)")
                    if self._read_total > MAX_TOTAL_BYTES:
                        raise self.refused(f"its parts expand past {MAX_TOTAL_BYTES:,} bytes in all (a zip bomb?)")
                    if produced > MIN_RATIO_BYTES and produced > MAX_RATIO * max(info.compress_size, 1):
                        raise self.refused(f"its part {name} expands more than {MAX_RATIO} times "
                                           f"({info.compress_size:,} bytes compressed; a zip bomb?)")
                    parts.append(chunk)
        except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError, RuntimeError) as exc:
            raise self.refused(f"its part {name} cannot be read ({exc})") from exc
        except Exception as exc:  # zlib.error and the like: a corrupt stream
            if isinstance(exc, SourceError):
                raise
            raise self.refused(f"its part {name} cannot be read ({type(exc).__name__}: {exc})") from exc
        return b"".join(parts)

    def xml(self, name: str, limit: int = MAX_MEMBER_BYTES) -> Element:
        """The member parsed as XML (see `parse_xml`)."""
        return parse_xml(self.read(name, limit), f"{name} of the {self.kind}", self.path, self.remedy)

    def require(self, name: str, what: str) -> None:
        """Refuse a container that lacks `name`: the part `what` (its format) always has."""
        if name not in self._infos:
            raise self.refused(f"it is a ZIP file but not a {what} (it has no {name}); not indexed")

    def refused(self, reason: str) -> SourceError:
        text = reason if reason.endswith("not indexed") else f"{reason}; not indexed"
        return SourceError(text, remedy=self.remedy, path=self.path)


@contextmanager
def nesting_refused(path: Path, remedy: str) -> Generator[None]:
    """A document nested past Python's recursion limit (lists in lists in sections ...) refused as one
    file's failure with its reason, not a bare RecursionError."""
    try:
        yield
    except RecursionError as exc:
        raise SourceError("its structure is nested too deeply to read (a malformed or hostile file); not indexed",
                          remedy=remedy, path=path) from exc


def parse_xml(data: bytes, what: str, path: Path, remedy: str) -> Element:
    """`data` parsed by defusedxml: entity declarations and external references refused."""
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import fromstring

    try:
        return fromstring(data, forbid_dtd=False, forbid_entities=True, forbid_external=True)
    except DefusedXmlException as exc:
        raise SourceError(f"{what} declares XML entities or external references ({type(exc).__name__}), which "
                          "are refused (entity expansion and external entities are how XML attacks work); "
                          "not indexed", remedy=remedy, path=path) from exc
    except ParseError as exc:
        raise SourceError(f"{what} is not well-formed XML ({exc}); not indexed", remedy=remedy, path=path) from exc


def local(tag: str) -> str:
    """An element's name without its namespace (`{urn:…}p` -> `p`)."""
    return tag.rsplit("}", 1)[-1]


def require_defusedxml() -> None:
    import importlib.util

    from pinakes.errors import MissingExtraError

    if importlib.util.find_spec("defusedxml") is None:
        raise MissingExtraError("formats", "EPUB, DOCX and ODT extraction", missing_module="defusedxml")
