"""`pnk watch`: follow a KB's source roots and sync what changed (the `[watch]` extra: watchfiles).

    start    one sync (whatever changed while nobody watched), then follow the roots
    events   the OS's file notifications (inotify, FSEvents, ReadDirectoryChangesW, through the Rust
             `notify` crate that watchfiles wraps), kept only when a sync could see them
             (watch_changes.py: never `.pinakes/`, `.git/`, temp files, unreadable types)
    settle   once the tree has been quiet for `debounce_ms` (or changes kept coming for MAX_DEFER_S),
             one sync for everything pending: an editor's atomic save (temp file + rename), a
             `git checkout` of a thousand files and a folder move each end in one sync
    own      the sidecars that sync minted come back as events and are dropped (OwnWrites)

Every sync is the ordinary `run_sync` under the ordinary lock: when a hook or a manual sync holds
it, the watcher waits for it (never fails), then syncs what is still pending. Like the git hooks it
forces the free extractor (a watcher has nobody to confirm a spend), and it keeps the embedding
model loaded between syncs (a local model; a remote or Ray one is run_sync's as always).

What the watcher survives, and says so once (an event), is any state of the KB a person can fix
while it runs: the manifest made invalid (no sync until it loads again), the KB unmounted, moved or
deleted (it waits for the folder to be back at the same path: a moved KB is not followed), a source
root removed or created (the watch is re-made), a sync that fails (named; retried on the next change
or after RETRY_S). Ctrl-C while idle stops at once; during a sync it lets that sync finish (the
files it was given; their documents are committed one by one), and a second Ctrl-C stops at once
(each document already committed is kept, the one in flight is rolled back and synced next time).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pinakes.errors import PinakesError, UsageError
from pinakes.kb import KBPaths
from pinakes.sync.lock import held_by_live_process
from pinakes.sync.watch_changes import ChangeFilter, OwnWrites

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder
    from pinakes.manifest import Manifest
    from pinakes.pipeline.report import SyncReport
    from pinakes.sync import SyncOptions

# How long the tree must stay quiet before the pending changes are synced (the default of --debounce).
DEFAULT_DEBOUNCE_MS = 300
# Changes that never stop (a log written every 100 ms) are synced at least this often.
MAX_DEFER_S = 10.0
# While idle: how often the KB itself is checked (there, its manifest changed, a root appeared).
HEALTH_CHECK_MS = 1000
# After a sync failed: when it is tried again if nothing changes meanwhile.
RETRY_S = 30.0
# While another process holds the sync lock: how often to look whether it is gone.
LOCK_POLL_MS = 250
# The notification thread's step (watchfiles): how often it looks for events and for a signal.
STEP_MS = 50
# The extractor a watcher syncs with: the free one, as the git hooks do (hooks.HOOK_COMMANDS).
FREE_EXTRACTOR = "pypdfium2"
# Paths a "sync" event lists per kind before it says how many more there were.
EVENT_PATHS = 20

Changes = set[tuple[int, str]]
Waited = Changes | Literal["signal", "stop", "timeout"]


@dataclass(frozen=True)
class WatchOptions:
    debounce_ms: int = DEFAULT_DEBOUNCE_MS
    index_only: bool = False  # never write into the source tree (no sidecars minted)
    offline: bool | None = None
    poll: bool = False  # poll the roots instead of OS notifications (network file systems)


@dataclass(frozen=True)
class WatchEvent:
    """One thing the watcher reports: `kind` is watching | sync | waiting | error | gone | back |
    stopping | stopped; `message` is the line a person reads; `data` what `--json` adds."""

    kind: str
    message: str
    data: dict[str, object] = field(default_factory=dict[str, object])

    def to_dict(self) -> dict[str, object]:
        return {"event": self.kind, "at": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "message": self.message, **self.data}


class ChangeSource(Protocol):
    """Where events come from: watchfiles' RustNotify, or a test's stand-in."""

    def watch(self, debounce_ms: int, step_ms: int, timeout_ms: int,
              stop_event: threading.Event | None) -> Waited: ...

    def close(self) -> None: ...


SourceFactory = Callable[[list[str], bool], ChangeSource]
SyncRunner = Callable[..., "SyncReport"]


def notify_source(paths: list[str], poll: bool) -> ChangeSource:
    """watchfiles' Rust notifier over `paths` (recursive)."""
    try:
        from watchfiles._rust_notify import RustNotify
    except ImportError as exc:
        from pinakes.distribution import pip_install

        raise UsageError("`pnk watch` needs the watchfiles package, which is not installed",
                         remedy=f"install the [watch] extra: {pip_install(('watch',))}") from exc
    try:
        return RustNotify(paths, False, poll, 1000, True, True)
    except OSError as exc:
        raise PinakesError(f"cannot watch {', '.join(paths)}: {exc}",
                           remedy="on Linux, raise fs.inotify.max_user_watches (sysctl) if the limit was "
                                  "reached; on a network file system, run `pnk watch --poll`") from exc


