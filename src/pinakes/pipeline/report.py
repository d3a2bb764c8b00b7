"""What a sync did, for people (`render_text`) and scripts (`to_dict`, `pnk sync --json`).

Every file under the sources is accounted for: indexed now, unchanged, skipped (never a document:
no extractor, excluded, a symlink) or failed, each skipped or failed path with its reason. The text
names at most a few paths per reason; `--json` lists them all. Paths are escaped for the terminal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, MutableSequence, Sequence
from dataclasses import asdict, dataclass, field
from typing import ClassVar, Literal, cast, get_args, overload

from pinakes.display import printable
from pinakes.kb import SIDECAR_SUFFIX
from pinakes.manifest.patterns import exclude_line, literal_pattern
from pinakes.pipeline.path_list import PathList
from pinakes.wording import counted, noun_for

# Paths the text report names per skip reason before it says "and N more".
SHOWN_PER_REASON = 5

# The stage of a failure no sync can get past while the file stays as it is: the extractor refused
# its bytes for good (a binary named `.md`, invalid UTF-8, over the size cap, a PDF the parser
# refuses). Only such a failure's remedy is the `[sources] exclude` line; every other failure (an
# I/O error, a paid document the budget stopped part-way, a parser killed from outside) a later sync
# can clear, so leaving its file out would lose a document. rules/extract.py decides which it is
# (`failure_stage`); the stage is stored with the failure, so status and doctor read it back.
UNEXTRACTABLE = "unextractable"

# What a sync can do to a document, in report order: one vocabulary, the field names of `SyncReport`
# (what a sync did) and of `sync.status.KBStatus` (what the next sync would do), so the two are
# compared field by field. `pnk sync --json` uses these names as its keys (ci/contract.SYNC_KEYS);
# `pnk status --json` keeps the keys it had before the names were shared (status.STATUS_JSON_KEYS).
ChangeKind = Literal["added", "changed", "reembedded", "renamed", "deleted", "metadata_refreshed",
                     "sidecars_written"]
CHANGE_KINDS: tuple[ChangeKind, ...] = get_args(ChangeKind)


def has_changes(record: object) -> bool:
    """Whether a sync report or a status holds a change of any kind (its CHANGE_KINDS fields)."""
    return any(getattr(record, kind) for kind in CHANGE_KINDS)


class WrittenSidecars(Sequence[str]):
    """The sidecars a sync wrote, as KB-relative sidecar paths, in the order written. It keeps the
    path of each sidecar's document (`add`), as the report's `added` holds a new document's, and adds
    the suffix when read: a first sync of 700k documents mints 700k sidecars, and a string of its own
    per sidecar was ~126 B a document kept to the run's end (~88 MB at 700k); the documents' paths are
    one `PathList` (pipeline/path_list.py), as `added` is."""

    __slots__ = ("_documents",)

    def __init__(self, sidecars: Iterable[str] = ()) -> None:
        self._documents = PathList(_document_of(sidecar) for sidecar in sidecars)

    def add(self, doc_path: str) -> None:
        """The sidecar of `doc_path` (KB-relative) was written."""
        self._documents.append(doc_path)

    @property
    def documents(self) -> Sequence[str]:
        """The documents whose sidecars were written, in the same order (a view, not a copy)."""
        return self._documents

    def wrote_for(self, doc_path: str) -> bool:
        """Whether the sidecar of `doc_path` is listed."""
        return self._find(doc_path) is not None

    def take_back(self, doc_path: str) -> None:
        """Forget the sidecar of `doc_path`: it was removed again."""
        if (at := self._find(doc_path)) is not None:
            del self._documents[at]

    def _find(self, doc_path: str) -> int | None:
        """Looked for from the newest: the one asked about is, in practice, the latest group's."""
        for at in range(len(self._documents) - 1, -1, -1):
            if self._documents[at] == doc_path:
                return at
        return None

    def __len__(self) -> int:
        return len(self._documents)

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [path + SIDECAR_SUFFIX for path in self._documents[index]]
        return self._documents[index] + SIDECAR_SUFFIX

    def __iter__(self) -> Iterator[str]:
        return (path + SIDECAR_SUFFIX for path in self._documents)

    def __contains__(self, sidecar: object) -> bool:
        return isinstance(sidecar, str) and sidecar.endswith(SIDECAR_SUFFIX) and self.wrote_for(_document_of(sidecar))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WrittenSidecars):
            return self._documents == other._documents
        return isinstance(other, Sequence) and not isinstance(other, str) and list(self) == list(cast("Sequence[object]", other))

    __hash__: ClassVar[None] = None  # pyright: ignore[reportIncompatibleMethodOverride]  # mutable, like a list

    def __repr__(self) -> str:
        return f"WrittenSidecars({list(self)!r})"


