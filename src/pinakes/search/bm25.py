"""The keyword retriever: BM25 over FTS5, compiled from analysed query units, never from user text.

The plan, measured on the development corpora (docs/QUALITY.md):
  1. function words are dropped whenever the query has any other word, and so are words Porter
     stems onto a function word's term (using -> us, one -> on), which would otherwise match the
     function word's rows; a query made only of function words ("what is it") searches them;
  2. terms the index has never seen (df = 0) are dropped: they can match nothing, and naming them
     in the result's notes tells the caller which words the KB does not know;
  3. weightless terms — held by at least half the chunks, where FTS5's bm25() clamps the IDF to
     1e-6 — are dropped while a term with weight remains: they move no score by more than ~2e-6,
     so the only rows they change are those holding nothing else (no longer candidates), but every
     row holding one would be scored, and at 100k chunks they are the dearest part of a query;
  4. past MAX_QUERY_TERMS distinct terms, the rarest are kept;
  5. the rest are OR-ed, each quoted, and ranked by FTS5's bm25().
A query whose content words are all unknown is answered with nothing from this retriever: falling
back to its function words would turn a visibly empty result into a confidently wrong one.

The IDF-weighted quorum (a chunk qualifies when the terms it carries hold at least half the
query's IDF weight) and a ubiquity cut are kept as measured alternatives, not defaults: on ranked
top-k retrieval the quorum halves nDCG@10 (long queries leave almost no chunk qualifying), and
the cut saves little time at the price of quality.
"""

from __future__ import annotations

import math
import sqlite3
from dataclasses import dataclass, field
from enum import Enum

from pinakes.search.query import MAX_QUERY_TERMS, AnalyzedQuery, QueryUnit, fts_quote

VOCAB_TABLE = "temp.pnk_chunks_vocab"


class KeywordStrategy(Enum):
    OR = "or"
    QUORUM = "quorum"


@dataclass(frozen=True)
class KeywordOptions:
    strategy: KeywordStrategy = KeywordStrategy.OR
    drop_function_words: bool = True
    drop_unknown_terms: bool = True
    quorum_fraction: float = 0.5
    # Also drop words the stemmer folds onto a function word's term (using -> us, one -> on),
    # unless nothing else is left: they match the function word's rows, not their own meaning.
    drop_stemmed_function_words: bool = True
    # Drop terms FTS5's bm25() gives no weight (in at least half the chunks) while others remain.
    drop_weightless_terms: bool = True
    # Drop content terms held by more than this share of chunks, while rarer ones remain.
    ubiquity_ceiling: float | None = None


@dataclass(frozen=True)
class KeywordPlan:
    """What the keyword retriever will search for, and what it left out and why."""

    units: tuple[QueryUnit, ...]
    document_frequency: dict[tuple[str, ...], int]
    unknown_words: tuple[str, ...] = ()
    weightless_words: tuple[str, ...] = ()
    function_words_only: bool = False
    capped_words: tuple[str, ...] = ()
    chunk_count: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def match(self) -> str | None:
        if not self.units:
            return None
        return " OR ".join(fts_quote(unit.word) for unit in self.units)

    def idf(self, unit: QueryUnit) -> float:
        df = self.document_frequency.get(unit.terms, 0)
        return math.log(1.0 + (self.chunk_count - df + 0.5) / (df + 0.5))


def ensure_vocabulary(conn: sqlite3.Connection) -> None:
    """A connection-private fts5vocab over chunks_fts: document frequency in one indexed lookup.

    It lives in the temp schema, which a `mode=ro` connection may still write.
    """
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB_TABLE} USING fts5vocab (main, chunks_fts, 'row')")


class DocumentFrequencies:
    """Rows of chunks_fts holding each term or phrase, remembered for one index generation.

    fts5vocab counts a term's rows by walking its doclist, so a common term costs a millisecond at
    100k chunks; within a generation the answer cannot change, and queries share their words.
    Not thread-safe: the Searcher's lock serialises its calls, as for the Tokenizer.
    """

    # A few MB at most; a server that has met more distinct terms than this starts counting afresh.
    MAX_REMEMBERED = 100_000

    def __init__(self, conn: sqlite3.Connection):
        self._conn = conn
        self._known: dict[tuple[str, ...], int] = {}

    def of(self, units: list[QueryUnit]) -> dict[tuple[str, ...], int]:
        """Document frequency per unit (a phrase unit is counted by matching it)."""
        if len(self._known) + len(units) > self.MAX_REMEMBERED:
            self._known.clear()
        answer: dict[tuple[str, ...], int] = {}
        for unit in units:
            count = self._known.get(unit.terms)
            if count is None:
                count = self._count(unit)
                self._known[unit.terms] = count
            answer[unit.terms] = count
        return answer

    def of_terms(self, terms: list[str]) -> dict[str, int]:
        """Document frequency of single terms (as the tokenizer produced them)."""
        units = [QueryUnit(word=term, terms=(term,), function_word=False) for term in terms]
        return {key[0]: count for key, count in self.of(units).items()}

    def _count(self, unit: QueryUnit) -> int:
        if len(unit.terms) == 1:
            row = self._conn.execute(f"SELECT doc FROM {VOCAB_TABLE} WHERE term = ?", (unit.terms[0],)).fetchone()
            return int(row[0]) if row else 0
        row = self._conn.execute(
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (fts_quote(unit.word),)
        ).fetchone()
        return int(row[0])


def weightless(document_frequency: int, chunk_count: int) -> bool:
    """FTS5's bm25() IDF is log((N - df + 0.5) / (df + 0.5)), clamped to 1e-6 when not positive."""
    return chunk_count > 0 and 2 * document_frequency >= chunk_count


