"""What to do next beside low- or unknown-confidence results (spec §4.2): a free search, and when
the paid escalation is worth naming.

On MCP the calling agent decides what to do with weak evidence; its reasoning is already paid
for. A suggestion is a concrete free search, derived from what this search saw, in the order of
what most often went wrong: words the KB does not know, filters that excluded too much, a single
retriever, and finally too little context (expand with the best passages' distinctive words). A
suggested query reads as a phrase: words are taken out with the function words that joined them
(`without_words`), never leaving "what is the for the base".
"""

from __future__ import annotations

from pinakes.lexical.filters import SearchFilters
from pinakes.lexical.tokenizer import FUNCTION_WORDS, Tokenizer, split_words
from pinakes.search.bm25 import DocumentFrequencies, KeywordPlan, shown_word
from pinakes.search.confidence import LOW, UNKNOWN
from pinakes.search.results import SearchResult, SuggestedSearch

EXPANSION_WORDS = 3
EXPANSION_SOURCE_PASSAGES = 3
# Distinct words considered, longest first. Each word not yet seen in this index generation costs a
# walk of its doclist in fts5vocab; at 100k chunks 24 candidates cost ~2 ms per low-confidence
# search, 8 cost under 1 ms, and the three words finally suggested are almost always among the
# eight longest.
EXPANSION_CANDIDATES = 8


def escalation_worth_naming(result: SearchResult) -> bool:
    """Whether a person should be pointed at `pnk ask --deep` for this result: only where the search
    was not confident *and* something matched. A synthesis over nothing answers nothing, and when the
    filters or the words matched no passage, the free next search (or other filters) is the remedy,
    not a paid call."""
    return result.confidence.level in (LOW, UNKNOWN) and bool(result.passages)


def suggest_next(
    query: str,
    *,
    plan: KeywordPlan | None,
    filters: SearchFilters,
    mode: str,
    passage_texts: list[str],
    document_frequencies: DocumentFrequencies,
    tokenizer: Tokenizer,
) -> SuggestedSearch | None:
    if plan is not None and plan.unknown_words and plan.units:
        kept = without_words(query, {word.lower() for word in plan.unknown_words})
        if kept:
            return SuggestedSearch(
                query=kept,
                reason=f"this KB's index has never seen: {', '.join(shown_word(w) for w in plan.unknown_words[:10])}; "
                       "search without them",
                mode=mode,
            )
    if filters.active:
        return SuggestedSearch(
            query=query, reason="the filters may exclude the answer; search the whole KB", mode=mode, filters={}
        )
    if mode != "hybrid":
        return SuggestedSearch(query=query, reason=f"{mode}-only search; combine both retrievers", mode="hybrid")
    expansion = _expansion_words(query, passage_texts[:EXPANSION_SOURCE_PASSAGES], document_frequencies, tokenizer)
    if expansion:
        return SuggestedSearch(
            query=f"{query} {' '.join(expansion)}",
            reason="add distinctive words from the best passages to focus the search",
            mode=mode,
        )
    return None


def without_words(query: str, dropped: set[str]) -> str:
    """`query` without the words in `dropped` (lower-case), as a phrase a person would type (issue
    #40: "what is the zorb for the base" became "what is the for the base"): each dropped word takes
    the function words joining it to its neighbours with it ("the zorb for the"), and function words
    left at either end go too ("what is"), so "base" is what is left; function words between two kept
    words stay ("Tower of London"). "" when no content word is left."""
    words = split_words(query)
    keep = [word.lower() not in dropped for word in words]
    function = [word.lower() in FUNCTION_WORDS for word in words]
    for index, word in enumerate(words):
        if word.lower() not in dropped:
            continue
        for step in (-1, 1):  # the run of function words on each side
            other = index + step
            while 0 <= other < len(words) and function[other] and words[other].lower() not in dropped:
                keep[other] = False
                other += step
    kept = [word for word, wanted in zip(words, keep, strict=True) if wanted]
    while kept and kept[0].lower() in FUNCTION_WORDS:
        kept.pop(0)
    while kept and kept[-1].lower() in FUNCTION_WORDS:
        kept.pop()
    return " ".join(kept)


def _expansion_words(query: str, texts: list[str], document_frequencies: DocumentFrequencies,
                     tokenizer: Tokenizer) -> list[str]:
    """The rarest words (by document frequency, seen in at least two chunks) of the best passages
    that the query does not already contain."""
    query_terms = {term for terms in tokenizer.terms(split_words(query)) for term in terms}
    distinct = dict.fromkeys(
        word for text in texts for word in split_words(text)
        if len(word) > 2 and not word.isdigit() and word.lower() not in FUNCTION_WORDS
    )
    # fts5vocab counts a term's rows by walking its doclist, so a common word costs milliseconds
    # at 100k chunks; the longest words are the likeliest to be rare, and the cheapest to count.
    words = sorted(distinct, key=len, reverse=True)[:EXPANSION_CANDIDATES]
    if not words:
        return []
    candidates: dict[str, str] = {}
    for word, terms in zip(words, tokenizer.terms(words), strict=True):
        if len(terms) == 1 and terms[0] not in query_terms:
            candidates.setdefault(terms[0], word)
    if not candidates:
        return []
    frequencies = document_frequencies.of_terms(list(candidates))
    ranked = sorted(
        (term for term in candidates if frequencies.get(term, 0) >= 2),
        key=lambda term: (frequencies[term], term),
    )
    return [candidates[term] for term in ranked[:EXPANSION_WORDS]]
