"""The keyword side's candidate pool at scale: FTS5's bm25() first rows, without scoring every row.

The keyword side rescores the rows FTS5's bm25() ranks first (search/bm25.py
`scored_from_term_counts`). FTS5 computes bm25() for every row the OR of the query's terms
matches before it sorts: at 917,529 chunks a query of common words matches 100k-280k rows, and
bm25() on them is ~90% of the keyword side's time (the MATCH alone walks the same postings in a
tenth of it; docs/perf/search.md, "The keyword side at 917,529 chunks").

MaxScore (Turtle and Flood 1995), exact: a term adds at most IDF × (k1 + 1) to FTS5's bm25()
(its frequency term f(k1 + 1) / (f + k1 × norm) stays below k1 + 1 for any length norm > 0, and
FTS5's k1 is 1.2), so a row whose terms' ceilings sum below the score of the pool's last row can
never enter the pool. The statement is run over the rows holding every term of at least one
smallest set of terms whose ceilings reach a floor (`reaching`; "kernel module parameters": any
two of the three), the floor first guessed, then checked against the last score the statement
returned, a real row's score and so at most the true last score (`pool_of`). Every score still
comes from FTS5's own bm25() over the whole query: the restriction is a filter on the rows the
MATCH finds (`+rowid IN (SELECT rowid ... MATCH groups)`), never a different MATCH, so the rows,
their order and their scores are FTS5's to the float; only rows that provably score below the pool
are left unscored (tests/test_keyword_pool.py compares both on an index built by the sync).
The document frequencies are the plan's (fts5vocab 'row', what FTS5's own IDF counts).

A query of up to three terms is taken apart by the set of its terms each row holds (`by_term_sets`):
one statement per set, its MATCH the set's terms AND-ed and every other term NOT-ed, in the query's
order (`term_set_expression`). Each phrase's IDF is FTS5's from its own postings whatever the
expression, the terms a row lacks add exactly 0.0, and the ones it holds are summed in the same
order as in the OR, so each row's score is the OR's to the float. The sets are visited by their
ceilings' sum, highest first, and the visit stops where that sum falls below the pool's last score
so far: no row of a later set can enter. This never walks the OR's whole union nor filters it row
by row, which is what a restricted statement of common terms spends ("kernel module parameters",
every term in ~50k rows: docs/perf/search.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable

# FTS5's bm25() k1 (fixed in fts5_aux.c).
FTS5_K1 = 1.2
# Below this many matched postings (the sum of the terms' document frequencies) one statement
# scores them all: a restricted statement walks the groups' postings besides the query's, which only
# pays when bm25() on every row costs more (measured at 917,529 chunks, docs/perf/search.md). A
# ~10k-chunk KB rarely reaches it: a term in half its chunks is weightless, left out of the plan.
PRUNE_FROM_POSTINGS = 20_000
# Run the restricted statement only when it leaves at most this share of the postings to score;
# above it the unrestricted statement costs about the same and needs no subquery.
RESTRICT_BELOW_SHARE = 0.8
# Rounding in FTS5's sum cannot reach this relative margin; a ceiling closer than it to the floor
# keeps its term.
MARGIN = 1e-9

# Up to this many terms, the rows that can reach the pool are described exactly by the smallest
# sets of terms whose ceilings reach the floor (2^n sets to try); above it, or past MAX_GROUPS such
# sets, by the terms a row must hold one of.
MAX_TERMS_GROUPED = 10
MAX_GROUPS = 32
# Floors tried before the unrestricted statement when the rows a floor leaves are fewer than the pool.
GUESSES = 2
# Queries of up to this many terms are taken apart by term set (`by_term_sets`; 2^n - 1 sets at
# most). Each of its statements walks every term's postings once for FTS5's IDF, so with four or more
# terms the restricted statement cost less (measured at 917,529 chunks, docs/perf/search.md).
MAX_TERMS_BY_SET = 3
# ... from this many matched postings: below PRUNE_FROM_POSTINGS too, where at 917,529 chunks one
# statement over 12k-20k postings took 2-5x the sets' time; never reached on the bench queries at
# 13,650 chunks, where a statement costs a few ms either way.
BY_SET_FROM_POSTINGS = 10_000

Hits = list[tuple[int, float]]
Groups = list[tuple[int, ...]]
# (groups of term indexes: a row is scored when it holds every term of one group; None: every row)
Ranked = Callable[[Groups | None], Hits]
# The same statement over the rows holding every term of the set (indexes) and none of the others.
Exactly = Callable[[tuple[int, ...]], Hits]


def fts5_idf(rows: int, document_frequency: int) -> float:
    """FTS5's bm25() IDF: log((N - df + 0.5) / (df + 0.5)), 1e-6 where that is not positive."""
    idf = math.log((rows - document_frequency + 0.5) / (document_frequency + 0.5))
    return idf if idf > 0.0 else 1e-6


