"""The reverse scan (spec §6.2, §6.3): which documents in connected KBs link to this one.

A partner's links are learnt from its committed sidecars, never from its index: the index is
gitignored (absent in a fresh clone) and could not be read without holding the partner's lock. The
partner's own pinakes.toml is read too, because a sidecar does not say which KB it belongs to:

- its `[kb] id` must equal the id this manifest's `[[links.kb]]` declares, or nothing is scanned
  (trusting either side alone would file one KB's links under another's alias, or silently redirect
  a link the local author wrote deliberately);
- its sidecars are enumerated from its own `[sources]`, and read with its id as owner, so the
  partner's `pnk://self/<doc>` means the partner;
- only links targeting this KB are kept; a link to a third KB is read and discarded.

A partner's rows are replaced all or nothing, after a complete walk, in one transaction scoped to
that partner's `src_kb_id` and to `origin = 'reverse-scan'` (a manifest may list itself, and an
origin-blind delete would remove authored rows). A walk that failed anywhere writes nothing and does
not stamp `kb_refs.last_scan`, so the retry is not suppressed for a window by the failure. A KB
dropped from `[[links.kb]]` has its rows and its `kb_refs` entry removed.

Every failure (an id that does not match, a path that is not there, a sidecar that does not parse, a
target that is not in this KB) is a `LinkProblem` with a remedy; none fails the sync, because sync
runs on git hooks and a partner that is merely not on this machine must not block a commit. A
missing target is still recorded as an edge: dropping it would hide a claim the other KB makes.

Cost is bounded by a freshness window, a code constant (how stale a cross-KB link may be is a
question about this engine's cost, not about a KB). Within the window a partner is not read at all,
unless it says its links changed: its signal (`partner_signal`: what stat() says of its pinakes.toml
and of its `.pinakes/links-changed`, which `pnk link`/`pnk unlink` and its own sync touch whenever
its sidecars' cross-KB links change) differs from the one recorded at the last scan. That check is
two stat() calls, so a link authored in a partner shows up at this KB's next sync, whichever of the
two synced first, while an unchanged partner is never walked within the window. A sidecar edited by
hand in a partner that has not synced since does not move the signal: the window bounds that delay.
Past the window, the partner's sidecars are enumerated and their (path, size, mtime, ctime, inode)
keyed; an unchanged key re-stamps the scan without reading a sidecar. `--scan-links` ignores all of
it. Uncertainty always resolves to stale: no stamp, a stamp that does not parse, one in the future,
or no signal recorded.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.errors import PinakesError
from pinakes.manifest import LinkedKB, Manifest
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.sources.walk import FileState
# How long a partner's scan stays fresh. An hour: sync runs on every commit, and learning of an
# inbound link sooner is not worth a partner's thousand sidecar reads on each of them.
FRESHNESS_WINDOW = timedelta(hours=1)
# What one scan reads of one partner, at most (spec §6.2 names no bound; a partner must not be able to
# make every sync slow). Reading stops before the sidecar that would pass either: 10,000 links is
# ten links for each of a thousand documents; 4 MiB of sidecars is ~12,000 ordinary ones, or four at
# the 1 MiB cap (parsing one costs seconds). Reaching one is reported (kind "capped"), the rows of the
# sidecars read are replaced and the rest kept as known, no key is stored, and the next due scan
# goes on from the sidecar after the last one read, so every sidecar is read within a few windows.
MAX_LINKS_READ = 10_000
MAX_SIDECAR_BYTES_READ = 4 << 20
ORIGIN = "reverse-scan"
_KEY_META = "reverse_scan_key:"  # meta key prefix: the partner's sidecar key at its last full scan
_CURSOR_META = "reverse_scan_cursor:"  # meta key prefix: the last sidecar a bounded scan read
_SIGNAL_META = "reverse_scan_signal:"  # meta key prefix: the partner's signal when its last scan began
# In a KB's .pinakes/ (never committed): touched whenever its sidecars' cross-KB links change, so a
# connected KB knows to scan it without walking it (see the module docstring).
LINKS_CHANGED_NAME = "links-changed"
_SHOWN = 5  # problems of one kind listed in full; the rest are counted

# What became of one partner in one sync.
SCANNED = "scanned"  # every sidecar read, rows replaced, stamped
UNCHANGED = "unchanged"  # past the window, but the sidecars' key is unchanged: re-stamped, none read
FRESH = "fresh"  # within the window: not read at all
FAILED = "failed"  # nothing written, no stamp (see `problems`)
REMOVED = "removed"  # dropped from [[links.kb]]: its rows and kb_refs entry deleted


def now() -> datetime:
    """The scan clock (a function, so a test can move it)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class LinkProblem:
    """One thing a reverse scan could not do, said so a person can fix it."""

    kind: str  # unknown-id | unreachable | unparseable | missing-target
    message: str
    remedy: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message, "remedy": self.remedy}


