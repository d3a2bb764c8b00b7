"""`pnk watch` (sync/watch.py): real file operations on a real KB, the real notifier (watchfiles'
RustNotify over inotify), the real sync with the fake embedder, and the count of syncs each
operation causes. The watcher runs on a thread of the test process; a `stop` event ends it."""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.extract.source_types import DEFAULT_SOURCE_TYPES
from pinakes.manifest import load_manifest
from pinakes.sync.watch import Watcher, WatchEvent, WatchOptions
from pinakes.sync.watch_changes import ChangeFilter
from tests.test_serve_helpers import make_kb, manifest_fake_embedder

pytest.importorskip("watchfiles")

# How long after a sync the test waits to be sure no second one follows: the debounce (300 ms),
# the notifier's step, and room for a loaded machine.
SETTLE_S = 2.5


class Harness:
    """A Watcher on a thread, its events in a queue."""

    def __init__(self, root: Path, **options: Any):  # WatchOptions' fields, passed through
        self.events: queue.Queue[WatchEvent] = queue.Queue()
        self.seen: list[WatchEvent] = []
        self.stop = threading.Event()
        self.watcher = Watcher(root, WatchOptions(**options), emit=self.events.put,
                               embedder=manifest_fake_embedder(root), stop=self.stop)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)

    def next(self, kind: str, timeout: float = 60.0) -> WatchEvent:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {kind!r} event in {timeout}s; saw {[e.kind for e in self.seen]}")
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                continue
            self.seen.append(event)
            if event.kind == kind:
                return event

    def quiet(self, seconds: float = SETTLE_S) -> list[WatchEvent]:
        """Every event within `seconds` (the test expects none of kind sync)."""
        deadline = time.monotonic() + seconds
        found: list[WatchEvent] = []
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                event = self.events.get(timeout=remaining)
            except queue.Empty:
                break
            self.seen.append(event)
            found.append(event)
        return found

    def one_sync(self) -> dict[str, object]:
        """The report of the next sync, after checking no second sync follows it."""
        event = self.next("sync")
        later = [e for e in self.quiet() if e.kind == "sync"]
        assert not later, f"a second sync followed: {[(e.message, e.data['trigger']) for e in later]} after {event.data['trigger']}"
        report = event.data["report"]
        assert isinstance(report, dict)
        return cast("dict[str, object]", report)


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[tuple[Path, Harness]]:
    root = make_kb(tmp_path / "kb", "watched", {"note.md": "# Note\n\nThe first version of a note.\n",
                                                "a/one.md": "# One\n\nAbout owls.\n",
                                                "a/two.md": "# Two\n\nAbout otters.\n"})
    harness = Harness(root)
    harness.thread.start()
    start = harness.next("sync")  # the start's sync indexes what is there
    assert start.data["ok"] is True
    harness.quiet(1.0)  # its own sidecars' events come back, and must not sync
    yield root, harness
    harness.stop.set()
    harness.thread.join(timeout=30)
    assert not harness.thread.is_alive()


def sync_count(harness: Harness) -> int:
    return sum(1 for event in harness.seen if event.kind == "sync")