def plan_keywords(
    conn: sqlite3.Connection, analyzed: AnalyzedQuery, options: KeywordOptions, chunk_count: int,
    document_frequencies: DocumentFrequencies | None = None,
) -> KeywordPlan:
    units = list(analyzed.units)
    content = [unit for unit in units if not unit.function_word]
    if options.drop_stemmed_function_words:
        content = [unit for unit in content if not unit.stems_onto_function_word] or content
    function_words_only = not content
    if options.drop_function_words and content:
        units = content
    frequencies = (document_frequencies or DocumentFrequencies(conn)).of(units)
    if options.ubiquity_ceiling is not None and chunk_count:
        ceiling = options.ubiquity_ceiling * chunk_count
        rarer = [unit for unit in units if frequencies[unit.terms] <= ceiling]
        units = rarer if any(frequencies[unit.terms] > 0 for unit in rarer) else units
    unknown: list[str] = []
    if options.drop_unknown_terms:
        unknown = [unit.word for unit in units if frequencies[unit.terms] == 0]
        units = [unit for unit in units if frequencies[unit.terms] > 0]
    weightless_words: list[str] = []
    # Only the OR plan ranks by bm25(); the quorum weighs terms by its own, always positive, IDF.
    if options.drop_weightless_terms and options.strategy is KeywordStrategy.OR:
        weighted = [unit for unit in units if not weightless(frequencies[unit.terms], chunk_count)]
        if weighted:
            weightless_words = [unit.word for unit in units if weightless(frequencies[unit.terms], chunk_count)]
            units = weighted
    capped: list[str] = []
    if len(units) > MAX_QUERY_TERMS:
        by_rarity = sorted(units, key=lambda unit: frequencies[unit.terms])
        kept = {unit.terms for unit in by_rarity[:MAX_QUERY_TERMS]}
        capped = [unit.word for unit in units if unit.terms not in kept]
        units = [unit for unit in units if unit.terms in kept]
    notes: list[str] = []
    if unknown:
        notes.append(f"not in this KB's index (ignored by keyword search): {shown_words(unknown)}")
    if weightless_words:
        notes.append("in at least half of this KB's passages, so without keyword weight (ignored by keyword "
                     f"search): {shown_words(weightless_words)}")
    if capped:
        notes.append(
            f"the query has more than {MAX_QUERY_TERMS} distinct terms; keyword search used the "
            f"{MAX_QUERY_TERMS} rarest and ignored {len(capped)} more"
        )
    if analyzed.words_ignored:
        notes.append(f"the query was cut to its first words; {analyzed.words_ignored} more were ignored")
    return KeywordPlan(
        units=tuple(units),
        document_frequency=frequencies,
        unknown_words=tuple(unknown),
        weightless_words=tuple(weightless_words),
        function_words_only=function_words_only,
        capped_words=tuple(capped),
        chunk_count=chunk_count,
        notes=tuple(notes),
    )


def shown_words(words: list[str], most: int = 20) -> str:
    more = f" and {len(words) - most} more" if len(words) > most else ""
    return ", ".join(shown_word(word) for word in words[:most]) + more


def shown_word(word: str, limit: int = 40) -> str:
    return word if len(word) <= limit else word[: limit - 1] + "…"


def bm25_search(
    conn: sqlite3.Connection,
    plan: KeywordPlan,
    limit: int,
    *,
    scope_sql: str | None = None,
    scope_params: list[object] | None = None,
    options: KeywordOptions | None = None,
) -> list[tuple[int, float]]:
    """(chunk_id, bm25 score) best first; the score is FTS5's, negated so that higher is better.

    `scope_sql` selects the chunk ids the search may return (the filters); None means all.
    """
    options = options or KeywordOptions()
    match = plan.match
    if match is None or limit <= 0:
        return []
    where = ["chunks_fts MATCH ?"]
    params: list[object] = [match]
    if scope_sql is not None:
        where.append(f"chunks_fts.rowid IN ({scope_sql})")
        params.extend(scope_params or [])
    if options.strategy is KeywordStrategy.QUORUM and len(plan.units) > 1:
        quorum_sql, quorum_params = _quorum(plan, options.quorum_fraction)
        where.append(f"chunks_fts.rowid IN ({quorum_sql})")
        params.extend(quorum_params)
    sql = (
        "SELECT chunks_fts.rowid, bm25(chunks_fts) FROM chunks_fts "
        f"WHERE {' AND '.join(where)} ORDER BY bm25(chunks_fts), chunks_fts.rowid LIMIT ?"
    )
    params.append(limit)
    return [(int(rowid), -float(score)) for rowid, score in conn.execute(sql, params)]


def _quorum(plan: KeywordPlan, fraction: float) -> tuple[str, list[object]]:
    """Chunks whose matched units carry at least `fraction` of the query's IDF weight."""
    weights = [plan.idf(unit) for unit in plan.units]
    total = sum(weights)
    selects = " UNION ALL ".join(
        "SELECT rowid AS id, ? AS w FROM chunks_fts WHERE chunks_fts MATCH ?" for _ in plan.units
    )
    params: list[object] = []
    for unit, weight in zip(plan.units, weights, strict=True):
        params.extend([weight, fts_quote(unit.word)])
    # Two equal-weight terms compare strictly, or either alone would clear half the bar and the
    # quorum would silently be the OR it replaces.
    comparison = ">" if len(plan.units) == 2 else ">="
    params.append(total * fraction)
    return f"SELECT id FROM ({selects}) GROUP BY id HAVING sum(w) {comparison} ?", params