@dataclass
class PartnerScan:
    """The outcome of one partner's reverse scan (`status` is one of the constants above)."""

    alias: str
    kb_id: str
    status: str
    inbound: int = 0  # rows this KB now holds from the partner
    sidecars_read: int = 0
    discarded: int = 0  # links to a third KB (or to the partner itself): read, not kept
    problems: list[LinkProblem] = field(default_factory=list["LinkProblem"])
    last_scan: str | None = None  # FRESH only: when it was last scanned ...
    next_scan: str | None = None  # ... and when the window ends (sooner if the partner's links change)

    def to_dict(self) -> dict[str, object]:
        return {"alias": self.alias, "kb_id": self.kb_id, "status": self.status, "inbound": self.inbound,
                "sidecars_read": self.sidecars_read, "discarded": self.discarded,
                "problems": [problem.to_dict() for problem in self.problems],
                "last_scan": self.last_scan, "next_scan": self.next_scan}


@dataclass(frozen=True)
class _Walked:
    """A complete walk of a partner's sidecars: the links that target this KB, and its key."""

    rows: list[tuple[str, str, str]]  # (partner doc id, this KB's doc id, rel)
    sidecars_read: int
    discarded: int
    read_ids: list[str] | None = None  # when a bound stopped the walk: the partner documents it read
    stopped_after: str | None = None  # ... and the path of the last sidecar it read


def partner_root(kb_root: Path, linked: LinkedKB) -> Path:
    """Where `[[links.kb]]` says the partner lives: its path, relative to this KB's root, with the
    symbolic links that resolve followed (a loop is left as written: reading it is what fails)."""
    return Path(os.path.realpath(kb_root / os.path.expanduser(linked.path)))


