"""The keyword retriever: BM25 over FTS5, compiled from analysed query units, never from user text.

The plan, measured on the development corpora (docs/QUALITY.md):
  1. function words are dropped whenever the query has any other word, and so are words Porter
     stems onto a function word's term (using -> us, one -> on), which would otherwise match the
     function word's rows; a query made only of function words ("what is it") searches them;
  2. terms the index has never seen (df = 0) are dropped: they can match nothing, and naming them
     in the result's notes tells the caller which words the KB does not know;
  3. weightless terms — held by at least half the chunks, where FTS5's bm25() clamps the IDF to
     1e-6; for a word step 5 scores, by BM25F's document frequency (a period named in the running
     heads of half the chunks, in one filing of two, is not weightless) — are dropped while a term
     with weight remains: they move no score by more than ~2e-6, so the only rows they change are
     those holding nothing else, but every row holding one would be scored, and at 100k chunks they
     are the dearest part of a query (under step 5's BM25 such a term weighs at most log 2; dropping
     it was measured neutral on both development corpora, and it stays a cost rule);
  4. past MAX_QUERY_TERMS distinct terms, the rarest are kept;
  5. the rest are OR-ed, each quoted and matched by FTS5; FTS5's bm25() (k1 1.2 and b 0.75, fixed)
     picks the first 3 × `limit` rows (never scoring the rows that provably cannot be among them:
     search/keyword_pool.py, the same rows and scores), and those are ranked by BM25 with k1 2.5, b 0.4 and
     Lucene's IDF, computed from each chunk's term counts (`scored_from_term_counts`, index/terms.py):
     BM25F over the chunk's text and its document context, each field normalised by its own length
     and the IDF counting a document's context once, not once per chunk (issue #46).
     That ranks at or above bm25s on both English development corpora, where bm25() alone is
     significantly below it on tldr-nl2bash-dev (docs/QUALITY.md), for ~2 ms a query at 100k
     chunks. A plan holding a phrase (a word the tokenizer splits, a word of Han, kana or Hangul)
     is ranked by FTS5's bm25() alone, which alone knows where a phrase occurs.
A query whose content words are all unknown is answered with nothing from this retriever: falling
back to its function words would turn a visibly empty result into a confidently wrong one.

A word of Han, kana or Hangul is a phrase of its character bigrams (lexical/scripts.py). It is
searched as its bigrams, OR-ed (`SegmentedPlan.OR`), and a query holding one is ranked by the BM25
of step 5 with k1 and b of its own (`segmented_k1` 0.7, `segmented_b` 0.75: a bigram repeats far
more than a word and wants less saturation and more length normalisation than the English 2.5 and
0.4), over FTS5's first `limit` rows only (`segmented_pool`: rescoring three times as many changed
no score and cost the most). Measured on the CJK development set against plain FTS5 over character
bigrams and against main's plan (the phrase and its bigrams in one OR, ranked by FTS5's bm25()),
fitted on held-out halves (docs/QUALITY.md, bench/bench_cjk_keyword.py). The phrase plans stay as
options. A query without such a word runs exactly as before.

The IDF-weighted quorum (a chunk qualifies when the terms it carries hold at least half the
query's IDF weight) and a ubiquity cut are kept as measured alternatives, not defaults: on ranked
top-k retrieval the quorum halves nDCG@10 (long queries leave almost no chunk qualifying), and
the cut saves little time at the price of quality.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum

from pinakes.index import chunk_counts
from pinakes.search import keyword_pool
from pinakes.search.fts5_records import averages as _averages
from pinakes.search.fts5_records import field_scales as _field_scales
from pinakes.search.query import MAX_QUERY_TERMS, AnalyzedQuery, QueryUnit, fts_quote

VOCAB_TABLE = "temp.pnk_chunks_vocab"
# The same vocabulary per column: a term's rows in the chunks' own text, apart from their context.
COLUMN_VOCAB_TABLE = "temp.pnk_chunks_vocab_col"
# BM25 with the keyword side's own k1 and b rescores this many times `limit` of the rows FTS5's
# bm25() ranks first.
RESCORE_POOL = 3
# A context term's weight against a text term's (KeywordOptions.context_weight), measured in
# docs/QUALITY.md "Document context as its own field".
CONTEXT_WEIGHT = 1.0
# BM25F's length normalisation of the context field, against the context's own average length
# (KeywordOptions.context_b; docs/QUALITY.md "Document context in the keyword side: BM25F").
CONTEXT_B = 0.75
# BM25's k1 and b for a query holding Han, kana or Hangul (KeywordOptions.segmented_k1/_b), fitted on
# held-out halves of the CJK development set (docs/QUALITY.md); None ranks it by FTS5's bm25().
SEGMENTED_K1: float | None = 0.7
SEGMENTED_B = 0.75
SEGMENTED_POOL = 1


class KeywordStrategy(Enum):
    OR = "or"
    QUORUM = "quorum"


class SegmentedPlan(Enum):
    """How a word of Han, kana or Hangul (a phrase of character bigrams) is searched."""

    PHRASE = "phrase"  # the phrase only: nothing where the characters do not stand together
    OR = "or"  # its bigrams, OR-ed, from the start
    PHRASE_AND_OR = "phrase-and-or"  # the phrase and its bigrams in one OR: the phrase adds weight
    PHRASE_THEN_OR = "phrase-then-or"  # the phrase; the bigrams fill what the phrase left empty


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
    # BM25's term-frequency saturation and length normalisation (`scored_from_term_counts`); None ranks
    # by FTS5's bm25() alone, whose k1 1.2 and b 0.75 are fixed. k1 2.5 with b 0.4 ranks best on the
    # English development corpora, at or above bm25s on each (docs/QUALITY.md, bench/bench_keyword.py).
    k1: float | None = 2.5
    b: float = 0.4
    segmented: SegmentedPlan = SegmentedPlan.OR
    # k1 and b for a query holding Han, kana or Hangul, whose terms are character bigrams: shorter
    # and far more repeated than words, they rank worse under the English words' k1 2.5 and b 0.4
    # (docs/QUALITY.md, bench/bench_cjk_keyword.py). None: FTS5's bm25().
    segmented_k1: float | None = SEGMENTED_K1
    segmented_b: float = SEGMENTED_B
    # How many times `limit` of FTS5's bm25() rows such a query rescores (RESCORE_POOL for words).
    segmented_pool: int = SEGMENTED_POOL
    # The weight of a term in a chunk's context (its document's title, file name, running heads,
    # front matter and its heading trail: pipeline/context.py) against one in its text: BM25F's
    # field weight, applied to the term frequency before saturation (docs/QUALITY.md).
    context_weight: float = CONTEXT_WEIGHT
    # BM25F: the context's counts are normalised by the context's own length (this b, against the
    # average context), the text's by the text's (`b`), and their weighted sum saturates once.
    context_b: float = CONTEXT_B


@dataclass(frozen=True)
class KeywordPlan:
    """What the keyword retriever will search for, and what it left out and why."""

    units: tuple[QueryUnit, ...]
    document_frequency: dict[tuple[str, ...], int]
    unknown_words: tuple[str, ...] = ()
    unknown_units: tuple[QueryUnit, ...] = ()  # the units of the words the index has never seen
    weightless_words: tuple[str, ...] = ()
    function_words_only: bool = False
    capped_words: tuple[str, ...] = ()
    chunk_count: int = 0
    notes: tuple[str, ...] = field(default=())
    # The units again with every segmented phrase relaxed into its bigrams, searched when `units`
    # find too little (SegmentedPlan.PHRASE_THEN_OR); None when there is nothing to relax.
    relaxed_units: tuple[QueryUnit, ...] | None = None
    # BM25F's document frequency of each single term (`DocumentFrequencies.in_fields`): rows holding
    # it in their own text plus documents holding it in their context. Read by `field_idf`.
    field_frequency: dict[str, int] = field(default_factory=dict[str, int])

    @property
    def match(self) -> str | None:
        return match_expression(self.units)

    @property
    def relaxed_match(self) -> str | None:
        return None if self.relaxed_units is None else match_expression(self.relaxed_units)

    def idf(self, unit: QueryUnit) -> float:
        """Lucene's BM25 IDF: positive for every term, unlike FTS5's clamped one."""
        df = self.document_frequency.get(unit.terms, 0)
        return math.log(1.0 + (self.chunk_count - df + 0.5) / (df + 0.5))

    def field_idf(self, term: str) -> float:
        """Lucene's IDF over BM25F's document frequency (`field_frequency`), what the keyword side
        ranks by. A document's context is on every one of its chunks, so counting the rows that hold
        a term in their context would count one document once per chunk: the company a filing's
        running head names would weigh less the longer the filing. Falls back to the rows' count
        where the fields' was not taken."""
        df = self.field_frequency.get(term)
        if df is None:
            df = self.document_frequency.get((term,), 0)
        return math.log(1.0 + (self.chunk_count - max(df, 1) + 0.5) / (max(df, 1) + 0.5))