def _document_of(sidecar: str) -> str:
    if not sidecar.endswith(SIDECAR_SUFFIX):
        raise ValueError(f"not a sidecar path: {sidecar!r}")
    return sidecar[:-len(SIDECAR_SUFFIX)]


@dataclass(frozen=True)
class Failure:
    path: str
    stage: str
    error: str

    @property
    def permanent(self) -> bool:
        """Whether every later sync fails the same way until the file changes."""
        return self.stage == UNEXTRACTABLE


@dataclass
class SyncReport:
    kb_root: str
    mode: str  # "sync" | "rebuild" | "index-only" | "sidecars-only"
    skipped_reason: str | None = None  # e.g. another sync holds the lock
    added: MutableSequence[str] = field(default_factory=PathList)  # one buffer, not a string a document
    changed: list[str] = field(default_factory=list[str])
    # same content, new key: extractor, chunking, model, or the title / file-name words its context carries
    reembedded: list[str] = field(default_factory=list[str])
    renamed: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    deleted: list[str] = field(default_factory=list[str])
    metadata_refreshed: list[str] = field(default_factory=list[str])
    sidecars_written: WrittenSidecars = field(default_factory=WrittenSidecars)
    orphaned_sidecars: list[str] = field(default_factory=list[str])
    failures: list[Failure] = field(default_factory=list[Failure])
    skipped: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])  # (path, reason): not documents
    # PDF path -> 1-based pages with no text read (a scan without OCR, or with no text OCR found); the
    # document is indexed for what its other pages hold.
    pages_without_text: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    unchanged: int = 0  # documents on disk the sync had nothing to do for
    notes: list[str] = field(default_factory=list[str])
    warnings: list[str] = field(default_factory=list[str])
    chunks_embedded: int = 0  # run through the model
    chunks_reused: int = 0  # given a stored vector of the same (model, text) instead (pipeline/vector_reuse.py)
    # stored vectors found for a text that failed their check (checksum, width, finite, unit length):
    # not reused; the text was embedded again (counted in chunks_embedded)
    vectors_rejected: int = 0
    vector_reuse: str | None = None  # a rebuild's verdict on the old index's vectors, or --no-reuse
    # a rebuild: how its new index took the live one's place (index/install.py); None until it has
    installed: str | None = None
    files_hashed: int = 0
    graph_census: dict[str, int] | None = None
    link_scans: list[dict[str, object]] = field(default_factory=list[dict[str, object]])  # reverse scan, one per partner
    graph_seconds: float | None = None
    paid: dict[str, object] | None = None  # paid extraction: plan, spend, completeness audits (pipeline/paid_extraction.py)
    # The manifest's `[sources] exclude`, so that the remedy for a file no sync can index (it fails
    # every sync until it changes) is the exact line that leaves it out.
    source_exclude: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict[str, float])
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def noop(self) -> bool:
        return not (has_changes(self) or self.failures)

    @property
    def indexed(self) -> int:
        return len(self.added) + len(self.changed) + len(self.reembedded)

    def fail(self, path: str, stage: str, error: str) -> None:
        self.failures.append(Failure(path, stage, error))

    @property
    def exclusion(self) -> str | None:
        return exclusion_for(self.failures, self.source_exclude)

    def account_walk(self, skipped: Sequence[tuple[str, str]], unreadable: Mapping[str, str]) -> None:
        """Record what the walk found that is not a document, and the documents it could not read."""
        self.skipped.extend(skipped)
        for path, reason in sorted(unreadable.items()):
            self.fail(path, "read", f"cannot read the file ({reason}); it was left as last indexed. "
                                    "Fix its permissions, or exclude it in [sources] exclude")

    def account_unpaired(self, orphan_sidecars: Sequence[str], notes: Sequence[str]) -> None:
        """What a sync whose pairing has nothing to apply still reports: the sidecars with no document
        beside them, and what its plan noted (nothing, when the index is settled and there is none)."""
        self.orphaned_sidecars.extend(orphan_sidecars)
        self.notes.extend(notes)

    def to_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["added"] = list(self.added)
        data["sidecars_written"] = list(self.sidecars_written)
        data["renamed"] = [{"from": old, "to": new} for old, new in self.renamed]
        data["skipped"] = [{"path": path, "reason": reason} for path, reason in self.skipped]
        data["failures"] = [{**asdict(failure), "permanent": failure.permanent} for failure in self.failures]
        data["counts"] = {"indexed": self.indexed, "unchanged": self.unchanged,
                          "skipped": len(self.skipped), "failed": len(self.failures)}
        data["ok"] = self.ok
        data["exclusion"] = self.exclusion
        data["noop"] = self.noop
        return data

    def render_text(self) -> str:
        if self.skipped_reason:
            return f"sync skipped: {self.skipped_reason}"
        lines: list[str] = [f"warning: {printable(w)}" for w in self.warnings]  # warnings quote paths
        lines.append(f"{self.mode}: {self._render_counts()} ({self.wall_seconds:.2f}s)")
        if self.mode != "sidecars-only":
            lines.append(f"files: {self.indexed} indexed, {self.unchanged} unchanged, "
                         f"{len(self.skipped)} skipped, {len(self.failures)} failed")
        if self.chunks_embedded or self.chunks_reused:
            lines.append(f"chunks: {self.chunks_embedded} embedded, {self.chunks_reused} reused "
                         "(same model, same text: vector already stored)")
        if self.vectors_rejected:
            lines.append(f"  {counted(self.vectors_rejected, 'stored vector')} failed {'its' if self.vectors_rejected == 1 else 'their'} "
                         "check (checksum, width, finite, unit length): embedded again, never reused")
        if self.vector_reuse:
            lines.append(f"  vectors: {self.vector_reuse}")
        renamed_to = self.renamed_and_reindexed
        for old, new in self.renamed:
            lines.append(f"  renamed {printable(old)} -> {printable(new)}"
                         + (" (re-indexed: its file name's words are part of its chunks' context)"
                            if new in renamed_to else ""))
        for path in self.deleted:
            lines.append(f"  deleted {printable(path)} (soft: its ID is kept; the sidecar stays on disk)")
        for path in self.sidecars_written:
            lines.append(f"  wrote sidecar {printable(path)}")
        for path in self.orphaned_sidecars:
            lines.append(f"  orphaned sidecar {printable(path)} (no document beside it; never deleted "
                         "automatically)")
        lines.extend(f"  note: {printable(note)}" for note in self.notes)  # notes quote paths
        if self.pages_without_text:
            from pinakes.extract.ocr_models import unread_pages_advice

            for path, pages in sorted(self.pages_without_text.items()):
                lines.append(f"  {printable(path)}: {_page_list(pages)} with no text read (scanned or image-only): "
                             "indexed for its other pages only")
            lines.append(f"  ({unread_pages_advice()})")
        lines.extend(self._render_skipped())
        if self.graph_census is not None:
            census = ", ".join(f"{kind} {count}" for kind, count in self.graph_census.items())
            lines.append(f"graph: {census} ({(self.graph_seconds or 0) * 1000:.0f} ms)")
        lines.extend(self._render_link_scans())
        if self.failures:
            lines.append(f"{counted(len(self.failures), 'document')} failed:")
            for failure in self.failures:
                error = "\n".join(printable(line) for line in failure.error.splitlines())
                lines.append(f"  {printable(failure.path)} [{failure.stage}]: {error}")
        lines.extend(exclusion_lines(self.exclusion))
        return "\n".join(lines)

    @property
    def renamed_and_reindexed(self) -> set[str]:
        """The rename targets also in `reembedded`: indexed again because the file name's words are
        in their chunks' context, reported as the rename they are, not as a settings change."""
        return {new for _old, new in self.renamed} & set(self.reembedded)

    def _render_counts(self) -> str:
        """added, changed, ..., then the documents indexed again with their content unchanged: in a
        rebuild every one of them ("as they were"); in a sync, those whose settings changed (an
        extractor, the chunking, the model, a title) apart from renames, counted as renames."""
        counts = (f"added {len(self.added)}, changed {len(self.changed)}, renamed {len(self.renamed)}, "
                  f"deleted {len(self.deleted)}, failed {len(self.failures)}")
        if again := [path for path in self.reembedded if path not in self.renamed_and_reindexed]:
            counts += (f", rebuilt as they were {len(again)}" if self.mode == "rebuild"
                       else f", re-indexed (settings changed) {len(again)}")
        if self.metadata_refreshed:
            counts += f", metadata refreshed {len(self.metadata_refreshed)}"
        return counts

    def _render_link_scans(self) -> list[str]:
        """One line per connected KB, then its problems (a few; --json lists them all): a partner
        never fails the sync, so this is the only place a problem with one is seen."""
        lines: list[str] = []
        for scan in self.link_scans:
            found: object = scan.get("problems") or []
            assert isinstance(found, list)
            problems = cast("list[dict[str, str]]", found)  # links/reverse.py LinkProblem.to_dict
            lines.append(f"links from {printable(str(scan['alias']))}: {scan['status']}, {scan['inbound']} inbound"
                         + (f", {counted(len(problems), 'problem')}" if problems else "") + _not_due_yet(scan))
            for problem in problems[:SHOWN_PER_REASON]:
                lines.append(f"  {printable(problem['message'])}; remedy: {printable(problem['remedy'])}")
            if len(problems) > SHOWN_PER_REASON:
                lines.append(f"  and {len(problems) - SHOWN_PER_REASON} more (--json lists them all)")
        return lines

    def _render_skipped(self) -> list[str]:
        if not self.skipped:
            return []
        by_reason: dict[str, list[str]] = defaultdict(list)
        for path, reason in self.skipped:
            by_reason[reason].append(path)
        count = len(self.skipped)
        lines = [f"skipped {counted(count, 'path')} that {'is not a document' if count == 1 else 'are not documents'} "
                 "(all listed by --json):"]
        for reason, paths in sorted(by_reason.items()):
            shown = ", ".join(printable(path) for path in paths[:SHOWN_PER_REASON])
            more = f" and {len(paths) - SHOWN_PER_REASON} more" if len(paths) > SHOWN_PER_REASON else ""
            lines.append(f"  {reason}: {len(paths)} ({shown}{more})")
        return lines


