"""Chunking ahead: a worker process chunks the documents a sync writes next, off the writer's core.

The sync's process is the single writer, and a third of its CPU went to the chunk stage (the model's
tokenizer over every block, the chunker's Python) and an eighth to counting each chunk's terms
(docs/perf/writer.md). Both are pure functions of what a document's build key holds: its text, path
and type, the [chunking] settings, the model's tokenizer. So while the driver extracts, writes and
commits one group of documents, a worker process (`pipeline/chunk_worker.py`; one per core beyond
the driver's, at most MAX_WORKERS, fed from one ordered queue) reads the text sources of the groups
after it, in plan order, and chunks them with the same `chunk_document`, fits
their contexts with the same `fitted_contexts` and counts their terms with the same FTS5 tokenizer.

What the driver does with an answer, and why the index cannot differ:
- `take`, in the chunk stage: the worker's chunks are used only when the xxh3-128 of the text the
  worker chunked equals that of the driver's own extraction of the document; any other case (no
  answer, a different text, the worker dead) chunks inline, as a sync always did. A document the
  worker is chunking, or will be sent next, is waited for rather than chunked twice: the writer's
  core is the one a sync cannot add to (docs/perf/writer.md, "Fourth pass").
- `contexts`, in the embed stage: the worker's fitted contexts are used only for the very chunks it
  made and when the title the driver gives them is the text's own (a sidecar title changes them);
  `counted`, inside the document's write: its term rows only when every context it fitted equals
  the driver's; `text_links`, `front_matter_tags`: what it parsed from the same text. Otherwise the driver computes
  each itself.
- The worker writes nothing to the index (only the disposable token counts of large texts, as the
  chunk stage does): the per-document transaction and every kill -9 point are the driver's,
  unchanged. If the worker dies, the driver goes on inline.

Memory is bounded: at most WINDOW_DOCUMENTS answers, or WINDOW_BYTES of their sources, wait ahead of
the document the driver is at; answers for documents the driver passed by are dropped. The worker
runs where it pays: at least MIN_DOCUMENTS text documents and MIN_GROUPS groups from the driver's
position on (inside one group it could only take the second half), on a machine that gives this
process two cores or more (on one core it would only take turns with the driver:
docs/perf/writer.md, "Chunking ahead" and "One group: no worker"). PINAKES_CHUNK_AHEAD=1 or 0
overrides.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pinakes.pipeline.chunk_worker import (
    BOOTSTRAP,
    Done,
    Request,
    Setup,
    read_frame,
    text_hash,
    write_frame,
)

if TYPE_CHECKING:
    from pathlib import Path

    from pinakes.chunking import Chunk
    from pinakes.embed.base import Embedder
    from pinakes.index.chunk_rows import Counted
    from pinakes.links.text_links import TextLink
    from pinakes.pipeline.chunk_document import ChunkSettings
    from pinakes.pipeline.types import DocWork

MIN_DOCUMENTS = 64
# Within one group the worker can only take the second half of its chunking, at most ~GROUP_TOKENS
# (sync/loader.py) of text: less than starting a Python process costs (docs/perf/writer.md, "One group").
MIN_GROUPS = 2
WINDOW_DOCUMENTS = 512
WINDOW_BYTES = 4 << 20
# How far past the driver's position `take` looks for a document (the driver takes the plan's
# documents in order, passing over those that failed or were kept as indexed).
LOOKAHEAD = 4096
# Answers the driver took are kept for the document's write (a group of at most 256 documents is
# chunked, then written): the oldest are dropped past this many.
KEPT_ANSWERS = 512
OVERRIDE = "PINAKES_CHUNK_AHEAD"
# Worker processes at most: one chunks ~1,750 chunks per CPU-second of its own, the driver writes
# ~2,800 (docs/perf/writer.md, "Fourth pass"): two keep ahead of it where the cores are there.
MAX_WORKERS = 2


def wanted(documents: int, groups: int) -> bool:
    """Whether a sync of `documents` chunkable documents in `groups` groups runs a worker ahead
    (module docstring)."""
    override = os.environ.get(OVERRIDE, "").strip()
    if override in {"0", "1"}:
        return override == "1" and documents > 0
    return documents >= MIN_DOCUMENTS and groups >= MIN_GROUPS and len(os.sched_getaffinity(0)) >= 2


def worker_count() -> int:
    """Worker processes for this machine: one per core beyond the driver's, at most MAX_WORKERS,
    at least one (where `wanted` runs any)."""
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0)) - 1))


def start(groups: Sequence[Sequence[DocWork]], at: DocWork, *, root: Path, embedder: Embedder,
          settings: ChunkSettings, smaller_than: int, cache_dir: Path | None = None) -> ChunkAhead:
    """A worker chunking the text documents of `groups` (the run's plan, in order) under `settings`,
    from the middle of the rest of the group of `at` (the document the driver is chunking now: it
    chunks the first half of its group while the worker chunks the second), those of fewer than
    `smaller_than` bytes (larger ones are the driver's), a large one with the token counts
    remembered under `cache_dir` (pipeline/token_counts.py); or one that hands out nothing where
    none runs: too few documents, one core, a model whose token counts are not a `TokenCounter`'s (a test's toy
    counter), no process to be had."""
    from pinakes.embed.tokens import TokenCounter
    from pinakes.pipeline.plan_table import WorkTable, count_of_types

    items = _in_order(groups)
    if isinstance(items, WorkTable):  # a first sync's plan: the minted IDs are bisected, no item made
        position = items.position_of(at.doc_id) or 0
    else:
        position = next((index for index, item in enumerate(items) if item.doc_id == at.doc_id), 0)
    group_end, groups_done = 0, 0
    for group in groups:
        group_end += len(group)
        if group_end > position:
            break
        groups_done += 1
    # the documents and groups from the driver's on (a resumed sync may start in its last)
    if not wanted(count_of_types(items[position:], _text_source_types(), smaller_than), len(groups) - groups_done):
        return ChunkAhead(None, ())
    counter = getattr(embedder, "token_counter", None)
    if not isinstance(counter, TokenCounter):
        return ChunkAhead(None, ())
    try:
        return ChunkAhead(Setup(str(root), counter.to_str(), settings, smaller_than,
                                None if cache_dir is None else str(cache_dir)), items,
                          first=position + (group_end - position + 1) // 2, workers=worker_count())
    except OSError:
        return ChunkAhead(None, ())


def _in_order(groups: Sequence[Sequence[DocWork]]) -> Sequence[DocWork]:
    """The groups' documents as one sequence: a first sync's row ranges as one range of its plan's
    columns (pipeline/plan_table.py), whose work items are made when read, not a list of them all."""
    from pinakes.pipeline.plan_table import WorkTable

    first, last = (groups[0], groups[-1]) if groups else (None, None)
    if isinstance(first, WorkTable) and isinstance(last, WorkTable) and all(isinstance(group, WorkTable) for group in groups):
        return first.through(last)
    return [item for group in groups for item in group]


def _chunkable(item: DocWork, smaller_than: int) -> bool:
    return item.source_type in _text_source_types() and item.file.size < smaller_than


@functools.cache
def _text_source_types() -> tuple[str, ...]:
    from pinakes.extract.text import TEXT_SOURCE_TYPES

    return tuple(TEXT_SOURCE_TYPES)


class ChunkAhead:
    """The driver's side of the workers (module docstring): a thread per worker feeds it the plan's
    text documents one at a time, from one ordered queue, and keeps its answers; `take` and
    `counted` hand them out."""

    def __init__(self, setup: Setup | None, items: Sequence[DocWork], first: int = 0, workers: int = 1) -> None:
        """`setup` None: no worker, nothing handed out; `first`: the position it starts at;
        `workers`: how many processes chunk (each answer is matched by its position)."""
        from pinakes.extract.process_starter import start_process
        from pinakes.pipeline.plan_table import WorkTable

        # the plan's own DocWork objects, or a first sync's columns that make them: no index over the whole plan
        self.items = items if isinstance(items, WorkTable) else list(items)
        self._smaller_than = setup.smaller_than if setup is not None else 0
        self.used = 0  # documents whose chunks came from the worker
        self.refused = 0  # answers whose text was not the driver's
        self.terms_used = 0  # documents whose term rows came from the worker
        self._cond = threading.Condition()
        self._answers: dict[int, Done] = {}
        self._held_bytes = 0
        self.first = first
        self._next = first  # the next position to send
        self._at = -1  # the position the driver last took
        self._in_flight: set[int] = set()
        self._closed = False
        self._taken: dict[str, Done] = {}
        self.ended = setup is None  # no more answers will come
        self.processes: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []
        self._feeding = 0  # feeding threads still running
        if setup is None:
            return
        for _ in range(workers):
            self.processes.append(start_process(lambda: subprocess.Popen(
                [sys.executable, "-c", BOOTSTRAP, json.dumps(sys.path)], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True)))
        self._feeding = len(self.processes)
        for process in self.processes:
            thread = threading.Thread(target=self._feed, args=(process, setup), name="pinakes-chunk-ahead", daemon=True)
            self._threads.append(thread)
            thread.start()

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The first worker process (None where none runs)."""
        return self.processes[0] if self.processes else None

    def take(self, item: DocWork, text: str) -> Done | None:
        """The worker's chunks of `item` if it chunked exactly `text`; None: chunk it inline."""
        position = self.position_of(item)
        if position is None:
            return None
        with self._cond:
            self._at = max(self._at, position - 1)  # the feeder still sends this one
            for passed in [key for key in self._answers if key < position]:
                self._forget(passed)
            self._cond.notify_all()
            while position not in self._answers and self._will_answer(position):
                self._cond.wait()
            self._at = max(self._at, position)
            answer = self._answers.get(position)
            if answer is not None:
                self._forget(position)
            self._cond.notify_all()
        if answer is None:
            return None
        if answer.text_hash != text_hash(text):
            self.refused += 1
            return None
        self.used += 1
        if len(self._taken) >= KEPT_ANSWERS:
            self._taken.pop(next(iter(self._taken)))
        self._taken[item.doc_id] = answer
        return answer

    def _will_answer(self, position: int) -> bool:
        """Whether the worker, alive, is chunking the document at `position` or will send it next:
        the driver waits for its answer rather than chunk it too (the writer's core is the one a
        sync cannot add to). Documents before the worker's first, and those it is not sent, are
        the driver's. Call holding the lock."""
        if self.ended or self._closed or position < self.first:
            return False
        return position in self._in_flight or (position >= self._next
                                                and _chunkable(self.items[position], self._smaller_than))

    def position_of(self, item: DocWork) -> int | None:
        """`item`'s position in the plan, looked for from the driver's position on."""
        start = self._at + 1
        for position in range(start, min(start + LOOKAHEAD, len(self.items))):
            if self.items[position].doc_id == item.doc_id:
                return position
        return None

    def contexts(self, doc_id: str, chunks: Sequence[Chunk], title: str | None) -> tuple[list[str], dict[str, int]] | None:
        """The chunks' fitted contexts and the distinct ones' counts (`fitted_contexts`), when
        `chunks` are the ones the worker made and `title` the one it fitted them for."""
        answer = self._answer_for(doc_id, chunks)
        if answer is None or answer.text_title != title:
            return None
        return answer.contexts, answer.context_counts

    def counted(self, doc_id: str, chunks: Sequence[Chunk], contexts: Sequence[str]) -> list[Counted] | None:
        """Each chunk's term rows and FTS5 shadows, made by the worker, when `chunks` are the ones
        it made and `contexts` the ones it fitted; None: make them here."""
        answer = self._answer_for(doc_id, chunks)
        if answer is None or (answer.contexts is not contexts and answer.contexts != list(contexts)):
            return None
        self.terms_used += 1
        return answer.counted

    def text_links(self, doc_id: str, chunks: Sequence[Chunk]) -> list[TextLink] | None:
        """The links of the text the worker chunked into `chunks` (the driver's own text)."""
        answer = self._answer_for(doc_id, chunks)
        return None if answer is None else answer.links

    def front_matter_tags(self, doc_id: str, chunks: Sequence[Chunk]) -> tuple[str, ...] | None:
        """The tags the front matter of the text the worker chunked into `chunks` declares."""
        answer = self._answer_for(doc_id, chunks)
        return None if answer is None else answer.front_matter_tags

    def _answer_for(self, doc_id: str, chunks: Sequence[Chunk]) -> Done | None:
        answer = self._taken.get(doc_id)
        return answer if answer is not None and answer.chunks is chunks else None

    def close(self) -> None:
        """End the workers (their stdin closes; one is killed if it does not exit at once)."""
        with self._cond:
            self._closed = True
            self._answers.clear()
            self._cond.notify_all()
        self._taken.clear()
        for process in self.processes:
            with contextlib.suppress(OSError):
                if process.stdin is not None:
                    process.stdin.close()
        for process in self.processes:
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for thread in self._threads:
            thread.join(timeout=5)
        for process in self.processes:
            if process.stdout is not None:
                process.stdout.close()

    def _forget(self, position: int) -> None:
        del self._answers[position]
        self._held_bytes -= self.items[position].file.size

    def _next_request(self) -> Request | None:
        """The next document to send, once the window has room; None when the feeding ends."""
        with self._cond:
            while True:
                if self._closed or self.ended:
                    return None
                self._next = max(self._next, self._at + 1)
                while self._next < len(self.items) and not _chunkable(self.items[self._next], self._smaller_than):
                    self._next += 1
                if self._next >= len(self.items):
                    return None
                if len(self._answers) < WINDOW_DOCUMENTS and self._held_bytes < WINDOW_BYTES:
                    break
                self._cond.wait()
            position = self._next
            self._next += 1
            self._in_flight.add(position)
            item = self.items[position]
            return Request(position, item.path, item.source_type)

    def _feed(self, process: subprocess.Popen[bytes], setup: Setup) -> None:
        stdin, stdout = process.stdin, process.stdout
        assert stdin is not None and stdout is not None
        request: Request | None = None
        try:
            write_frame(stdin.fileno(), pickle.dumps(setup, pickle.HIGHEST_PROTOCOL))
            while (request := self._next_request()) is not None:
                write_frame(stdin.fileno(), pickle.dumps(request, pickle.HIGHEST_PROTOCOL))
                frame = read_frame(stdout)
                if frame is None:
                    break  # the worker died (or was ended): the driver does its documents itself
                answer: Done | None = pickle.loads(frame)
                with self._cond:
                    self._in_flight.discard(request.position)
                    if answer is not None and answer.position == request.position and request.position > self._at:
                        self._answers[request.position] = answer
                        self._held_bytes += self.items[request.position].file.size
                    self._cond.notify_all()
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        finally:
            with self._cond:
                if request is not None:
                    self._in_flight.discard(request.position)
                self._feeding -= 1
                self.ended = self._feeding == 0  # the last worker gone: no more answers will come
                self._cond.notify_all()