def match_expression(units: tuple[QueryUnit, ...] | list[QueryUnit]) -> str | None:
    return " OR ".join(fts_quote(unit.match_text) for unit in units) if units else None


def ensure_vocabulary(conn: sqlite3.Connection) -> None:
    """Connection-private fts5vocab tables over chunks_fts: document frequency in one indexed
    lookup, over whole rows and per column.

    They live in the temp schema, which a `mode=ro` connection may still write.
    """
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCAB_TABLE} USING fts5vocab (main, chunks_fts, 'row')")
    conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {COLUMN_VOCAB_TABLE} USING fts5vocab (main, chunks_fts, 'col')")


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
        self._in_fields: dict[str, int] = {}
        self._documents_per_chunk: float | None = None

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

    def in_fields(self, terms: list[str]) -> dict[str, int]:
        """BM25F's document frequency of each single term: the rows holding it in their own text,
        plus the documents holding it in their context, never more than the rows holding it at all.
        A document's context is on every one of its chunks, so its rows there are counted as
        documents: the context rows over the index's chunks per document, rounded up (fts5vocab
        'col' has rows, not documents; one lookup per term instead of a pass over its postings)."""
        if len(self._in_fields) + len(terms) > self.MAX_REMEMBERED:
            self._in_fields.clear()
        per_chunk = self._documents_per_chunk
        if per_chunk is None:
            chunks, documents = chunk_counts.of_index(self._conn)  # recorded by the sync, else scanned
            per_chunk = self._documents_per_chunk = documents / chunks if chunks else 1.0
        rows = self.of([QueryUnit(word=term, terms=(term,), function_word=False) for term in terms])
        answer: dict[str, int] = {}
        for term in terms:
            count = self._in_fields.get(term)
            if count is None:
                columns = dict(self._conn.execute(f"SELECT col, doc FROM {COLUMN_VOCAB_TABLE} WHERE term = ?", (term,)))
                in_context = math.ceil(int(columns.get("context", 0)) * per_chunk)
                count = self._in_fields[term] = min(rows[(term,)], int(columns.get("text", 0)) + in_context)
            answer[term] = count
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
            "SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?", (fts_quote(unit.match_text),)
        ).fetchone()
        return int(row[0])