class Watcher:
    """Follows one KB and syncs what changes; `run()` returns when stopped (Ctrl-C or `stop`)."""

    def __init__(self, root: Path, options: WatchOptions | None = None, *,
                 emit: Callable[[WatchEvent], None], embedder: Embedder | None = None,
                 stop: threading.Event | None = None, source_factory: SourceFactory = notify_source,
                 sync: SyncRunner | None = None):
        from pinakes.manifest import load_manifest

        self.paths = KBPaths(root)
        self.options = options or WatchOptions()
        self.emit = emit
        self.stop = stop
        self._source_factory = source_factory
        self._sync_runner = sync
        self._injected_embedder = embedder
        self._embedder: Embedder | None = embedder
        self._embedder_for: object = None  # the [embedding] section the kept model was made for
        self.manifest: Manifest | None = load_manifest(self.paths.manifest)  # a bad one stops the start
        self._manifest_stamp = _stamp(self.paths.manifest)
        self._roots_stamp = self._stamp_roots()
        self._source: ChangeSource | None = None
        self._filter = ChangeFilter(self.paths.root, self.manifest.sources)
        self._own = OwnWrites()
        self._pending: set[str] = set()
        self._pending_since: float | None = None
        self._retry_at: float | None = None
        self._settling: tuple[object, float] | None = None  # a changed manifest or root, and since when
        self._stopping = False
        self.syncs = 0

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> int:
        try:
            self._open_source()
            self.emit(WatchEvent("watching", f"watching {self.paths.root} ({self._describe_roots()}); "
                                 "Ctrl-C to stop", {"kb": str(self.paths.root), "roots": self._watched_roots()}))
            self._sync([])  # what changed while nobody watched
            while not self._stopping:
                self._step()
        except KeyboardInterrupt:
            pass
        finally:
            self._close_source()
        self.emit(WatchEvent("stopped", "stopped", {"syncs": self.syncs}))
        return 0

    def _step(self) -> None:
        if self._source is None:  # the KB is gone, or no source root exists yet: look again later
            if self._sleep(HEALTH_CHECK_MS):
                self._check_kb()
            return
        timeout = self.options.debounce_ms if self._pending or self._settling else HEALTH_CHECK_MS
        try:
            got = self._source.watch(self.options.debounce_ms, STEP_MS, timeout, self.stop)
        except (OSError, RuntimeError) as exc:  # the watched folders went away under the notifier
            self._close_source()
            if not self._check_kb():
                self.emit(WatchEvent("error", f"the file watch stopped ({exc}); watching again",
                                     {"error": str(exc)}))
            return
        if got in ("signal", "stop"):
            self._stopping = True
            return
        if got == "timeout":
            if not self._check_kb():
                return
            now = time.monotonic()
            if self._pending or (self._retry_at is not None and now >= self._retry_at):
                self._sync_pending()
            return
        self._take(got)
        if self._pending_since is not None and time.monotonic() - self._pending_since >= MAX_DEFER_S:
            self._sync_pending()

    def _take(self, changes: Changes) -> None:
        paths = self._own.drop_own(self._filter.relevant(path for _kind, path in changes))
        # The manifest is the health check's (by its stamp, on every timeout): its event may arrive
        # after the check already synced for it, and would sync again for nothing.
        paths.discard(str(self.paths.manifest))
        if paths and not self._pending:
            self._pending_since = time.monotonic()
        self._pending |= paths

    def _sync_pending(self) -> None:
        if self.manifest is None:
            return  # invalid: said when it broke; a fix is a manifest change, which checks it again
        trigger = sorted(self._pending)
        self._pending.clear()
        self._pending_since = None
        self._sync(trigger)

    # -- one sync ------------------------------------------------------------------------------

    def _sync(self, trigger: list[str]) -> None:
        from pinakes.sync import SyncOptions

        options = SyncOptions(index_only=self.options.index_only, quiet=True, offline=self.options.offline,
                              extract_backend=FREE_EXTRACTOR)
        self._retry_at = None
        while True:
            started = time.monotonic()
            try:
                with _interrupt_after_sync(self) as interrupted:
                    report = self._run_sync(options)
            except PinakesError as exc:
                self._retry_at = time.monotonic() + RETRY_S
                self.emit(WatchEvent("error", f"sync failed: {exc.render()}", {"error": exc.to_dict()}))
                return
            if report.skipped_reason is None:
                break
            self.emit(WatchEvent("waiting", f"waiting: {report.skipped_reason}", {"reason": report.skipped_reason}))
            if not self._wait_for_lock():
                return
        self.syncs += 1
        self._own.remember(self.paths.root, report.sidecars_written)
        shown = [rel for path in trigger if (rel := self._filter.relative(path)) is not None]
        self.emit(_sync_event(report, len(trigger), shown, time.monotonic() - started))
        if interrupted.is_set():
            self._stopping = True

    def _run_sync(self, options: SyncOptions) -> SyncReport:
        from pinakes.sync.engine import run_sync

        runner = self._sync_runner or run_sync
        return runner(self.paths.root, options, embedder=self._model())

    def _model(self) -> Embedder | None:
        """The model kept across syncs: a local one, made once per [embedding] section (its weights
        load on the first vector a sync needs). None lets run_sync choose (remote, Ray)."""
        if self._injected_embedder is not None:
            return self._injected_embedder
        from pinakes.embed.connect import connects

        manifest = self.manifest
        if manifest is None or manifest.embedding.remote is not None or connects(manifest.embedding.executor):
            return None
        if self._embedder is None or self._embedder_for != manifest.embedding:
            from pinakes import embed
            from pinakes.embed import check_max_tokens
            from pinakes.embed.deferred import embedder_for

            embedder = embedder_for(manifest.embedding, offline=self.options.offline, load=embed.load_embedder)
            try:
                check_max_tokens(manifest.chunking.max_tokens, embedder)
            except PinakesError as exc:
                exc.path = self.paths.manifest
                raise
            self._embedder, self._embedder_for = embedder, manifest.embedding
        return self._embedder

    def _wait_for_lock(self) -> bool:
        """Wait while another live process holds the sync lock, gathering changes meanwhile; False
        when stopped while waiting. (A lock whose holder died is the next sync's to reclaim.)"""
        while held_by_live_process(self.paths.lock):
            if self._source is None:
                if not self._sleep(LOCK_POLL_MS):
                    return False
                continue
            got = self._source.watch(LOCK_POLL_MS, STEP_MS, LOCK_POLL_MS, self.stop)
            if got in ("signal", "stop"):
                self._stopping = True
                return False
            if got != "timeout":
                self._take(got)
        return True

    # -- the KB itself -------------------------------------------------------------------------

    def _check_kb(self) -> bool:
        """Whether the KB is there and its manifest loads; re-reads the manifest (and re-makes the
        watch) when it changed, and says once when the KB went away or came back."""
        stamp = _stamp(self.paths.manifest)
        if stamp is None:
            if self._source is not None or self._manifest_stamp is not None:
                self._close_source()
                self._manifest_stamp = None
                self.emit(WatchEvent("gone", f"the KB at {self.paths.root} is not there (unmounted, moved or "
                                     "deleted); waiting for it to come back at this path (Ctrl-C to stop)",
                                     {"kb": str(self.paths.root)}))
            return False
        roots = self._stamp_roots()
        if stamp == self._manifest_stamp and roots == self._roots_stamp:
            self._settling = None
            return self.manifest is not None
        # Acted on once it has held for the debounce: a writer that is not atomic leaves a
        # half-written manifest between its writes, which may even parse.
        now, seen = time.monotonic(), (stamp, roots)
        if self._settling is None or self._settling[0] != seen:
            self._settling = (seen, now)
            return False
        if now - self._settling[1] < self.options.debounce_ms / 1000:
            return False
        self._settling = None
        came_back = self._manifest_stamp is None
        self._manifest_stamp = stamp
        if not self._reload_manifest():
            return False
        self._roots_stamp = self._stamp_roots()  # the roots of the manifest just read
        if came_back:
            self.emit(WatchEvent("back", f"the KB at {self.paths.root} is back", {"kb": str(self.paths.root)}))
        self._close_source()
        self._open_source()
        self._pending.add(str(self.paths.manifest))  # for the event's trigger
        self._sync_pending()
        return False  # this check synced already

    def _reload_manifest(self) -> bool:
        from pinakes.manifest import load_manifest

        try:
            manifest = load_manifest(self.paths.manifest)
        except PinakesError as exc:
            if self.manifest is not None or self._source is None:
                self.emit(WatchEvent("error", f"{exc.render()}\nno sync until it loads again; still watching",
                                     {"error": exc.to_dict()}))
            self.manifest = None
            return False
        self.manifest = manifest
        self._filter = ChangeFilter(self.paths.root, manifest.sources)
        return True

    def _stamp_roots(self) -> tuple[tuple[str, int | None], ...]:
        """Each watched root folder and its inode (None: not there), so one made or removed is seen."""
        if self.manifest is None:
            return ()
        return tuple((path, _inode(path)) for path in self._root_dirs(self.manifest))

    def _root_dirs(self, manifest: Manifest) -> list[str]:
        root = str(self.paths.root)
        dirs = [root if source_root in ("", ".") else os.path.join(root, source_root)
                for source_root in manifest.sources.roots]
        return sorted(set(dirs))

    def _watched_roots(self) -> list[str]:
        if self.manifest is None:
            return []
        return [path for path in self._root_dirs(self.manifest) if os.path.isdir(path)]

    def _describe_roots(self) -> str:
        roots = self.manifest.sources.roots if self.manifest is not None else ()
        return "roots: " + ", ".join(roots) if roots else "no source roots"

    def _open_source(self) -> None:
        watched = self._watched_roots()
        self._source = self._source_factory(watched, self.options.poll) if watched else None

    def _close_source(self) -> None:
        if self._source is not None:
            with contextlib.suppress(Exception):
                self._source.close()
            self._source = None

    def _sleep(self, milliseconds: int) -> bool:
        """Sleep; False when stopped meanwhile."""
        if self.stop is not None:
            if self.stop.wait(milliseconds / 1000):
                self._stopping = True
                return False
            return True
        time.sleep(milliseconds / 1000)
        return True


