"""The extraction cache (spec §6.3): `.pinakes/cache/extract/<content_hash>-<fingerprint>.json`.

One JSON file per extraction stores the whole ExtractedText plus `backend`, `paid` and the
`operation_id` / `call_ids` that join it to ledger.jsonl (null for a free backend). A hit skips
the extractor, so `pnk sync --rebuild` never re-pays for a document whose content and extractor
fingerprint are unchanged. Invalidation is by key alone.

A cache must never be the reason a correctly configured sync fails, so any entry that cannot be
read — missing, truncated, another schema, a key that disagrees with its file name — is a miss,
never an error. Writes are atomic (temporary file, fsync, rename). Sweeping deletes only entries
known to be free: an orphan a paid backend wrote is reported, never deleted, and so is an entry
that cannot be read (it might be a paid one written by a newer Pinakes).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pinakes.errors import FilesystemError
from pinakes.extract.types import ExtractedText
from pinakes.jsontypes import JSONValue, int_list, str_list

SCHEMA = "pinakes.extract-cache/1"
_KEY_PART = re.compile(r"[0-9A-Za-z]+")
_ENTRY_NAME = re.compile(r"([0-9A-Za-z]+)-([0-9A-Za-z]+)\.json")
_TEMPORARY_PREFIX = ".tmp-"
# Appended to the extractor fingerprint of an entry holding the leading pages of a paid extraction
# that stopped part-way (`partial_fingerprint`): paid for, so kept and swept like any paid entry, and
# never a hit for the whole document's key.
_PARTIAL_MARK = "partial"


def partial_fingerprint(fingerprint: str) -> str:
    """The fingerprint under which the pages of an interrupted paid extraction are kept."""
    return f"{fingerprint}{_PARTIAL_MARK}"


@dataclass(frozen=True, slots=True)
class CachedExtraction:
    content_hash: str
    extracted: ExtractedText
    paid: bool
    operation_id: str | None
    call_ids: tuple[str, ...] | None
    # A paid entry's completeness audit (pinakes.extract.audit), as stored; None for a free entry.
    audit: dict[str, object] | None = None

    @property
    def partial(self) -> bool:
        """The leading pages of a paid extraction that stopped part-way (`partial_fingerprint`)."""
        return self.extracted.fingerprint.endswith(_PARTIAL_MARK)


@dataclass(frozen=True, slots=True)
class SweepResult:
    deleted: int  # free orphans removed
    deleted_bytes: int
    paid_orphans: tuple[Path, ...]  # kept: only ever reported
    unreadable_orphans: tuple[Path, ...]  # kept: they might be paid


@dataclass(frozen=True, slots=True)
class CacheStats:
    entries: int
    bytes: int
    orphans: int | None  # None when no active set was given
    paid_orphans: int | None


class ExtractCache:
    def __init__(self, directory: Path, *, rerun: str = "pnk sync") -> None:
        self.directory = Path(directory)
        # The command a write error's remedy says to run again once the directory takes writes: the
        # one that was asked for (`pnk sync --extract=claude-vision` is not what a bare sync does).
        self.rerun = rerun

    def path_for(self, content_hash: str, fingerprint: str) -> Path:
        for name, value in (("content_hash", content_hash), ("fingerprint", fingerprint)):
            if not _KEY_PART.fullmatch(value):
                raise ValueError(f"{name} must be alphanumeric to name a cache file, not {value!r}")
        return self.directory / f"{content_hash}-{fingerprint}.json"

    def get(self, content_hash: str, fingerprint: str) -> CachedExtraction | None:
        """The cached extraction for this content and extractor fingerprint, or None (a miss)."""
        path = self.path_for(content_hash, fingerprint)
        entry = _read_entry(path)
        if entry is None or entry.content_hash != content_hash or entry.extracted.fingerprint != fingerprint:
            return None
        return entry

    def put(
        self,
        content_hash: str,
        extracted: ExtractedText,
        *,
        paid: bool,
        operation_id: str | None = None,
        call_ids: Sequence[str] | None = None,
        audit: Mapping[str, object] | None = None,
    ) -> Path:
        """Store `extracted` atomically under (content_hash, extracted.fingerprint)."""
        path = self.path_for(content_hash, extracted.fingerprint)
        payload = {
            "schema": SCHEMA,
            "content_hash": content_hash,
            "fingerprint": extracted.fingerprint,
            "backend": extracted.backend,
            "paid": paid,
            "operation_id": operation_id,
            "call_ids": list(call_ids) if call_ids is not None else None,
            "text": extracted.text,
            "pages": [list(span) for span in extracted.pages] if extracted.pages is not None else None,
            "pages_without_text": list(extracted.pages_without_text),
            "running_heads": list(extracted.running_heads),
            "audit": dict(audit) if audit is not None else None,
        }
        data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            _atomic_write(path, data)
        except OSError as exc:
            raise _refused(exc, path, "write the extraction cache", self.rerun) from exc
        return path

    def check_writable(self) -> None:
        """Raise FilesystemError unless an entry can be written here now (a probe file, removed at
        once): a paid run asks before its first call, so nothing is paid for that it cannot keep."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=self.directory, prefix=_TEMPORARY_PREFIX)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            error = _refused(exc, self.directory, "write the extraction cache", self.rerun)
            error.message += "; a paid run keeps every extraction it pays for there, so nothing was paid for"
            raise error from exc

    def remove(self, content_hash: str, fingerprint: str) -> None:
        """Delete one entry if present (a partial one its whole document superseded); a failure is
        ignored: a leftover entry is never read as the whole document's."""
        with contextlib.suppress(OSError):
            self.path_for(content_hash, fingerprint).unlink()

    def sweep(self, active_hashes: Collection[str]) -> SweepResult:
        """Delete free entries whose content_hash is not active; report paid and unreadable ones.

        Call only after a fully successful sync: an entry is an orphan relative to `active_hashes`.
        Leftover temporary files of interrupted writes are deleted too.
        """
        active = set(active_hashes)
        deleted = deleted_bytes = 0
        paid: list[Path] = []
        unreadable: list[Path] = []
        for path, content_hash in self._entries():
            if content_hash in active:
                continue
            entry = _read_entry(path)
            if entry is None:
                unreadable.append(path)
            elif entry.paid:
                paid.append(path)
            else:
                deleted_bytes += _size(path)
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
                deleted += 1
        for leftover in self.directory.glob(f"{_TEMPORARY_PREFIX}*"):
            with contextlib.suppress(OSError):
                leftover.unlink()
        return SweepResult(deleted, deleted_bytes, tuple(paid), tuple(unreadable))

    def stats(self, active_hashes: Collection[str] | None = None) -> CacheStats:
        """Entry count and bytes; orphans and paid orphans when the active set is given."""
        entries = total = 0
        orphans: list[Path] = []
        for path, content_hash in self._entries():
            entries += 1
            total += _size(path)
            if active_hashes is not None and content_hash not in active_hashes:
                orphans.append(path)
        if active_hashes is None:
            return CacheStats(entries, total, None, None)
        paid = sum(1 for path in orphans if (entry := _read_entry(path)) is not None and entry.paid)
        return CacheStats(entries, total, len(orphans), paid)

    def clear(self, *, include_paid: bool) -> int:
        """Delete every entry (paid ones only with include_paid); returns how many were deleted."""
        deleted = 0
        for path, _ in self._entries():
            if not include_paid:
                entry = _read_entry(path)
                if entry is None or entry.paid:
                    continue
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
                deleted += 1
        return deleted

    def paid_entries(self) -> Iterator[tuple[Path, CachedExtraction]]:
        """Every readable entry a paid backend wrote (what --clear-cache=paid prices, and where
        doctor reads the completeness audit back from)."""
        for path, _ in self._entries():
            entry = _read_entry(path)
            if entry is not None and entry.paid:
                yield path, entry

    def _entries(self) -> Iterator[tuple[Path, str]]:
        try:
            names = sorted(os.listdir(self.directory))
        except FileNotFoundError:
            return
        for name in names:
            match = _ENTRY_NAME.fullmatch(name)
            if match:
                yield self.directory / name, match.group(1)


