"""One query searched twice, as asked and with some documents left out, the work the two share done once.

Self-calibration asks each question it makes twice (calibration/self_calibration.py): as it is, and
with its source document and their near-duplicates left out by a filter. `Searcher.search_twice`
(search/core.py) runs both searches in one snapshot of the index with a `SharedWork` between them,
and each result is the one its own `Searcher.search` call returns (tests/test_search_twice.py
compares every passage, score and evidence feature on KBs built by the sync). What is shared:

- the query's analysis and its keyword plan, which no filter changes;
- the keyword side's lists: FTS5's first rows found once, deep enough that dropping the left-out
  chunks from them leaves the second search's pool, each row's BM25F computed once
  (search/bm25.py `bm25_search_twice`);
- the chunks read from the index for the fused pool (`hydrate`) and which of the query's terms each
  one holds (the coverage that breaks ties): a chunk's row and its terms do not depend on the filter.

- the query's vector: one model call (or one look-up, where the calibration embedded its questions
  in one batch: calibration/question_vectors.py).

The vector side's own work (one product and a top-k over the KB's rows, or the vector file's
search) is repeated: at a first sync's sizes it is a small part of a search.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from pinakes.lexical.filters import SearchFilters
from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search.passages import ChunkRow, hydrate
from pinakes.search.query import AnalyzedQuery, analyze

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from pinakes.embed.base import Embedder
    from pinakes.search.bm25 import KeywordPlan

Hits = list[tuple[int, float]]


def leaves_out_only(filters: SearchFilters) -> bool:
    """Whether `filters` does nothing but leave documents out: what `search_twice` shares work for."""
    return bool(filters.exclude_doc_ids) and not replace(filters, exclude_doc_ids=()).active


@dataclass
class SharedWork:
    """What the second search (with `without`) takes from the first (as asked)."""

    without: SearchFilters
    analyzed: AnalyzedQuery | None = None
    keyword: tuple[KeywordPlan, Hits] | None = None  # the second search's plan and list, made by the first
    query_vector: NDArray[np.float32] | None = None
    rows: dict[int, ChunkRow] = field(default_factory=dict[int, ChunkRow])
    present: dict[int, frozenset[str]] = field(default_factory=dict[int, frozenset[str]])

    def left_out(self, conn: sqlite3.Connection) -> frozenset[int]:
        """The chunks of the documents `without` leaves out."""
        ids = self.without.exclude_doc_ids
        marks = ", ".join("?" * len(ids))
        return frozenset(int(row[0]) for row in conn.execute(f"SELECT id FROM chunks WHERE doc_id IN ({marks})", ids))

    def analysis(self, query: str, tokenizer: Tokenizer) -> AnalyzedQuery:
        """`analyze(query, tokenizer)`, once for both searches."""
        if self.analyzed is None:
            self.analyzed = analyze(query, tokenizer)
        return self.analyzed

    def query_vector_of(self, embedder: Embedder, query: str) -> NDArray[np.float32]:
        """`usable_query_vector(embedder, query)`, once for both searches."""
        from pinakes.search.vectors import usable_query_vector  # NumPy: not before a search needs it

        if self.query_vector is None:
            self.query_vector = usable_query_vector(embedder, query)
        return self.query_vector

    def hydrated(self, conn: sqlite3.Connection, chunk_ids: list[int]) -> dict[int, ChunkRow]:
        """`hydrate(conn, chunk_ids)`, reading only the rows the other search did not read."""
        self.rows.update(hydrate(conn, [chunk_id for chunk_id in chunk_ids if chunk_id not in self.rows]))
        return {chunk_id: self.rows[chunk_id] for chunk_id in chunk_ids if chunk_id in self.rows}