def _not_due_yet(scan: dict[str, object]) -> str:
    """For a partner not scanned in this sync and known to link here nowhere: when it next is, and
    how to scan it now (0 inbound might otherwise read as a missing link)."""
    from pinakes.links.reverse import FRESH, parse_stamp

    due = parse_stamp(str(scan.get("next_scan") or ""))
    if scan["status"] != FRESH or scan["inbound"] or due is None:
        return ""
    return (f" (not scanned now: the next sync scans it after {due:%H:%M} UTC, or as soon as its links change; "
            "`pnk sync --scan-links` scans it now)")


def exclusion_for(failures: Sequence[Failure], exclude: Sequence[str]) -> str | None:
    """The `[sources] exclude` line that leaves out the files no sync can extract (the manifest's
    `exclude` patterns kept), or None: such a file (a binary named `.md`, a damaged PDF) fails every
    later sync until it is fixed, and "run pnk sync" is no remedy for it. A failure a rerun can
    clear (`Failure.permanent` false) is never offered for exclusion."""
    unindexable = [literal_pattern(f.path) for f in failures if f.permanent]
    return exclude_line(exclude, unindexable) if unindexable else None


def exclusion_lines(exclusion: str | None) -> list[str]:
    """What the text views (sync's report, `pnk status`) print for `exclusion_for`'s line."""
    if exclusion is None:
        return []
    return ["  a file that cannot be extracted fails every sync until it is fixed; to leave it out "
            "instead, set this under [sources] in pinakes.toml:", f"    {printable(exclusion)}"]


def _page_list(pages: Sequence[int]) -> str:
    shown = ", ".join(str(page) for page in pages[:10])
    more = f" and {len(pages) - 10} more" if len(pages) > 10 else ""
    return f"{noun_for(len(pages), 'page')} {shown}{more}"
