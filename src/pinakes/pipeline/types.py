"""The values the sync's stages hand each other, in one leaf module that imports none of them.

Each stage of `pipeline.stages.STAGES` is a function from these to these: pairing reads `IndexedDoc`
rows and yields `DocWork`; extract turns a `DocWork` into `Extracted`, chunk an `Extracted` into
`Chunked`, embed a group of `Chunked` into what it committed (`Embedded`). A document that fails in
a stage becomes `Failed` there, recorded in the run's report, and reaches no later stage. Because
the stages name only these types, no stage module needs another (doit's `task.py` plays this part
for its loader, control and runner). All of them are frozen: a stage that changes a document, as
pairing does when it writes a sidecar or a paid extraction when it records its provenance, hands on
a new value.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, NamedTuple

from pinakes.errors import PinakesError

if TYPE_CHECKING:  # annotations only: a no-op sync imports this module
    from pinakes.chunking import Chunk
    from pinakes.extract.types import ExtractedText
    from pinakes.sidecar.model import Sidecar
    from pinakes.sources.walk import FileState


class IndexedDoc(NamedTuple):
    """A documents row as pairing needs it (a NamedTuple: one per indexed document, every sync)."""

    id: str
    path: str
    content_hash: str
    sidecar_hash: str | None
    build_key: str | None
    state: str
    metadata: str
    title: str | None = None  # the sidecar's title it was indexed with (part of its build key)


@dataclass(frozen=True, slots=True)
class DocWork:
    """A document whose chunks and vectors must be (re)built: what pairing decided, extract's input."""

    doc_id: str
    path: str
    source_type: str
    file: FileState
    sidecar: Sidecar | None  # None when just minted, or unchanged and not parsed yet
    sidecar_hash: str | None
    key: str
    reason: str  # "added" | "changed" (content) | "rekeyed" (another key, or rebuilt as it was)
    # Its sidecar title or file name's words changed (so did its chunks' context): a kept paid
    # extraction is chunked again from its cached text rather than kept as indexed.
    context_renamed: bool = False

    def with_sidecar(self, sidecar: Sidecar) -> DocWork:
        """This document carrying `sidecar` as it now is on disk (read, or just written)."""
        return replace(self, sidecar=sidecar, sidecar_hash=sidecar.raw_hash)


@dataclass(frozen=True)
class Extracted:
    """extract's output: the text a document is indexed from."""

    work: DocWork
    text: ExtractedText


@dataclass(frozen=True)
class Chunked:
    """chunk's output: a document's passages, counted in the model's tokens, with its text."""

    work: DocWork
    text: ExtractedText
    chunks: tuple[Chunk, ...]
    text_title: str | None  # the title the document itself declares (extract/titles.py)


@dataclass(frozen=True)
class Failed:
    """A document whose pipeline stopped in a stage; the report holds why (`SyncReport.failures`)."""

    work: DocWork


@dataclass(frozen=True)
class Embedded:
    """embed's output for one group: the documents committed (row, chunks, vectors and key in one
    transaction each) and those that failed."""

    written: tuple[DocWork, ...]
    failed: tuple[DocWork, ...]


class RunStopped(Exception):
    """Raised by an extraction backend when `error` ends the whole sync rather than failing one
    document (a budget under `on_exceed = "abort"`); the extract stage raises `error` past its
    per-document handling."""

    def __init__(self, error: PinakesError):
        super().__init__(error.message)
        self.error = error