def weightless(document_frequency: int, chunk_count: int) -> bool:
    """FTS5's bm25() IDF is log((N - df + 0.5) / (df + 0.5)), clamped to 1e-6 when not positive."""
    return chunk_count > 0 and 2 * document_frequency >= chunk_count


def relaxed(units: list[QueryUnit]) -> list[QueryUnit]:
    """Each segmented phrase replaced by its bigrams, each its own unit (first occurrence kept)."""
    result: dict[tuple[str, ...], QueryUnit] = {}
    for unit in units:
        if unit.segmented and len(unit.terms) > 1:
            for term in unit.terms:
                result.setdefault((term,), QueryUnit(word=term, terms=(term,), function_word=False, segmented=True))
        else:
            result.setdefault(unit.terms, unit)
    return list(result.values())


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
    counter = document_frequencies or DocumentFrequencies(conn)
    # A word the keyword side scores by its fields (`scored_from_term_counts`) is weightless by the
    # document frequency its weight comes from, BM25F's: a word in half the chunks only through their
    # documents' context (the period in a filing's running heads, in a KB of two quarters) is rare.
    in_fields = counter.in_fields if options.k1 is not None and options.strategy is KeywordStrategy.OR else None
    plan = _planned(units, counter.of, options, chunk_count, analyzed, function_words_only, in_fields)
    singles = list(dict.fromkeys(unit.terms[0] for unit in (*plan.units, *(plan.relaxed_units or ()))
                                 if len(unit.terms) == 1))
    return replace(plan, field_frequency=counter.in_fields(singles)) if singles else plan