def test_an_editors_atomic_save_is_one_sync(watching: tuple[Path, Harness]) -> None:
    root, harness = watching
    note = root / "docs" / "note.md"
    temp = note.with_name(".note.md.swx")  # written beside it, flushed, renamed over it
    with open(temp, "w", encoding="utf-8") as handle:
        handle.write("# Note\n\nThe second version of a note, saved atomically.\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, note)
    report = harness.one_sync()
    assert report["changed"] == ["docs/note.md"] and report["added"] == []


def test_a_folder_move_is_one_sync_that_keeps_every_id(watching: tuple[Path, Harness]) -> None:
    root, harness = watching
    os.rename(root / "docs" / "a", root / "docs" / "b")  # documents and their sidecars together
    report = harness.one_sync()
    assert sorted((move["from"], move["to"]) for move in cast("list[dict[str, str]]", report["renamed"])) == [
        ("docs/a/one.md", "docs/b/one.md"), ("docs/a/two.md", "docs/b/two.md")]
    assert report["added"] == [] and report["deleted"] == []


def test_the_sidecar_a_sync_mints_does_not_sync_again_but_a_person_editing_it_does(
        watching: tuple[Path, Harness]) -> None:
    root, harness = watching
    (root / "docs" / "new.md").write_text("# New\n\nA new note about herons.\n", encoding="utf-8")
    report = harness.one_sync()  # mints docs/new.md.pnk.yaml; its event comes back and is dropped
    assert report["added"] == ["docs/new.md"] and report["sidecars_written"] == ["docs/new.md.pnk.yaml"]
    sidecar = root / "docs" / "new.md.pnk.yaml"
    text = sidecar.read_text(encoding="utf-8")
    assert "tags: []" in text
    sidecar.write_text(text.replace("tags: []", "tags: [birds]"), encoding="utf-8")
    report = harness.one_sync()
    assert "docs/new.md" in [*cast("list[str]", report["changed"]), *cast("list[str]", report["metadata_refreshed"])], \
        report


def test_files_no_sync_could_read_never_sync(watching: tuple[Path, Harness]) -> None:
    root, harness = watching
    (root / "docs" / "note.md~").write_text("an editor's backup", encoding="utf-8")
    (root / "docs" / "notes.bin").write_bytes(b"\x00\x01")
    (root / ".pinakes" / "scratch").write_text("state", encoding="utf-8")
    (root / "outside.md").write_text("# Not under a source root\n", encoding="utf-8")
    assert [e for e in harness.quiet() if e.kind == "sync"] == []


def test_a_kb_whose_source_root_is_the_kb_itself_never_syncs_on_its_own_index_writes(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "rooted", {})
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace('roots = ["docs"]', 'roots = ["."]'),
                        encoding="utf-8")
    assert load_manifest(manifest).sources.roots == (".",)
    harness = Harness(root)
    harness.thread.start()
    try:
        harness.next("sync")
        harness.quiet(1.0)
        (root / "docs" / "fresh.md").write_text("# Fresh\n\nA note about wrens.\n", encoding="utf-8")
        report = harness.one_sync()  # index.db, its WAL, the lock and the sidecar all change: one sync
        assert report["added"] == ["docs/fresh.md"]
    finally:
        harness.stop.set()
        harness.thread.join(timeout=30)


def test_a_held_lock_is_waited_for_then_the_change_is_synced(watching: tuple[Path, Harness]) -> None:
    root, harness = watching
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock = root / ".pinakes" / "sync.lock"
        lock.write_text(f'{{"pid": {holder.pid}, "hostname": "{os.uname().nodename}", '
                        '"started": "2026-01-01T00:00:00+00:00"}', encoding="utf-8")
        (root / "docs" / "note.md").write_text("# Note\n\nEdited while another sync runs.\n", encoding="utf-8")
        waiting = harness.next("waiting")
        assert f"pid {holder.pid}" in waiting.message
        assert [e for e in harness.quiet(1.5) if e.kind == "sync"] == []
        lock.unlink()  # the other sync ends
        report = harness.one_sync()
        assert report["changed"] == ["docs/note.md"]
    finally:
        holder.kill()
        holder.wait()


def test_an_invalid_manifest_is_said_and_the_watch_goes_on_until_it_is_fixed(watching: tuple[Path, Harness]) -> None:
    root, harness = watching
    manifest = root / "pinakes.toml"
    good = manifest.read_text(encoding="utf-8")
    manifest.write_text(good + "\n[sources\n", encoding="utf-8")
    error = harness.next("error")
    assert "pinakes.toml" in error.message and "still watching" in error.message
    (root / "docs" / "note.md").write_text("# Note\n\nEdited while the manifest is broken.\n", encoding="utf-8")
    assert [e for e in harness.quiet() if e.kind == "sync"] == []
    manifest.write_text(good, encoding="utf-8")
    report = harness.one_sync()
    assert report["changed"] == ["docs/note.md"]


def test_a_kb_that_goes_away_is_waited_for_and_synced_when_it_is_back(watching: tuple[Path, Harness],
                                                                      tmp_path: Path) -> None:
    root, harness = watching
    away = tmp_path / "elsewhere"
    os.rename(root, away)  # unmounted, or moved away
    gone = harness.next("gone")
    assert str(root) in gone.message
    (away / "docs" / "note.md").write_text("# Note\n\nEdited while the KB was away.\n", encoding="utf-8")
    os.rename(away, root)
    harness.next("back")
    report = harness.one_sync()
    assert report["changed"] == ["docs/note.md"]


