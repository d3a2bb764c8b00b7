"""Coverage: the share of the query's keywords each fused candidate contains.

Function words aside (unless the query has nothing else), unknown words included. Used only to
break exact ties in the fused order (search/fusion.py `order_fused`), never to exclude.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinakes.lexical.tokenizer import Tokenizer
from pinakes.search.fusion import Candidate
from pinakes.search.passages import ChunkRow
from pinakes.search.query import QueryUnit


def set_coverage(pool: list[Candidate], rows: dict[int, ChunkRow], units: Sequence[QueryUnit], tokenizer: Tokenizer,
                 known: dict[int, frozenset[str]] | None = None) -> None:
    """Each candidate's `coverage`. `known`: which of these units' terms chunks hold, from an earlier
    search of the same query (search/twice.py); the chunks not in it are tokenized and added."""
    content = [unit for unit in units if not unit.function_word] or list(units)
    if not content or not pool:
        return
    wanted = {term for unit in content for term in unit.terms}
    known = {} if known is None else known
    missing = [candidate.chunk_id for candidate in pool if candidate.chunk_id not in known]
    if missing:
        known.update(zip(missing, tokenizer.presence([rows[chunk_id]["text"] for chunk_id in missing], wanted),
                         strict=True))
    for candidate in pool:
        present = known[candidate.chunk_id]
        hits = sum(1 for unit in content if all(term in present for term in unit.terms))
        candidate.coverage = round(hits / len(content), 4)