def _planned(
    units: list[QueryUnit], frequencies_of: Callable[[list[QueryUnit]], dict[tuple[str, ...], int]],
    options: KeywordOptions, chunk_count: int, analyzed: AnalyzedQuery, function_words_only: bool,
    in_fields: Callable[[list[str]], dict[str, int]] | None = None,
) -> KeywordPlan:
    phrases = [unit for unit in units if unit.segmented and len(unit.terms) > 1]
    if not phrases:
        return _pruned(units, frequencies_of(units), options, chunk_count, analyzed, function_words_only, in_fields)
    loose = relaxed(units)
    loose_frequencies = frequencies_of(loose)
    if options.segmented is SegmentedPlan.OR:
        plan = _pruned(loose, loose_frequencies, options, chunk_count, analyzed, function_words_only)
    elif options.segmented is SegmentedPlan.PHRASE_AND_OR:
        both = list({unit.terms: unit for unit in units + loose}.values())
        plan = _pruned(both, frequencies_of(both), options, chunk_count, analyzed, function_words_only)
    elif options.segmented is SegmentedPlan.PHRASE_THEN_OR:
        strict = _pruned(units, frequencies_of(units), options, chunk_count, analyzed, function_words_only)
        relaxed_plan = _pruned(loose, loose_frequencies, options, chunk_count, analyzed, function_words_only)
        plan = replace(relaxed_plan, units=strict.units, relaxed_units=relaxed_plan.units,
                       document_frequency={**loose_frequencies, **strict.document_frequency})
    else:
        plan = _pruned(units, frequencies_of(units), options, chunk_count, analyzed, function_words_only)
    # A segmented word is unknown when none of its bigrams is in the index. That the phrase, or
    # one bigram, is absent is no news to the caller, who typed the word.
    quiet = {unit.word for unit in phrases} | {unit.word for unit in loose if unit.segmented}
    unknown = [word for word in plan.unknown_words if word not in quiet] + [
        unit.word for unit in phrases if all(loose_frequencies.get((term,), 0) == 0 for term in unit.terms)]
    return replace(plan, unknown_words=tuple(unknown),
                   notes=_notes(unknown, list(plan.weightless_words), list(plan.capped_words), analyzed))


def _pruned(
    units: list[QueryUnit], frequencies: dict[tuple[str, ...], int], options: KeywordOptions, chunk_count: int,
    analyzed: AnalyzedQuery, function_words_only: bool,
    in_fields: Callable[[list[str]], dict[str, int]] | None = None,
) -> KeywordPlan:
    """The plan for these units: unknown, weightless and surplus terms left out, and noted.
    `in_fields`: BM25F's document frequency, which decides whether a single unsegmented word is
    weightless (asked only of those the rows call so: it is never above the rows' count)."""
    if options.ubiquity_ceiling is not None and chunk_count:
        ceiling = options.ubiquity_ceiling * chunk_count
        rarer = [unit for unit in units if frequencies[unit.terms] <= ceiling]
        units = rarer if any(frequencies[unit.terms] > 0 for unit in rarer) else units
    unknown: list[str] = []
    unknown_units: list[QueryUnit] = []
    if options.drop_unknown_terms:
        unknown_units = [unit for unit in units if frequencies[unit.terms] == 0]
        unknown = [unit.word for unit in unknown_units]
        units = [unit for unit in units if frequencies[unit.terms] > 0]
    weightless_words: list[str] = []
    # Only the OR plan ranks by bm25(); the quorum weighs terms by its own, always positive, IDF.
    if options.drop_weightless_terms and options.strategy is KeywordStrategy.OR:
        heavy = [unit for unit in units if weightless(frequencies[unit.terms], chunk_count)]
        fielded = [unit.terms[0] for unit in heavy if len(unit.terms) == 1 and not unit.segmented]
        fields = in_fields(fielded) if in_fields is not None and fielded else {}
        weighs = {term for term, frequency in fields.items() if not weightless(frequency, chunk_count)}
        heavy = [unit for unit in heavy if not (len(unit.terms) == 1 and not unit.segmented and unit.terms[0] in weighs)]
        weighted = [unit for unit in units if unit not in heavy]
        if weighted:
            weightless_words = [unit.word for unit in heavy]
            units = weighted
    capped: list[str] = []
    if len(units) > MAX_QUERY_TERMS:
        by_rarity = sorted(units, key=lambda unit: frequencies[unit.terms])
        kept = {unit.terms for unit in by_rarity[:MAX_QUERY_TERMS]}
        capped = [unit.word for unit in units if unit.terms not in kept]
        units = [unit for unit in units if unit.terms in kept]
    return KeywordPlan(
        units=tuple(units),
        document_frequency=frequencies,
        unknown_words=tuple(unknown),
        unknown_units=tuple(unknown_units),
        weightless_words=tuple(weightless_words),
        function_words_only=function_words_only,
        capped_words=tuple(capped),
        chunk_count=chunk_count,
        notes=_notes(unknown, weightless_words, capped, analyzed),
    )


