"""Self-calibration's questions embedded once, in batches, before the first is searched.

Each made question is searched twice (answerable, then without its source), and a search embeds
its query alone: 2 model calls a question, where one batched call embeds dozens of questions for
about what a few single calls cost (200 questions of 4-9 tokens, int8 MiniLM on 2 cores: 2.7 s of
CPU one at a time, 1.3-1.4 s in batches of 8-64; docs/perf/sync.md). `QuestionVectors` is the
embedder the calibration's searches use: it answers `embed_query` from the vectors of one
`embed_queries` pass, which a provider computes so that each row is the vector `embed_query` gives
that query alone (embed/base.py `QueryBatches`), so the searches, their features and the stored
fit are those the one-at-a-time path gives (tests/test_self_calibration_cost.py). A text it was not
given is embedded as before. The same Searcher builds no "try next" suggestion: a calibration reads
only the evidence, and on a KB not calibrated yet every search would build one.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from pinakes.embed.base import Embedder, QueryBatches
from pinakes.errors import PinakesError

if TYPE_CHECKING:
    import numpy as np

    from pinakes.search.core import Searcher


class QuestionVectors:
    """An `Embedder` over `model` whose `embed_query` answers the given questions from one batched
    pass (module docstring); every other call goes to `model`."""

    def __init__(self, model: QueryBatchEmbedder, questions: Sequence[str]) -> None:
        self.identity = model.identity
        self.max_input_tokens = model.max_input_tokens
        self._model = model
        asked = list(dict.fromkeys(question.strip() for question in questions))  # as Searcher.search asks them
        self._vectors = dict(zip(asked, model.embed_queries(asked), strict=True)) if asked else {}
        self._batched_only = False

    def count_tokens(self, text: str) -> int:
        return self._model.count_tokens(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self._model.count_tokens_batch(texts)

    def embed_documents(self, texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        return self._model.embed_documents(texts, batch_size=batch_size)

    def embed_query(self, text: str) -> np.ndarray:
        vector = self._vectors.get(text)
        if vector is not None:
            return vector.copy()
        if self._batched_only:
            raise PinakesError(f"{text!r} was not among the calibration's batched questions")
        return self._model.embed_query(text)

    def batched_only(self) -> QuestionVectors:
        """These vectors, refusing any other text instead of running the model: for a forked
        child (calibration/two_processes.py), where the model's thread pool does not exist."""
        refusing = copy.copy(self)
        refusing._batched_only = True
        return refusing


class QueryBatchEmbedder(Embedder, QueryBatches, Protocol):
    """A model that embeds queries in batches (the local providers, and the sync's deferred model)."""


def asking_searcher(searcher: Searcher, questions: Sequence[str]) -> Searcher:
    """A Searcher like `searcher` (same index, settings, reranker) that suggests nothing (a
    calibration reads a search's evidence, never its suggestion, which an uncalibrated KB's
    searches would each build) and whose model answers `questions` from one batched pass; where
    its model cannot batch queries (a remote endpoint, whose requests and probes stay as every
    search makes them) or cannot be had now (the first search then meets what stopped it, as it
    always did), that model is asked one query at a time, as before. Its searches hand the vector
    file's pages back piece by piece (`release_vector_pages`): a sync's calibration asks hundreds of
    them, and the whole file's pages would otherwise stay in the sync's memory."""
    from dataclasses import replace

    from pinakes.search.core import Searcher

    try:
        model = searcher.embedder()
    except PinakesError:
        model = None
    embedder = QuestionVectors(model, questions) if isinstance(model, QueryBatches) else None
    return Searcher(searcher.index_path, replace(searcher.settings, suggest=False, release_vector_pages=True),
                    embedder=embedder,
                    embedder_loader=searcher.embedder, reranker_loader=searcher.reranker,
                    embedding_section=searcher.embedding_section)