def isolation_workers() -> set[int]:
    """The live PDF-parser workers (extract/isolation.py) this process started, seen from /proc."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == os.getpid() and state not in ("Z", "X") and b"child_main" in cmdline:
            found.add(int(entry.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's prctl")
def test_two_watchers_on_short_lived_threads_both_extract_pdfs_with_one_worker(tmp_path: Path) -> None:
    """A watcher runs its syncs on the thread that runs it. The PDF parser's worker that the first
    watcher's thread started (Linux kills a child when the *thread* that started it ends) must
    outlive that thread and parse the second watcher's PDFs: no document fails, none is re-parsed
    by a worker started afresh."""
    pytest.importorskip("pypdfium2", reason="the PDF parser is the [pdf] extra (pypdfium2)")
    from pinakes.extract import isolation
    from tests.test_pdf_isolation import good_pdf

    isolation.shutdown()  # the worker under test is the first watcher's
    roots = [make_kb(tmp_path / name, name, {"note.md": f"# Note\n\nThe {name} note.\n"}) for name in ("one", "two")]
    for root, words in zip(roots, ("Lighthouse keeping", "Harbour dredging"), strict=True):
        (root / "docs" / "manual.pdf").write_bytes(good_pdf(words))
    first = Harness(roots[0])
    first.thread.start()
    try:
        report = first.next("sync").data["report"]
        assert isinstance(report, dict) and report["failures"] == [] and "docs/manual.pdf" in report["added"]
        worker = isolation_workers()
        assert len(worker) == 1
    finally:
        first.stop.set()
        first.thread.join(timeout=30)
    assert not first.thread.is_alive()
    time.sleep(0.3)  # what a parent-death signal would do is done by now
    second = Harness(roots[1])
    second.thread.start()
    try:
        report = second.next("sync").data["report"]
        assert isinstance(report, dict) and report["failures"] == [], report
        assert "docs/manual.pdf" in report["added"]
        (roots[1] / "docs" / "second.pdf").write_bytes(good_pdf("Tide tables"))
        report = second.one_sync()
        assert report["failures"] == [] and report["added"] == ["docs/second.pdf"], report
    finally:
        second.stop.set()
        second.thread.join(timeout=30)
    assert isolation_workers() == worker  # the first thread's worker parsed every PDF, and lives on


def test_the_change_filter_keeps_what_a_sync_reads(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "filtered", {"a.md": "# A\n"})
    (root / "docs" / "folder").mkdir()
    counts = ChangeFilter(root, load_manifest(root / "pinakes.toml").sources).counts
    assert counts(str(root / "docs" / "a.md"))
    assert counts(str(root / "docs" / "a.md.pnk.yaml"))
    assert counts(str(root / "docs" / "gone.pdf"))  # a deleted document
    assert counts(str(root / "docs" / "folder"))  # a folder made, moved in
    assert counts(str(root / "docs" / "gone-folder"))  # gone: it may have been a folder
    assert counts(str(root / "pinakes.toml"))
    assert not counts(str(root / "docs" / ".a.md.0123abcd.pnk.tmp"))  # an atomic write's temp file
    assert not counts(str(root / ".pinakes" / "index.db-wal"))
    assert not counts(str(root / "docs" / ".git" / "index"))
    assert not counts(str(root / "README.md"))  # not under a source root
    (root / "docs" / "a.md.swp").write_bytes(b"")
    assert not counts(str(root / "docs" / "a.md.swp"))  # no extractor reads it
    assert not counts(str(tmp_path / "other" / "a.md"))
    assert counts(str(root / "docs" / "page.html"))  # `pnk init` writes every type into [sources] types
    classic = replace(load_manifest(root / "pinakes.toml").sources, types=DEFAULT_SOURCE_TYPES)
    assert not ChangeFilter(root, classic).counts(str(root / "docs" / "page.html"))  # a type the KB never chose


@pytest.mark.heavy
def test_a_git_checkout_of_a_thousand_files_is_one_sync(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = make_kb(tmp_path / "kb", "checkout", {"readme.md": "# Readme\n\nThe main branch.\n"})

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args], cwd=root,
                       check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "main")
    git("checkout", "-q", "-b", "many")
    for number in range(1000):
        path = root / "docs" / f"d{number // 100}" / f"note{number:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Note {number}\n\nWords about topic {number}.\n", encoding="utf-8")
    git("add", "-A")
    git("commit", "-qm", "many")
    git("checkout", "-q", "main")
    harness = Harness(root)
    harness.thread.start()
    try:
        harness.next("sync")
        harness.quiet(1.0)
        git("checkout", "-q", "many")  # a thousand files appear, in ten new folders
        event = harness.next("sync", timeout=300)
        later = [e for e in harness.quiet(SETTLE_S + 2) if e.kind == "sync"]  # 1,000 sidecars come back
        assert not later, [e.message for e in later]
        report = event.data["report"]
        assert isinstance(report, dict) and len(cast("list[str]", report["added"])) == 1000
        assert len(cast("list[str]", report["sidecars_written"])) == 1000
    finally:
        harness.stop.set()
        harness.thread.join(timeout=60)


# -- the command, as a process: Ctrl-C and --json ----------------------------------------------------


def _watch_process(root: Path, scratch: Path, **env: str) -> subprocess.Popen[str]:
    from tests.kb_helpers import ctrl_c_reaches_it
    from tests.test_serve_helpers import offline_env

    return subprocess.Popen([sys.executable, "-m", "pinakes", "-C", str(root), "watch", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches_it,
                            env={**offline_env(scratch), "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **env})


def _read_events(process: subprocess.Popen[str], until: str, timeout: float = 120.0) -> list[dict[str, object]]:
    """JSON lines from the process until one whose event is `until` (each line must parse)."""
    import json
    import select

    assert process.stdout is not None
    events: list[dict[str, object]] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 1.0)
        if not ready:
            continue
        line = process.stdout.readline()
        if not line:
            break
        events.append(json.loads(line))
        if events[-1]["event"] == until:
            return events
    process.kill()  # its stderr ends only when it does: reading it from a live process never returns
    process.wait()
    raise AssertionError(f"no {until!r} event; saw {events}; stderr: {process.stderr.read() if process.stderr else ''}")


@pytest.mark.heavy
def test_ctrl_c_while_idle_stops_at_once_and_every_line_is_one_json_event(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "cli", {"note.md": "# Note\n\nA note about larks.\n"})
    process = _watch_process(root, tmp_path)
    try:
        events = _read_events(process, "sync")
        assert [event["event"] for event in events] == ["watching", "sync"]
        assert cast("dict[str, object]", events[1]["report"])["added"] == ["docs/note.md"]
        process.send_signal(signal.SIGINT)
        rest = _read_events(process, "stopped", timeout=30)
        assert process.wait(timeout=30) == 0
        assert rest[-1]["syncs"] == 1
    finally:
        process.kill()
        process.wait()


@pytest.mark.heavy
def test_ctrl_c_during_a_sync_lets_it_finish_then_stops(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", "cli", {"note.md": "# Note\n\nA note about larks.\n"})
    # The second sync stops itself (SIGSTOP) once it has walked: Ctrl-C reaches it mid-sync.
    process = _watch_process(root, tmp_path, PNK_FAULT_STOP="sync.after-walk:2")
    try:
        _read_events(process, "sync")
        (root / "docs" / "note.md").write_text("# Note\n\nThe note now talks about swifts.\n", encoding="utf-8")
        deadline = time.monotonic() + 60
        while _process_state(process.pid) != "T":
            assert time.monotonic() < deadline, "the second sync never reached its stop point"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGCONT)
        events = _read_events(process, "stopped", timeout=60)
        kinds = [event["event"] for event in events]
        assert kinds == ["stopping", "sync", "stopped"], kinds
        assert cast("dict[str, object]", events[1]["report"])["changed"] == ["docs/note.md"]
        assert process.wait(timeout=30) == 0
    finally:
        process.kill()
        process.wait()


def _process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (T: stopped)."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    return text.rsplit(")", 1)[1].split()[0]


def test_without_the_watch_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from pinakes.errors import UsageError
    from pinakes.sync.watch import notify_source

    monkeypatch.setitem(sys.modules, "watchfiles._rust_notify", None)  # as if not installed
    with pytest.raises(UsageError) as refused:
        notify_source([str(tmp_path)], False)
    assert "[watch]" in (refused.value.remedy or "") and "watchfiles" in refused.value.message