def _notes(unknown: list[str], weightless_words: list[str], capped: list[str],
           analyzed: AnalyzedQuery) -> tuple[str, ...]:
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
    return tuple(notes)


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
    With a relaxed plan, the rows the phrases found come first (their scores), and the relaxed
    query's rows fill the list behind them (its scores).
    """
    options = options or KeywordOptions()
    if limit <= 0:
        return []
    hits = _ranked(conn, plan, plan.units, limit, scope_sql, scope_params, options)
    if plan.relaxed_units is not None and len(hits) < limit:
        found = {chunk_id for chunk_id, _ in hits}
        more = _ranked(conn, plan, plan.relaxed_units, limit, scope_sql, scope_params, options)
        hits += [hit for hit in more if hit[0] not in found][: limit - len(hits)]
    return hits


def _ranked(
    conn: sqlite3.Connection, plan: KeywordPlan, units: tuple[QueryUnit, ...], limit: int,
    scope_sql: str | None, scope_params: list[object] | None, options: KeywordOptions,
) -> list[tuple[int, float]]:
    match = match_expression(units)
    if match is None:
        return []
    k1, b, pool = _ranking(units, options)
    if k1 is not None and options.strategy is KeywordStrategy.OR and all(len(unit.terms) == 1 for unit in units):
        return scored_from_term_counts(conn, plan, units, limit, scope_sql, scope_params, k1, b,
                                       options.context_weight, options.context_b, pool)
    quorum = _quorum(plan, units, options.quorum_fraction) \
        if options.strategy is KeywordStrategy.QUORUM and len(units) > 1 else None
    return _fts5_ranked(conn, match, limit, scope_sql, scope_params, quorum, options.context_weight)


def _ranking(units: tuple[QueryUnit, ...], options: KeywordOptions) -> tuple[float | None, float, int]:
    """(k1, b, rescoring pool factor) for these units: a word of Han, kana or Hangul's own, else the words'."""
    return (options.segmented_k1, options.segmented_b, options.segmented_pool) \
        if any(unit.segmented for unit in units) else (options.k1, options.b, RESCORE_POOL)


def bm25_search_twice(
    conn: sqlite3.Connection, plan: KeywordPlan, limit: int, scope: tuple[str, list[object]] | None,
    without: tuple[str, list[object]], left_out: frozenset[int], options: KeywordOptions | None = None,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
    """`bm25_search` scoped by `scope`, and by `without` (the rows `scope` allows less the chunks
    `left_out`: search/twice.py), each list its own call's. FTS5's first rows are found once,
    `len(left_out)` deeper than a pool: its order is total (score, then rowid), so dropping `left_out`
    leaves the other pool in order. Each row's BM25F is computed once. Other plans: two searches."""
    options = options or KeywordOptions()
    units, (scope_sql, scope_params) = plan.units, scope or (None, None)
    k1, b, factor = _ranking(units, options)
    if (limit <= 0 or plan.relaxed_units is not None or k1 is None or options.strategy is not KeywordStrategy.OR
            or not units or any(len(unit.terms) != 1 for unit in units)):
        return (bm25_search(conn, plan, limit, scope_sql=scope_sql, scope_params=scope_params, options=options),
                bm25_search(conn, plan, limit, scope_sql=without[0], scope_params=without[1], options=options))
    pool, totals = limit * factor, _averages(conn)
    deeper = _fts5_pool(conn, plan, units, pool + len(left_out), scope_sql, scope_params, options.context_weight,
                        totals[0])
    first, second = deeper[:pool], [hit for hit in deeper if hit[0] not in left_out][:pool]
    used = list(dict.fromkeys(rowid for rowid, _ in (*first, *second)))
    scores = _bm25f_scores(conn, plan, units, used, totals, (k1, b, options.context_weight, options.context_b))
    return _best(first, scores, limit), _best(second, scores, limit)