class PartnerError(PinakesError):
    """A connected KB that cannot be used from here: not there, unreadable, or another KB. Always a
    per-partner problem (`kind` as in LinkProblem), never the failure of the command that met it."""

    def __init__(self, kind: str, message: str, remedy: str, *, path: Path | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.kind = kind

    def problem(self) -> LinkProblem:
        return LinkProblem(self.kind, self.message, self.remedy or "")


def open_partner(kb_root: Path, linked: LinkedKB) -> tuple[Path, Manifest]:
    """The partner's root and manifest, checked to be the KB `[[links.kb]]` declares; PartnerError
    for a partner that is not there, cannot be read (permissions, a symbolic-link loop, an I/O
    error) or is another KB. Every caller that looks at a partner goes through here."""
    from pinakes.kb import MANIFEST_NAME
    from pinakes.manifest import load_manifest

    root = partner_root(kb_root, linked)
    where = f"[[links.kb]] {linked.alias!r} ({linked.path})"
    kept = "links already known from it are kept"
    try:
        os.stat(root / MANIFEST_NAME)
    except (FileNotFoundError, NotADirectoryError):
        raise PartnerError("unreachable", f"{where}: no KB at {root} on this machine",
                           f"clone or move the partner there, or fix `path` in this KB's [[links.kb]] "
                           f"{linked.alias!r}; {kept}") from None
    except OSError as exc:
        raise PartnerError("unreachable", f"{where}: cannot read {root} ({_os_reason(exc)})",
                           f"check the permissions of {root} (or the symbolic link at `path`); {kept}") from None
    try:
        partner = load_manifest(root / MANIFEST_NAME)
    except PinakesError as exc:
        raise PartnerError("unreachable", f"{where}: its pinakes.toml does not load ({exc.message.splitlines()[0]})",
                           f"fix the partner's manifest (`pnk doctor` in that KB); {kept}") from None
    if partner.kb.id != linked.id:
        raise PartnerError("unknown-id", f"{where}: the KB there has id {partner.kb.id}, but [[links.kb]] declares "
                                         f"{linked.id}",
                           "point `path` at the KB whose [kb] id is the declared one, or correct `id` if the "
                           "partner is really this KB (its sidecars' links name its id)")
    return root, partner


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def parse_stamp(value: str | None) -> datetime | None:
    """A `kb_refs.last_scan` stamp as an aware datetime, or None when there is none or it is unusable."""
    if not value:
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else None


def is_fresh(stamp: str | None, at: datetime) -> bool:
    """Whether a scan stamped `stamp` needs no re-read at `at`. Uncertainty is stale: no stamp, one
    that does not parse, and one in the future (a clock that moved back would otherwise suppress
    every scan until real time caught up, with no symptom)."""
    parsed = parse_stamp(stamp)
    return parsed is not None and parsed <= at and at - parsed < FRESHNESS_WINDOW


def known_refs(conn: sqlite3.Connection) -> dict[str, tuple[str, str | None, str | None]]:
    """kb_refs as {kb_id: (alias, path, last_scan)}."""
    return {kb_id: (alias, path, last_scan)
            for kb_id, alias, path, last_scan in conn.execute("SELECT kb_id, alias, path, last_scan FROM kb_refs")}


def is_due(conn: sqlite3.Connection, kb_root: Path, linked: LinkedKB, *, force: bool, at: datetime) -> bool:
    """Whether `linked` must be looked at in this sync (forced, never scanned, stale, moved, or its
    signal moved since the last scan: two stat() calls, nothing of the partner read)."""
    if force:
        return True
    ref = known_refs(conn).get(linked.id)
    if ref is None:
        return True
    alias, path, last_scan = ref
    if (alias, path) != (linked.alias, linked.path) or not is_fresh(last_scan, at):
        return True
    recorded = conn.execute("SELECT value FROM meta WHERE key = ?", (_SIGNAL_META + linked.id,)).fetchone()
    return recorded is None or recorded[0] != partner_signal(partner_root(kb_root, linked))


def partner_signal(root: Path) -> str:
    """What stat() says of a KB's pinakes.toml and its links-changed mark: it moves whenever the
    KB's sources or its sidecars' cross-KB links may have changed (see the module docstring)."""
    from pinakes.kb import MANIFEST_NAME, STATE_DIR_NAME

    parts: list[str] = []
    for path in (root / MANIFEST_NAME, root / STATE_DIR_NAME / LINKS_CHANGED_NAME):
        try:
            state = os.stat(path)
        except FileNotFoundError:
            parts.append("absent")
        except OSError as exc:
            parts.append(f"unreadable {exc.errno}")
        else:
            parts.append(f"{state.st_size} {state.st_mtime_ns} {state.st_ctime_ns} {state.st_ino}")
    return "|".join(parts)


def mark_links_changed(state_dir: Path) -> None:
    """Touch `state_dir`/links-changed (creating it; never the folder), so that connected KBs
    scan this one at their next sync. Best effort: where it cannot be written, they learn of the
    change when their window ends, which is what happened before this mark existed."""
    mark = state_dir / LINKS_CHANGED_NAME
    try:
        with open(mark, "a", encoding="utf-8"):
            pass
        os.utime(mark)
    except OSError:
        pass


def delisted(conn: sqlite3.Connection, manifest: Manifest) -> list[str]:
    """KB ids this index knows from a reverse scan that [[links.kb]] no longer lists."""
    # kb_refs alone: a partner's rows and its kb_refs entry are written and removed in one
    # transaction, so a KB with rows has an entry (and this check stays one small query per sync).
    listed = {linked.id for linked in manifest.links}
    return sorted(set(known_refs(conn)) - listed)


def any_due(conn: sqlite3.Connection, kb_root: Path, manifest: Manifest, *, force: bool,
            at: datetime | None = None) -> bool:
    """Whether this sync has reverse-scan work at all (cheap: kb_refs, and two stat() calls per
    partner; no partner file read)."""
    at = at or now()
    return bool(delisted(conn, manifest)) or any(
        is_due(conn, kb_root, linked, force=force, at=at) for linked in manifest.links)


def remove_delisted(conn: sqlite3.Connection, manifest: Manifest) -> list[PartnerScan]:
    """Delete the rows and kb_refs entry of every KB no longer in [[links.kb]]: nothing else ever
    would, since only a listed partner is scanned (call outside a transaction)."""
    from pinakes.index.schema import transaction

    outcomes: list[PartnerScan] = []
    refs = known_refs(conn)
    for kb_id in delisted(conn, manifest):
        with transaction(conn):
            removed = conn.execute("DELETE FROM links WHERE src_kb_id = ? AND origin = ?", (kb_id, ORIGIN)).rowcount
            conn.execute("DELETE FROM kb_refs WHERE kb_id = ?", (kb_id,))
            conn.executemany("DELETE FROM meta WHERE key = ?", [(prefix + kb_id,) for prefix in
                                                                (_KEY_META, _CURSOR_META, _SIGNAL_META)])
        alias = refs[kb_id][0] if kb_id in refs else kb_id
        outcomes.append(PartnerScan(alias=alias, kb_id=kb_id, status=REMOVED, inbound=0, discarded=removed))
    return outcomes


def scan_partner(conn: sqlite3.Connection, manifest: Manifest, kb_root: Path, linked: LinkedKB, *,
                 force: bool, at: datetime | None = None) -> PartnerScan:
    """Scan one partner into this KB's index (call outside a transaction; see the module docstring)."""
    outcome = PartnerScan(alias=linked.alias, kb_id=linked.id, status=FAILED)
    try:
        _scan(conn, manifest, kb_root, linked, outcome, force=force, at=at or now())
    except OSError as exc:  # a fault the steps above did not foresee is still this partner's alone
        outcome.problems.append(LinkProblem(
            "unreachable", f"[[links.kb]] {linked.alias!r}: reading it failed ({_os_reason(exc)}); nothing from "
                           "this partner was updated",
            "check the partner's files and permissions; links already known from it are kept, and the next "
            "sync retries"))
    if outcome.status == FAILED:
        outcome.inbound = _inbound_count(conn, linked.id)  # the rows known before, kept
    return outcome


def _scan(conn: sqlite3.Connection, manifest: Manifest, kb_root: Path, linked: LinkedKB, outcome: PartnerScan, *,
          force: bool, at: datetime) -> None:
    from pinakes.index.schema import transaction

    # Before anything of the partner is read: a change made during this scan moves it past this value.
    signal = partner_signal(partner_root(kb_root, linked))
    try:
        root, partner = open_partner(kb_root, linked)
    except PartnerError as exc:
        outcome.problems.append(exc.problem())
        return
    sidecars = _enumerate_sidecars(root, partner, outcome)
    if sidecars is None:
        return
    key = _sidecars_key(sidecars)
    stored_key = conn.execute("SELECT value FROM meta WHERE key = ?", (_KEY_META + linked.id,)).fetchone()
    ref = known_refs(conn).get(linked.id)
    if not force and stored_key is not None and stored_key[0] == key and ref is not None \
            and (ref[0], ref[1]) == (linked.alias, linked.path):
        with transaction(conn):
            _stamp(conn, linked, at, key, signal)
        outcome.status = UNCHANGED
        outcome.inbound = _inbound_count(conn, linked.id)
        _report_missing_targets(conn, manifest.kb.id, linked, outcome)
        return
    cursor = conn.execute("SELECT value FROM meta WHERE key = ?", (_CURSOR_META + linked.id,)).fetchone()
    walked = _read_sidecars(root, _from_cursor(sidecars, cursor[0] if cursor else None), linked,
                            manifest.kb.id, outcome)
    if walked is None:
        return  # the old rows are still true; no stamp, so the next sync retries
    with transaction(conn):
        if walked.read_ids is None:
            conn.execute("DELETE FROM links WHERE src_kb_id = ? AND origin = ?", (linked.id, ORIGIN))
        else:  # a bounded walk replaces what it read, and keeps the rest as known before
            conn.executemany("DELETE FROM links WHERE src_kb_id = ? AND origin = ? AND src_doc_id = ?",
                             [(linked.id, ORIGIN, doc_id) for doc_id in walked.read_ids])
        conn.executemany(
            "INSERT INTO links (src_kb_id, src_doc_id, dst_kb_id, dst_doc_id, rel, origin) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(linked.id, src, manifest.kb.id, dst, rel, ORIGIN) for src, dst, rel in walked.rows])
        # A bounded walk stores no key: the next due scan reads on rather than trusting a part.
        _stamp(conn, linked, at, key if walked.read_ids is None else None, signal)
        if walked.stopped_after is None:
            conn.execute("DELETE FROM meta WHERE key = ?", (_CURSOR_META + linked.id,))
        else:
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                         "value = excluded.value", (_CURSOR_META + linked.id, walked.stopped_after))
    outcome.status = SCANNED
    outcome.sidecars_read = walked.sidecars_read
    outcome.discarded = walked.discarded
    outcome.inbound = _inbound_count(conn, linked.id)
    _report_missing_targets(conn, manifest.kb.id, linked, outcome)


def fresh_outcome(conn: sqlite3.Connection, linked: LinkedKB) -> PartnerScan:
    """A partner within its window: reported, never read, with when it is next due."""
    ref = known_refs(conn).get(linked.id)
    stamp = parse_stamp(ref[2] if ref else None)
    return PartnerScan(alias=linked.alias, kb_id=linked.id, status=FRESH, inbound=_inbound_count(conn, linked.id),
                       last_scan=stamp.isoformat(timespec="seconds") if stamp else None,
                       next_scan=(stamp + FRESHNESS_WINDOW).isoformat(timespec="seconds") if stamp else None)


def _enumerate_sidecars(root: Path, partner: Manifest, outcome: PartnerScan) -> list[FileState] | None:
    """Every sidecar beside a document under the partner's own [sources], with its stat; None (and a
    problem) when any folder could not be listed: a partial walk would read as deleted links."""
    from pinakes.sources.left_out import SKIP_TYPE_LEFT_OUT
    from pinakes.sources.walk import SKIP_EXCLUDED, SKIP_NO_EXTRACTOR, SKIP_SYMLINK, SourceRootError, walk

    where = f"[[links.kb]] {outcome.alias!r}"
    remedy = (f"check the permissions of the partner's folders ({root}); the links already known from it are "
              "kept, and the next sync retries")
    try:
        _check_source_roots(root, partner)
        found = walk(root, partner.sources, {}, hash_contents=False)
    except OSError as exc:
        outcome.problems.append(LinkProblem(
            "unreachable", f"{where}: cannot list its sources ({_os_path(exc, root)}: {_os_reason(exc)}); "
                           "nothing from this partner was updated", remedy))
        return None
    except SourceRootError as exc:  # refused by the partner's own sync too: never followed from here
        outcome.problems.append(LinkProblem(
            "unreachable", f"{where}: {exc.message}; nothing from this partner was updated",
            f"in the partner ({root}): {exc.remedy}"))
        return None
    # A skip other than a file passed over on purpose means something was not read (a folder that cannot
    # be listed, or whatever else a walk learns to refuse): then the walk is not complete.
    unlisted = [(path, why) for path, why in found.skipped if why not in (SKIP_EXCLUDED, SKIP_NO_EXTRACTOR,
                                                                         SKIP_SYMLINK)
                and not why.endswith(SKIP_TYPE_LEFT_OUT)]
    if unlisted:
        shown = "; ".join(f"{path or '.'}: {why}" for path, why in unlisted[:_SHOWN])
        more = f" (+{len(unlisted) - _SHOWN} more)" if len(unlisted) > _SHOWN else ""
        outcome.problems.append(LinkProblem(
            "unreachable", f"{where}: {counted(len(unlisted), 'path')} of its sources could not be read ({shown}{more}); "
                           "nothing from this partner was updated", remedy))
        return None
    return sorted(found.sidecars.values(), key=lambda state: state.path)


def _check_source_roots(root: Path, partner: Manifest) -> None:
    """A source root that is not there is an empty one (as in the partner's own sync); one that is
    there and cannot be looked at (permissions, a symbolic-link loop, I/O) fails the walk, which
    would otherwise pass it over as absent."""
    for source_root in partner.sources.roots:
        try:
            os.stat(root / source_root)
        except (FileNotFoundError, NotADirectoryError):
            continue


def _os_path(exc: OSError, root: Path) -> str:
    if not exc.filename:
        return str(root)
    try:
        return Path(os.fsdecode(exc.filename)).relative_to(root).as_posix() or "."
    except ValueError:
        return os.fsdecode(exc.filename)


def _sidecars_key(sidecars: Iterable[FileState]) -> str:
    """What the partner's sidecars look like to stat(): any edit moves the ctime, which nobody can set."""
    import xxhash

    digest = xxhash.xxh3_128()
    for state in sidecars:
        digest.update(f"{state.path}\0{state.size}\0{state.mtime_ns}\0{state.ctime_ns}\0{state.inode}\n"
                      .encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _read_sidecars(root: Path, sidecars: list[FileState], linked: LinkedKB, own_id: str,
                   outcome: PartnerScan) -> _Walked | None:
    """Read the sidecars with the partner's id as owner, in path order, until one of the scan's
    bounds is reached; None (and a problem) if any one read fails."""
    from pinakes.errors import FilesystemError
    from pinakes.sidecar import read_sidecar

    rows: list[tuple[str, str, str]] = []
    read_ids: list[str] = []
    links_read = bytes_read = discarded = 0
    last_read = ""
    for state in sidecars:
        if links_read >= MAX_LINKS_READ or bytes_read + state.size > MAX_SIDECAR_BYTES_READ:
            outcome.problems.append(_capped(linked, len(read_ids), len(sidecars), links_read, bytes_read))
            return _Walked(rows=rows, sidecars_read=len(read_ids), discarded=discarded, read_ids=read_ids,
                           stopped_after=last_read)
        relative = last_read = state.path
        try:
            sidecar = read_sidecar(root / relative, kb_id=linked.id)
        except PinakesError as exc:
            # Unreadable, or gone since the walk listed it (the partner changed under the scan).
            unreadable = isinstance(exc, FilesystemError) or not os.path.lexists(root / relative)
            outcome.problems.append(LinkProblem(
                "unreachable" if unreadable else "unparseable",
                f"[[links.kb]] {linked.alias!r}: {relative} {'cannot be read' if unreadable else 'does not parse'} "
                f"({exc.message.splitlines()[0]}); nothing from this partner was updated",
                f"fix that sidecar in the partner KB ({root}); the inbound links known before are kept "
                "and the next sync retries"))
            return None
        read_ids.append(sidecar.id)
        links_read += len(sidecar.links)
        bytes_read += state.size
        for link in sidecar.links:
            if link.kb_id == own_id:
                rows.append((sidecar.id, link.doc_id, link.rel))
            else:
                discarded += 1  # a partial view of someone else's graph is worse than none
    return _Walked(rows=rows, sidecars_read=len(sidecars), discarded=discarded)


def _from_cursor(sidecars: list[FileState], cursor: str | None) -> list[FileState]:
    """The sidecars in path order, starting after `cursor` (where a bounded scan stopped) and wrapping."""
    if cursor is None:
        return sidecars
    after = next((index for index, state in enumerate(sidecars) if state.path > cursor), len(sidecars))
    return sidecars[after:] + sidecars[:after]


def _capped(linked: LinkedKB, read: int, total: int, links_read: int, bytes_read: int) -> LinkProblem:
    return LinkProblem(
        "capped",
        f"[[links.kb]] {linked.alias!r}: this scan read {read} of its {total} sidecars ({links_read} links, "
        f"{bytes_read / 2**20:.1f} MiB) and stopped at the reverse scan's bound ({MAX_LINKS_READ} links or "
        f"{MAX_SIDECAR_BYTES_READ // 2**20} MiB of sidecars per partner per scan); the inbound links known from "
        "the sidecars it did not read are kept as they were, and the next due scan reads on from there",
        "ask the partner's authors to slim the sidecars that carry thousands of links (`pnk unlink` there); "
        "`pnk doctor` in that KB lists its largest")


def _stamp(conn: sqlite3.Connection, linked: LinkedKB, at: datetime, key: str | None, signal: str) -> None:
    conn.execute(
        "INSERT INTO kb_refs (kb_id, alias, path, last_scan) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (kb_id) DO UPDATE SET alias = excluded.alias, path = excluded.path, "
        "last_scan = excluded.last_scan",
        (linked.id, linked.alias, linked.path, at.isoformat(timespec="microseconds")))
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_SIGNAL_META + linked.id, signal))
    if key is None:
        conn.execute("DELETE FROM meta WHERE key = ?", (_KEY_META + linked.id,))
        return
    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (_KEY_META + linked.id, key))


