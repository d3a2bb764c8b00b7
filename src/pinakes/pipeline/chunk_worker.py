"""The chunk-ahead worker process: reads, chunks and term-counts documents a sync will write next.

Started by `pipeline/chunk_ahead.py` (which says why and what the driver does with the answers), as
`python -c BOOTSTRAP <sys.path as JSON>`. It reads frames (a 4-byte big-endian length, then a
pickle) on stdin and answers each on the stdout it had at start (its Python `print`s go to stderr):
first the run's settings, `Setup`, then one `Request` per document, each answered by one `Done` or
by None when the driver should chunk the document itself (not a text source, a file the text
extractor refuses, a text too large to hold ahead, anything that raised). It writes nothing but
the token counts it remembers for large texts (`pipeline/token_counts.py`, a disposable cache the
driver's chunk stage writes too), ignores Ctrl-C (the driver decides), exits when its stdin closes,
and on Linux the kernel kills it when the process that started it dies, even by SIGKILL.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple

from pinakes.chunking import Chunk
from pinakes.extract.process_starter import die_with_parent
from pinakes.index.chunk_rows import Counted
from pinakes.links.text_links import TextLink
from pinakes.pipeline.chunk_document import ChunkSettings

if TYPE_CHECKING:
    from pinakes.pipeline.token_counts import TokenCountStore

# The child's first lines: the parent's sys.path (so it imports this very copy of pinakes), then main.
BOOTSTRAP = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
             "from pinakes.pipeline.chunk_worker import main; main()")

FRAME = struct.Struct(">I")



class Setup(NamedTuple):
    root: str  # the KB's root: a request names a document by its path under it
    tokenizer: str  # the model tokenizer's JSON (`TokenCounter.to_str`): counts exactly as the driver's
    settings: ChunkSettings
    smaller_than: int  # a text this long or longer is left to the driver
    # Where the token counts of large texts are remembered across syncs (the KB's cache folder, as
    # the driver's chunk stage opens it); None: count every text.
    cache_dir: str | None = None


class Request(NamedTuple):
    position: int  # in the run's plan: the driver matches the answer by it
    path: str
    source_type: str


class Done(NamedTuple):
    """One document chunked: what `chunk_document` made of the text whose xxh3-128 is `text_hash`;
    the chunks' contexts fitted for the text's own title (`fitted_contexts`, with the counts of the
    distinct ones), each chunk's term rows and FTS5 shadows for those contexts, the text's links (`parse_text_links`)
    and the tags its front matter declares."""

    position: int
    text_hash: bytes
    chunks: tuple[Chunk, ...]
    text_title: str | None
    contexts: list[str]
    context_counts: dict[str, int]
    counted: list[Counted]
    links: list[TextLink]
    front_matter_tags: tuple[str, ...]


def text_hash(text: str) -> bytes:
    """The digest an answer is matched to the driver's extraction by."""
    import xxhash

    return xxhash.xxh3_128_digest(text.encode("utf-8", "surrogatepass"))


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests = sys.stdin.buffer
    replies = os.dup(1)
    os.dup2(2, 1)  # a stray print can never corrupt the replies
    die_with_parent()
    setup_frame = read_frame(requests)
    if setup_frame is None:
        return
    worker = _Worker(pickle.loads(setup_frame))
    while (frame := read_frame(requests)) is not None:
        answer = worker.answer(pickle.loads(frame))
        write_frame(replies, pickle.dumps(answer, pickle.HIGHEST_PROTOCOL))


class _Worker:
    def __init__(self, setup: Setup) -> None:
        from pinakes.embed.tokens import TokenCounter
        from pinakes.index.schema import FTS_TOKENIZE
        from pinakes.lexical.tokenizer import Tokenizer

        self.root = Path(setup.root)
        self.settings = setup.settings
        self.smaller_than = setup.smaller_than
        self.cache_dir = Path(setup.cache_dir) if setup.cache_dir is not None else None
        self.counter = TokenCounter.from_str(setup.tokenizer)
        self.terms = Tokenizer(FTS_TOKENIZE)

    def _remembered_counts(self, chars: int) -> TokenCountStore | None:
        """The counts remembered across syncs for a text this large, as the driver's chunk stage
        uses them (`pipeline/chunk.py`): the same numbers the tokenizer gives, found instead of made."""
        from pinakes.pipeline.token_counts import REMEMBERED_DOCUMENT_CHARS, TokenCountStore

        if self.cache_dir is None or chars < REMEMBERED_DOCUMENT_CHARS:
            return None
        return TokenCountStore.open(self.cache_dir, self.counter.fingerprint, self.counter.count_batch)

    def answer(self, request: Request) -> Done | None:
        try:
            return self._chunked(request)
        except Exception:  # the driver chunks it itself, and meets the same failure where it has one
            return None

    def _chunked(self, request: Request) -> Done | None:
        from pinakes.extract import text as text_extractor
        from pinakes.extract.front_matter import document_front_matter
        from pinakes.extract.titles import document_title
        from pinakes.lexical.scripts import shadow
        from pinakes.links.text_links import parse_text_links
        from pinakes.pipeline.chunk_document import chunk_document
        from pinakes.pipeline.context import document_context, fitted_contexts

        absolute = self.root / request.path
        extracted = text_extractor.extract(absolute, request.source_type)
        if len(extracted.text) >= self.smaller_than:
            return None  # too large to hold ahead: the driver chunks it
        title = document_title(extracted.text, request.source_type, absolute)
        counter, settings = self.counter, self.settings
        store = self._remembered_counts(len(extracted.text))
        try:
            chunks = tuple(chunk_document(extracted, request.source_type, request.path, absolute, title, settings,
                                          counter.count, store.count_batch if store else counter.count_batch))
        finally:
            if store is not None:
                store.save()
        declared = document_front_matter(extracted.text, request.source_type, absolute)
        lines = document_context(title, request.path, running_heads=extracted.running_heads,
                                 declared_words=declared.searchable_words())
        contexts, counted = fitted_contexts(lines, chunks, settings.max_input_tokens, count_tokens=counter.count,
                                             count_tokens_batch=counter.count_batch, additive=settings.additive)
        rows: list[list[tuple[str, int, int]]] = [[] for _ in chunks]
        # Keyed by position + 1: a probe row's key is an FTS5 rowid.
        for key, term, in_text, in_context in self.terms.paired_counts(
                [(position + 1, chunk.text, context) for position, (chunk, context)
                 in enumerate(zip(chunks, contexts, strict=True))]):
            rows[key - 1].append((term, in_text, in_context))
        # The term rows as JSON, which SQLite reads: the driver never holds a Python tuple per row
        # (unpickling them and binding each row cost it ~20 µs a chunk).
        made = [Counted(json.dumps(chunk_rows, ensure_ascii=False, separators=(",", ":")), shadow(chunk.text),
                        shadow(context)) for chunk_rows, chunk, context in zip(rows, chunks, contexts, strict=True)]
        return Done(request.position, text_hash(extracted.text), chunks, title, contexts, counted, made,
                    parse_text_links(extracted.text, request.source_type), declared.tags)


def read_frame(stream: IO[bytes]) -> bytes | None:
    """One frame's body; None at the end of the stream (or a frame cut short by it)."""
    header = stream.read(FRAME.size)
    if len(header) < FRAME.size:
        return None
    (size,) = FRAME.unpack(header)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(fd: int, body: bytes) -> None:
    view = memoryview(FRAME.pack(len(body)) + body)
    while view:
        view = view[os.write(fd, view):]