def _fts5_ranked(conn: sqlite3.Connection, match: str, limit: int, scope_sql: str | None,
                 scope_params: list[object] | None,
                 quorum: tuple[str, list[object]] | None = None,
                 context_weight: float = CONTEXT_WEIGHT, within: str | None = None) -> list[tuple[int, float]]:
    """(rowid, score) by FTS5's bm25() (the text column weighing 1, the context `context_weight`),
    negated so that higher is better. `within`: only the rows this MATCH expression also finds are
    scored, by the whole `match` (search/keyword_pool.py)."""
    where = ["chunks_fts MATCH ?"]
    params: list[object] = [context_weight, match]
    if scope_sql is not None:
        # `+`: the scope is checked on the rows MATCH finds, never handed to FTS5 as rowids to look
        # up one by one (a MATCH per allowed row: 675 ms instead of 3 at 1 866 chunks, p50, and linear in
        # the KB's size; docs/perf/search.md, "Filtered keyword search").
        where.append(f"+chunks_fts.rowid IN ({scope_sql})")
        params.extend(scope_params or [])
    if quorum is not None:
        where.append(f"chunks_fts.rowid IN ({quorum[0]})")
        params.extend(quorum[1])
    if within is not None:
        where.append("+chunks_fts.rowid IN (SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ?)")
        params.append(within)
    sql = (
        "SELECT chunks_fts.rowid, bm25(chunks_fts, 1.0, ?) FROM chunks_fts "
        f"WHERE {' AND '.join(where)} ORDER BY bm25(chunks_fts, 1.0, ?), chunks_fts.rowid LIMIT ?"
    )
    params.extend([context_weight, limit])
    return [(int(rowid), -float(score)) for rowid, score in conn.execute(sql, params)]


def scored_from_term_counts(
    conn: sqlite3.Connection, plan: KeywordPlan, units: tuple[QueryUnit, ...], limit: int,
    scope_sql: str | None, scope_params: list[object] | None, k1: float, b: float,
    context_weight: float = CONTEXT_WEIGHT, context_b: float = CONTEXT_B, pool_factor: int = RESCORE_POOL,
) -> list[tuple[int, float]]:
    """BM25F with the given k1 and b over the `pool_factor` × `limit` rows FTS5's bm25() ranks first:
    term frequencies from `chunk_terms` (index/terms.py, written with each chunk), each field's
    length from `chunks_fts_docsize`, the fields' averages from the FTS table's own averages record.

    Each field is normalised by its own length (Robertson, Zaragoza and Taylor 2004): a term counts
    frequency / (1 - b + b × text length / average text) plus `context_weight` × context_frequency /
    (1 - context_b + context_b × context length / average context), and that sum saturates once,
    at k1. The IDF is Lucene's, log(1 + (N - df + 0.5) / (df + 0.5)), over the rows whose own text
    holds the term plus the documents whose context does (`KeywordPlan.field_idf`). So a word every chunk of a document carries in its
    context neither weighs as if the chunk's short text had said it, nor loses its rarity by being
    counted once per chunk (docs/QUALITY.md, "Document context in the keyword side: BM25F").

    A row bm25() ranks that low is not one another k1 and b lift into the top `limit` (the pool was
    measured at 3, 5 and 10 × `limit` with identical rankings on both English development corpora).
    A phrase unit (more than one term) has no count in `chunk_terms`, so a plan holding one is
    ranked by FTS5's bm25() instead; so is a pool holding a row without counts (a text rewritten in
    place, which the sync never does), rather than dropping it.
    """
    totals = _averages(conn)
    ranked = _fts5_pool(conn, plan, units, limit * pool_factor, scope_sql, scope_params, context_weight, totals[0])
    scores = _bm25f_scores(conn, plan, units, [rowid for rowid, _ in ranked], totals, (k1, b, context_weight, context_b))
    return _best(ranked, scores, limit)


