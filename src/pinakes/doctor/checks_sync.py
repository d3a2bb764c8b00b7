"""Doctor: sync state — the lock, failures, coverage of the files on disk, orphaned sidecars, ID
collisions, git hooks."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.display import printable
from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.index_reading import readable_index
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths
from pinakes.wording import counted, noun_for

if TYPE_CHECKING:
    from pinakes.sources.walk import WalkResult


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.kb import SIDECAR_SUFFIX
    from pinakes.sync.lock import read_holder

    assert ctx.kb_root is not None
    paths = KBPaths(ctx.kb_root)
    try:
        holder = read_holder(paths.lock)
    except PinakesError as exc:
        yield Check("sync lock", "FAIL", exc.message, exc.remedy)
    else:
        if holder is None:
            yield Check("sync lock", "OK", "not held")
        else:
            yield Check("sync lock", "WARN", f"held by {holder.describe()}",
                        "if that sync is not running, the next `pnk sync` reclaims it (same host) or "
                        "run `pnk sync --force-unlock`")
    from pinakes.manifest import load_manifest
    from pinakes.sources.walk import SourceRootError, walk

    manifest = load_manifest(paths.manifest)
    failed = yield from _failures(paths, manifest.sources.exclude)
    try:
        found: WalkResult = walk(ctx.kb_root, manifest.sources, {}, hash_contents=False)
    except SourceRootError as exc:
        yield Check("source roots", "FAIL", exc.message, exc.remedy)
    else:
        yield from _coverage(paths, found, failed)
        yield from _drift(paths, found, verify=ctx.verify)
        yield from _sidecars(ctx, SIDECAR_SUFFIX, manifest.kb.id, found)
        yield _temp_files(paths, found)
    yield from _hooks(ctx)


def _temp_files(paths: KBPaths, found: WalkResult) -> Check:
    """Temp files of atomic writes that were killed (under the sources, beside the manifest, or in
    `.pinakes/`, where a killed vectors step leaves a temp as large as the vector file and a piece's
    temp): harmless, never indexed, removed by the next write into their folder (every sync sweeps
    `.pinakes/` when it takes its lock). A temp its writer still holds (a sync or `pnk watch`
    running now) is being written: counted apart, never listed for `rm` (`atomic.is_abandoned`, the
    sweep's lock test)."""
    import os

    from pinakes.atomic import is_abandoned, is_temp_name

    def temps_in(folder: Path) -> list[str]:
        try:
            return sorted(name for name in os.listdir(folder) if is_temp_name(name))
        except OSError:
            return []

    in_state = [f"{paths.state_dir.name}/{name}" for name in temps_in(paths.state_dir)]
    every = sorted(set(found.temp_files) | set(temps_in(paths.root))) + in_state
    leftovers = [path for path in every if is_abandoned(paths.root / path)]
    live = len(every) - len(leftovers)
    being_written = (f"; {counted(live, 'temp file')} being written by a `pnk` running now (left alone)"
                     if live else "")
    in_state = [path for path in in_state if path in leftovers]
    if not leftovers:
        return Check("temp files", "OK", f"no temp file left by an interrupted write{being_written}")
    shown = ", ".join(printable(path) for path in leftovers[:5])
    more = f" (+{len(leftovers) - 5} more)" if len(leftovers) > 5 else ""
    held = sum(_size_of(paths.root / path) for path in in_state)
    state_note = (f"; {len(in_state)} in {paths.state_dir.name}/ ({held / 1e6:,.1f} MB, a killed sync's or "
                  "command's: the vector file's or a piece of it are the large ones)" if in_state else "")
    swept = f" (every `pnk sync` sweeps {paths.state_dir.name}/ as it starts)" if in_state else ""
    return Check("temp files", "WARN",
                 f"{counted(len(leftovers), 'temp file')} left by a write that was killed: {shown}{more}{state_note}"
                 f"{being_written}; the files they were writing are whole (the old or the new version), and no "
                 "sync indexes them",
                 f"the next `pnk` command that writes into the same folder removes them{swept}; or delete them "
                 f"(`rm` each path listed{', while no sync runs' if in_state else ''})")


def _size_of(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _failures(paths: KBPaths, exclude: tuple[str, ...]) -> Generator[Check, None, set[str]]:
    """The failures the last sync recorded; returns their paths. A file whose extraction failed (a
    binary named `.md`, a damaged PDF) fails every sync until it changes, so its remedy is the
    `[sources] exclude` line that leaves it out, not another `pnk sync`."""
    from pinakes.pipeline.report import Failure, exclusion_for

    with readable_index(paths.index_db) as conn:
        if conn is None:
            return set()
        rows = conn.execute("SELECT path, stage, error FROM failures ORDER BY path").fetchall()
    if not rows:
        yield Check("sync failures", "OK", "the last completed sync recorded no failures")
        return set()
    listed = "; ".join(f"{path} [{stage}]: {error.splitlines()[0]}" for path, stage, error in rows[:5])
    more = f" (+{len(rows) - 5} more)" if len(rows) > 5 else ""
    remedy = "fix the files named and run `pnk sync`"
    exclusion = exclusion_for([Failure(*row) for row in rows], exclude)
    if exclusion is not None:
        remedy += ("; a file that cannot be extracted fails every sync until it is fixed: to leave it out "
                   f"instead, set under [sources] in pinakes.toml: {exclusion}")
    yield Check("sync failures", "FAIL",
                f"{counted(len(rows), 'document')} failed the last sync: {listed}{more}", remedy)
    return {path for path, _stage, _error in rows}


def _coverage(paths: KBPaths, found: WalkResult, failed: set[str]) -> Iterator[Check]:
    """The files on disk against the index: every document indexed, every skip with its reason.
    A file the last sync failed on is reported, with its remedy, by the failures check: another
    `pnk sync` is the remedy only for the others."""
    on_disk = set(found.docs) | set(found.unreadable)
    skipped: dict[str, int] = defaultdict(int)
    for _path, reason in found.skipped:
        skipped[reason] += 1
    skips = "; ".join(f"{count} {reason}" for reason, count in sorted(skipped.items()))
    skip_note = f"; skipped (not documents): {skips}" if skips else ""
    if not paths.index_db.exists():
        yield Check("coverage", "WARN", f"{counted(len(on_disk), 'document')} on disk, none indexed yet{skip_note}",
                    "pnk sync")
        return
    with readable_index(paths.index_db) as conn:
        if conn is None:
            return
        indexed = {row[0] for row in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    missing = sorted(on_disk - indexed)
    gone = sorted(indexed - on_disk)
    summary = (f"{len(on_disk & indexed)} of {counted(len(on_disk), 'document')} on disk "
               f"{'is' if len(on_disk) == 1 else 'are'} indexed{skip_note}")
    if not missing and not gone:
        yield Check("coverage", "OK", summary)
        return
    problems: list[str] = []
    if missing:
        problems.append(f"not indexed: {', '.join(printable(p) for p in missing[:5])}"
                        + (f" (+{len(missing) - 5} more)" if len(missing) > 5 else ""))
    if gone:
        problems.append(f"indexed but no longer on disk: {', '.join(printable(p) for p in gone[:5])}"
                        + (f" (+{len(gone) - 5} more)" if len(gone) > 5 else ""))
    unsynced = [path for path in missing if path not in failed] or gone
    yield Check("coverage", "WARN", f"{summary}; " + "; ".join(problems),
                "pnk sync (`pnk status` lists what it would do)" if unsynced
                else "see the remedy of `sync failures`: each file not indexed failed the last sync")


# Documents doctor re-hashes when not asked to --verify them all: enough to catch drift that touches
# many files (an rsync --inplace of the tree) without reading a large KB on every doctor.
DRIFT_SAMPLE = 32


def _drift(paths: KBPaths, found: WalkResult, *, verify: bool) -> Iterator[Check]:
    """Re-hash documents and compare with the hashes the index holds: content that changed without
    the walk noticing (or without a sync since) is stale in the index."""
    from pinakes.sources.walk import hash_file

    with readable_index(paths.index_db) as conn:
        if conn is None:
            return
        indexed = dict(conn.execute("SELECT path, content_hash FROM documents WHERE state = 'active'"))
    candidates = sorted(path for path in found.docs if path in indexed)
    if not verify and len(candidates) > DRIFT_SAMPLE:
        step = len(candidates) / DRIFT_SAMPLE
        candidates = [candidates[int(n * step)] for n in range(DRIFT_SAMPLE)]
    stale: list[str] = []
    for path in candidates:
        try:
            if hash_file(paths.root / path) != indexed[path]:
                stale.append(path)
        except OSError:
            continue  # unreadable files are the coverage check's and sync's to report
    documents = noun_for(len(candidates), "indexed document")
    scope = f"all {len(candidates)}" if verify else f"a sample of {len(candidates)}"
    if not stale:
        yield Check("content drift", "OK", f"{scope} {documents} re-hashed: the index matches the files"
                    + ("" if verify else " (`pnk doctor --verify` checks every one)"))
        return
    shown = ", ".join(printable(p) for p in stale[:5]) + (f" (+{len(stale) - 5} more)" if len(stale) > 5 else "")
    yield Check("content drift", "WARN", f"{len(stale)} of {scope} {documents} changed on disk since "
                f"they were indexed: {shown}", "pnk sync (a file edited in place is re-read by it)")


def _sidecars(ctx: DoctorContext, suffix: str, kb_id: str, result: WalkResult) -> Iterator[Check]:
    """Orphans and ID collisions, read from the committed files (the index may be absent)."""
    from pinakes.sidecar import read_sidecar

    assert ctx.kb_root is not None
    if result.orphan_sidecars:
        shown = ", ".join(result.orphan_sidecars[:5])
        yield Check("orphaned sidecars", "WARN",
                    f"{counted(len(result.orphan_sidecars), 'sidecar')} with no document beside "
                    f"{'it' if len(result.orphan_sidecars) == 1 else 'them'}: {shown}",
                    "move each next to its document (keeps the ID), or, if the document is gone, `pnk doctor --prune`")
    else:
        yield Check("orphaned sidecars", "OK", "every sidecar sits beside its document")
    owners: dict[str, list[str]] = defaultdict(list)
    unreadable: list[str] = []
    for doc_path in result.sidecars:
        try:
            sidecar = read_sidecar(ctx.kb_root / (doc_path + suffix), kb_id=kb_id)
        except PinakesError as exc:
            unreadable.append(f"{doc_path}{suffix}: {exc.message}")
            continue
        owners[sidecar.id].append(doc_path + suffix)
    collisions = {doc_id: paths for doc_id, paths in owners.items() if len(paths) > 1}
    if collisions:
        listed = "; ".join(f"{doc_id} in {', '.join(paths)}" for doc_id, paths in collisions.items())
        yield Check("ID collisions", "FAIL", listed,
                    "delete the copied sidecar so the copy gets its own ID on the next sync")
    else:
        yield Check("ID collisions", "OK", f"{counted(len(owners), 'sidecar')}, every ID unique")
    if unreadable:
        yield Check("sidecars", "FAIL", "; ".join(unreadable[:5]), "fix the YAML at the line named")


def _hooks(ctx: DoctorContext) -> Iterator[Check]:
    """Each hook is run in probe mode: OK means it executes, is current, and resolves this KB and a pnk."""
    from pinakes.hooks import hooks_status

    assert ctx.kb_root is not None
    status = hooks_status(ctx.kb_root)
    if status is None:
        yield Check("git hooks", "WARN", "the KB is not a git repository: nothing keeps it fresh",
                    "git init and `pnk install-hooks`, or run `pnk sync` by hand or from cron")
        return
    problems = {name: state for name, state in status.items() if not state.ok}
    if not problems:
        runs = sorted({state.pnk for state in status.values() if state.pnk})
        yield Check("git hooks", "OK", "pre-commit, post-commit and post-merge installed; probed, they sync "
                    f"this KB with {', '.join(runs)} from this environment (and force the free extractor)")
        return
    if all(state.problem == "missing" for state in problems.values()):
        yield Check("git hooks", "WARN", f"not installed: {', '.join(problems)}", "pnk install-hooks")
        return
    # FAIL where git itself breaks (a hook that cannot start, an old hook whose paths are gone: every
    # commit fails); WARN where commits go through but the KB is not kept fresh.
    failing = any(state.problem in ("old-style-broken", "does-not-run") for state in problems.values())
    detail = "; ".join(f"{name}: {state.detail}" for name, state in problems.items())
    if all(state.problem == "no-pnk" for state in problems.values()):
        remedy = ("activate the environment that has pinakes before committing (or put `pnk` on PATH, "
                  "e.g. `pipx install pinakes-kb`)")
    else:
        remedy = "pnk install-hooks (rewrites the hooks in place; a hook you wrote is kept as <hook>.local)"
    yield Check("git hooks", "FAIL" if failing else "WARN", detail, remedy)