def _inbound_count(conn: sqlite3.Connection, kb_id: str) -> int:
    return conn.execute("SELECT COUNT(*) FROM links WHERE src_kb_id = ? AND origin = ?", (kb_id, ORIGIN)).fetchone()[0]


def _report_missing_targets(conn: sqlite3.Connection, own_id: str, linked: LinkedKB, outcome: PartnerScan) -> None:
    """Inbound rows whose target is no active document here: kept as edges, reported with a remedy
    (the first few by name, the rest counted in one more problem: a partner can hold thousands)."""
    where = ("FROM links l LEFT JOIN documents d ON d.id = l.dst_doc_id AND d.state = 'active' "
             "WHERE l.src_kb_id = ? AND l.origin = ? AND l.dst_kb_id = ? AND d.id IS NULL")
    params = (linked.id, ORIGIN, own_id)
    rows = conn.execute(f"SELECT l.src_doc_id, l.dst_doc_id, l.rel {where} "
                        f"ORDER BY l.src_doc_id, l.dst_doc_id, l.rel LIMIT {_SHOWN + 1}", params).fetchall()
    remedy = ("restore the document (or its sidecar, which holds the id) here, or ask the partner to fix the link "
              "(`pnk unlink` there)")
    for src, dst, rel in rows[:_SHOWN]:
        outcome.problems.append(LinkProblem(
            "missing-target",
            f"[[links.kb]] {linked.alias!r}: its document {src} links ({rel}) to {dst}, which is not an active "
            "document in this KB; the link is kept as unresolved", remedy))
    if len(rows) > _SHOWN:
        more = conn.execute(f"SELECT COUNT(*) {where}", params).fetchone()[0] - _SHOWN
        outcome.problems.append(LinkProblem(
            "missing-target", f"[[links.kb]] {linked.alias!r}: {more} more of its links point at no active "
                              "document in this KB; they are kept as unresolved (`pnk doctor` counts them)", remedy))


def unresolved_reason(kb_alias: str, doc_id: str) -> str:
    """Why a link target in this KB's own index does not resolve (traversal and doctor say the same)."""
    return f"{doc_id} is not an active document of KB {kb_alias} (deleted, never indexed here, or a wrong id)"