def _read_entry(path: Path) -> CachedExtraction | None:
    try:
        payload: JSONValue = json.loads(path.read_bytes().decode("utf-8"))
        return _parse_entry(payload)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _parse_entry(payload: JSONValue) -> CachedExtraction | None:
    if not isinstance(payload, dict) or payload.get("schema") != SCHEMA:
        return None
    text, pages, paid = payload["text"], payload["pages"], payload["paid"]
    backend, fingerprint, content_hash = payload["backend"], payload["fingerprint"], payload["content_hash"]
    operation_id, call_ids = payload["operation_id"], payload["call_ids"]
    if not (isinstance(text, str) and isinstance(backend, str) and isinstance(fingerprint, str)
            and isinstance(content_hash, str)):
        return None
    if not isinstance(paid, bool) or not (operation_id is None or isinstance(operation_id, str)):
        return None
    call_id_list = str_list(call_ids)
    if call_ids is not None and call_id_list is None:
        return None
    page_spans = None
    if pages is not None:
        spans = [int_list(span) for span in pages] if isinstance(pages, list) else None
        if spans is None or not all(span is not None and len(span) == 2 for span in spans):
            return None
        page_spans = tuple((span[0], span[1]) for span in spans if span is not None)
    # Added after the schema's first release: an entry without it simply has none.
    without_text = int_list(payload.get("pages_without_text", []))
    if without_text is None:
        return None
    heads = str_list(payload.get("running_heads", []))  # added with layout 2; an older entry has none
    if heads is None:
        return None
    extracted = ExtractedText(text=text, pages=page_spans, backend=backend, fingerprint=fingerprint,
                              pages_without_text=tuple(without_text), running_heads=tuple(heads))
    audit = payload.get("audit")  # added after the schema's first release, like pages_without_text
    return CachedExtraction(content_hash, extracted, paid, operation_id,
                            tuple(call_id_list) if call_id_list is not None else None,
                            dict(audit) if isinstance(audit, dict) else None)


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=_TEMPORARY_PREFIX)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):  # the rename's durability; not every platform can fsync a dir
        directory_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)


def _refused(exc: OSError, path: Path, doing: str, rerun: str) -> FilesystemError:
    """The error for a write the cache's directory refused. Its remedy never says to delete the
    cache: it may hold paid extractions (spec §6.3), which only money brings back."""
    reason = exc.strerror or str(exc)
    return FilesystemError(
        f"cannot {doing} ({reason})", path=path,
        remedy="free disk space, or make the directory writable again (its permissions, a read-only mount, "
               f"or an immutable flag), then run `{rerun}`; keep the directory: it holds paid extractions, "
               "which only a new paid run could bring back")


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