def _sync_event(report: SyncReport, changed: int, shown: list[str], seconds: float) -> WatchEvent:
    """`changed`: how many paths the events named; `shown`: the first of them, KB-relative."""
    data = report.to_dict()
    data["skipped"] = len(report.skipped)  # every skipped path, on every sync, would drown the events
    if report.noop:
        message = f"synced in {seconds:.2f}s: nothing changed"
    else:
        parts = [f"{report.indexed} indexed"]
        parts += [f"{len(found)} {kind}" for kind, found in (("moved", report.renamed), ("deleted", report.deleted),
                                                            ("sidecars written", report.sidecars_written)) if found]
        parts += [f"{len(report.failures)} failed"] if report.failures else []
        message = f"synced in {seconds:.2f}s: " + ", ".join(parts)
    message += "".join(f"\n  warning: {warning}" for warning in report.warnings)
    message += "".join(f"\n  failed: {failure.path} [{failure.stage}]: {failure.error.splitlines()[0]}"
                       for failure in report.failures[:EVENT_PATHS])
    return WatchEvent("sync", message, {"ok": report.ok, "noop": report.noop, "seconds": round(seconds, 3),
                                        "trigger": {"paths": changed, "shown": shown[:EVENT_PATHS]}, "report": data})


@contextlib.contextmanager
def _interrupt_after_sync(watcher: Watcher) -> Generator[threading.Event]:
    """During a sync, the first Ctrl-C lets it finish (and then stops the watcher); a second one
    interrupts it. Only the main thread can take signals: elsewhere (a test's thread) nothing changes."""
    interrupted = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield interrupted
        return

    def on_interrupt(signum: int, frame: object) -> None:
        if interrupted.is_set():
            raise KeyboardInterrupt
        interrupted.set()
        watcher.emit(WatchEvent("stopping", "finishing the sync in flight, then stopping (Ctrl-C again to stop "
                                "at once: what is committed is kept)"))

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield interrupted
    finally:
        signal.signal(signal.SIGINT, previous)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _inode(path: str) -> int | None:
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_ino if os.path.isdir(path) else None