def _fts5_pool(conn: sqlite3.Connection, plan: KeywordPlan, units: tuple[QueryUnit, ...], pool: int, scope_sql: str | None,
               scope_params: list[object] | None, context_weight: float, rows: int) -> list[tuple[int, float]]:
    """FTS5's bm25() first `pool` rows for the OR of `units` (search/keyword_pool.py) in an index of `rows`."""
    match = match_expression(units)
    if match is None or rows == 0:
        return []
    phrases = [fts_quote(unit.match_text) for unit in units]
    return keyword_pool.pool_of(
        [plan.document_frequency.get(unit.terms, 0) for unit in units], rows, pool, context_weight,
        lambda groups: _fts5_ranked(conn, match, pool, scope_sql, scope_params, context_weight=context_weight,
                                     within=None if groups is None else _groups_expression(units, groups)),
        lambda members: _fts5_ranked(conn, keyword_pool.term_set_expression(phrases, members), pool,
                                     scope_sql, scope_params, context_weight=context_weight))


def _bm25f_scores(conn: sqlite3.Connection, plan: KeywordPlan, units: tuple[QueryUnit, ...], pool: list[int],
                  totals: tuple[int, int, int], weighting: tuple[float, float, float, float]) -> dict[int, float]:
    """BM25F of each row of `pool` that has term counts (`scored_from_term_counts`): `totals` are
    FTS5's averages record, `weighting` (k1, b, context weight, context b)."""
    if not pool:
        return {}
    (k1, b, context_weight, context_b), (rows, text_total, context_total) = weighting, totals
    average_text, average_context = text_total / rows, context_total / rows
    weights = {unit.terms[0]: plan.field_idf(unit.terms[0]) for unit in units}
    term_marks, pool_marks = ", ".join("?" * len(weights)), ", ".join("?" * len(pool))
    # Per row, what one count weighs in each field: its length normalisation, inverted once.
    scales = {rowid: _field_scales(size, b, average_text, context_b, average_context, context_weight)
              for rowid, size in conn.execute(f"SELECT id, sz FROM chunks_fts_docsize WHERE id IN ({pool_marks})", pool)}
    sql = (f"SELECT chunk_id, term, frequency, context_frequency FROM chunk_terms "
           f"WHERE chunk_id IN ({pool_marks}) AND term IN ({term_marks})")
    scores: dict[int, float] = {}
    saturated = k1 + 1.0
    for chunk_id, term, frequency, context_frequency in conn.execute(sql, [*pool, *weights]):
        text_scale, context_scale = scales[chunk_id]
        weight = frequency * text_scale + context_frequency * context_scale
        scores[chunk_id] = scores.get(chunk_id, 0.0) + weights[term] * weight * saturated / (weight + k1)
    return scores


def _best(ranked: list[tuple[int, float]], scores: dict[int, float], limit: int) -> list[tuple[int, float]]:
    """The best `limit` of the pool `ranked` by their BM25F `scores`; bm25()'s order where a row of
    the pool has no counts (a text rewritten in place, which the sync never does), rather than drop it."""
    if any(rowid not in scores for rowid, _ in ranked):
        return ranked[:limit]
    best = sorted(((rowid, scores[rowid]) for rowid, _ in ranked), key=lambda item: (-item[1], item[0]))[:limit]
    return [(int(chunk_id), score) for chunk_id, score in best]


def _groups_expression(units: tuple[QueryUnit, ...], groups: keyword_pool.Groups) -> str:
    """FTS5's MATCH for rows holding every unit of at least one group (of indexes into `units`)."""
    return " OR ".join("(" + " AND ".join(fts_quote(units[index].match_text) for index in group) + ")"
                       for group in groups)


def _quorum(plan: KeywordPlan, units: tuple[QueryUnit, ...], fraction: float) -> tuple[str, list[object]]:
    """Chunks whose matched units carry at least `fraction` of the query's IDF weight."""
    weights = [plan.idf(unit) for unit in units]
    total = sum(weights)
    selects = " UNION ALL ".join(
        "SELECT rowid AS id, ? AS w FROM chunks_fts WHERE chunks_fts MATCH ?" for _ in units
    )
    params: list[object] = []
    for unit, weight in zip(units, weights, strict=True):
        params.extend([weight, fts_quote(unit.match_text)])
    # Two equal-weight terms compare strictly, or either alone would clear half the bar and the
    # quorum would silently be the OR it replaces.
    comparison = ">" if len(units) == 2 else ">="
    params.append(total * fraction)
    return f"SELECT id FROM ({selects}) GROUP BY id HAVING sum(w) {comparison} ?", params