def ceiling(rows: int, document_frequency: int) -> float:
    """The most one term can add to a row's FTS5 bm25() score (column weights >= 0)."""
    return fts5_idf(rows, document_frequency) * (FTS5_K1 + 1.0)


def pool_of(frequencies: list[int], rows: int, pool: int, context_weight: float, ranked: Ranked,
            exactly: Exactly | None = None) -> Hits:
    """FTS5's first `pool` rows by bm25() for the OR of the terms whose document frequencies are
    `frequencies` (in the query's order): `ranked(None)` exactly, scoring fewer rows where the
    bound allows. `ranked(groups)` is the same statement limited to the rows holding every term of
    at least one group.

    The floor is first guessed as the rarest term's ceiling (on the development queries at 917,529
    chunks the pool's last score was above it), the statement run over the rows that guess leaves,
    and the guess then checked against the last score it returned: a real row's score, so a true
    floor. Where those rows are fewer than the pool, the next rarest term's ceiling is tried once;
    where a row the floor lets in was not scored, the rows it needs are scored in one more statement.
    With `exactly`, a query of up to MAX_TERMS_BY_SET terms is taken apart by term set instead."""
    total = sum(frequencies)
    if context_weight < 0.0 or len(frequencies) < 2 or pool <= 0:
        return ranked(None)
    ceilings = [ceiling(rows, frequency) for frequency in frequencies]
    if exactly is not None and len(frequencies) <= MAX_TERMS_BY_SET and total >= BY_SET_FROM_POSTINGS:
        return by_term_sets(ceilings, pool, exactly)
    if total < PRUNE_FROM_POSTINGS:
        return ranked(None)
    for guess in sorted(set(ceilings), reverse=True)[:GUESSES]:
        groups = reaching(ceilings, guess)
        if _postings(groups, frequencies) > RESTRICT_BELOW_SHARE * total:
            break
        first = ranked(groups)
        if len(first) < pool:  # fewer rows than the pool hold those terms (or pass the scope): no floor
            continue
        needed = reaching(ceilings, first[-1][1])
        if all(any(set(scored) <= set(group) for scored in groups) for group in needed):
            return first  # every row that can reach the pool holds one of the groups scored
        if _postings(needed, frequencies) > RESTRICT_BELOW_SHARE * total:
            break
        return ranked(needed)
    return ranked(None)


def by_term_sets(ceilings: list[float], pool: int, exactly: Exactly) -> Hits:
    """The first `pool` rows, best first, of the rows holding each set of terms in turn, the sets
    by their ceilings' sum, highest first, until the next set's sum is below the pool's last score
    so far: none of its rows, nor any later set's, can enter. The sets are disjoint, so each row is
    scored once, and the order is the statement's: score, then rowid."""
    count = len(ceilings)
    sets = sorted((tuple(index for index in range(count) if mask >> index & 1) for mask in range(1, 1 << count)),
                  key=lambda members: -math.fsum(ceilings[index] for index in members))
    found: Hits = []
    for members in sets:
        bound = math.fsum(ceilings[index] for index in members) * (1.0 + MARGIN)
        if len(found) >= pool and bound < found[-1][1]:
            break
        found = sorted(found + exactly(members), key=lambda hit: (-hit[1], hit[0]))[:pool]
    return found


def term_set_expression(phrases: list[str], members: tuple[int, ...]) -> str:
    """FTS5's MATCH for the rows holding every phrase of `members` (indexes into `phrases`, which
    are quoted) and none of the others: the members AND-ed in order, then each other NOT-ed."""
    expression = "(" + " AND ".join(phrases[index] for index in members) + ")"
    for index in range(len(phrases)):
        if index not in members:
            expression = f"({expression} NOT {phrases[index]})"
    return expression


def reaching(ceilings: list[float], floor: float) -> Groups:
    """Groups of terms such that a row whose terms' ceilings sum to `floor` or more holds every term
    of at least one: the minimal such sets of terms, or where they are too many, each term a row
    must hold one of (one group each)."""
    def reaches(members: list[int]) -> bool:
        return math.fsum(ceilings[index] for index in members) * (1.0 + MARGIN) >= floor

    count = len(ceilings)
    if count <= MAX_TERMS_GROUPED:
        groups: Groups = []
        for mask in range(1, 1 << count):
            members = [index for index in range(count) if mask >> index & 1]
            if reaches(members) and not any(reaches([other for other in members if other != index])
                                            for index in members):
                groups.append(tuple(members))
        if len(groups) <= MAX_GROUPS:
            return groups
    commonest_first = sorted(range(count), key=lambda index: (ceilings[index], index))
    dropped: list[int] = []
    for index in commonest_first:
        if reaches([*dropped, index]):
            break
        dropped.append(index)
    return [(index,) for index in range(count) if index not in dropped]


def _postings(groups: Groups, frequencies: list[int]) -> int:
    """At most how many rows the groups select (each group's rarest term's); no groups: all."""
    if not groups:
        return sum(frequencies)
    return sum(min(frequencies[index] for index in group) for group in groups)
