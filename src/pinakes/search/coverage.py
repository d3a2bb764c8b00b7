"""Coverage: the share of the query's keywords each fused candidate contains.

Function words aside (unless the query has nothing else), unknown words included. Used only to
break exact ties in the fused order (search/fusion.py `order_fused`), never to exclude.

Which terms a chunk's text holds is read from its term counts (`chunk_terms`, index/terms.py: the
index's own tokenizer over the text as the index holds it, shadowed), not by tokenizing the pool's
texts again on every search (~1 ms a search, a sixth of a self-calibration question's: #45). An
index whose FTS5 table was made with another tokenizer than the one the counts were made with is
tokenized as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from pinakes.index.schema import FTS_TOKENIZE
from pinakes.lexical.tokenizer import PRESENCE_BATCH, Tokenizer
from pinakes.search.fusion import Candidate
from pinakes.search.passages import ChunkRow
from pinakes.search.query import QueryUnit


def set_coverage(conn: sqlite3.Connection, pool: list[Candidate], rows: dict[int, ChunkRow],
                 units: Sequence[QueryUnit], tokenizer: Tokenizer, known: dict[int, frozenset[str]] | None = None
                 ) -> None:
    """Each candidate's `coverage`. `known`: which of these units' terms chunks hold, from an earlier
    search of the same query (search/twice.py); the chunks not in it are tokenized and added."""
    content = [unit for unit in units if not unit.function_word] or list(units)
    if not content or not pool:
        return
    wanted = {term for unit in content for term in unit.terms}
    known = {} if known is None else known
    missing = [candidate.chunk_id for candidate in pool if candidate.chunk_id not in known]
    if missing and tokenizer.tokenize == FTS_TOKENIZE:
        known.update(held(conn, missing, wanted))
    elif missing:
        known.update(zip(missing, tokenizer.presence([rows[chunk_id]["text"] for chunk_id in missing], wanted),
                         strict=True))
    # A unit is held when the chunk holds every one of its terms: its terms a subset of the chunk's.
    needed = [frozenset(unit.terms) for unit in content]
    for candidate in pool:
        present = known[candidate.chunk_id]
        hits = sum(1 for terms in needed if terms <= present)
        candidate.coverage = round(hits / len(content), 4)


def held(conn: sqlite3.Connection, chunk_ids: list[int], terms: set[str]) -> dict[int, frozenset[str]]:
    """Which of `terms` each chunk's text holds, from its term counts (`Tokenizer.presence` of its text)."""
    found: dict[int, set[str]] = {chunk_id: set() for chunk_id in chunk_ids}
    wanted = sorted(terms)
    chunk_marks = ", ".join("?" * len(chunk_ids))
    for start in range(0, len(wanted), PRESENCE_BATCH):  # SQLite's variables per statement
        batch = wanted[start:start + PRESENCE_BATCH]
        sql = (f"SELECT chunk_id, term FROM chunk_terms WHERE chunk_id IN ({chunk_marks}) "
               f"AND term IN ({', '.join('?' * len(batch))}) AND frequency > 0")
        for chunk_id, term in conn.execute(sql, [*chunk_ids, *batch]):
            found[chunk_id].add(term)
    return {chunk_id: frozenset(terms_held) for chunk_id, terms_held in found.items()}
