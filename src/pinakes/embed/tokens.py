"""Counting tokens exactly as the embedding model sees them, without its truncation.

A model's own tokenizer truncates at max_seq_length, so counting with it directly would report a
600-token paragraph as 256 and the chunker would believe it fits. The counter is a copy of the
model's tokenizer with truncation and padding switched off, counting without special tokens (the
[CLS]/[SEP] the model adds are what `max_input_tokens` already subtracts).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from tokenizers import Tokenizer


class TokenCounter:
    def __init__(self, tokenizer: Tokenizer, *, copy: bool = True) -> None:
        """A counter over `tokenizer`: over a copy of it (a model's own tokenizer is left as it
        was), or over it itself where the caller made it for this counter alone (`copy=False`)."""
        from tokenizers import Tokenizer

        self._tokenizer = Tokenizer.from_str(tokenizer.to_str()) if copy else tokenizer
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        with_special = len(self._tokenizer.encode("", add_special_tokens=True).ids)
        self.special_tokens = with_special - len(self._tokenizer.encode("", add_special_tokens=False).ids)
        self._fingerprint: str | None = None
        self._additive: bool | None = None

    @classmethod
    def from_file(cls, tokenizer_json: Path) -> TokenCounter:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(tokenizer_json)), copy=False)

    @classmethod
    def from_str(cls, serialized: str) -> TokenCounter:
        """A counter from `to_str()`'s JSON: how a Ray worker's tokenizer reaches the driver."""
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(serialized), copy=False)

    def to_str(self) -> str:
        return self._tokenizer.to_str()

    @property
    def fingerprint(self) -> str:
        """This counter exactly: the tokenizer's whole serialized configuration and vocabulary (as
        it counts: truncation and padding off) and the `tokenizers` version that runs it. Equal
        fingerprints count every text alike (pipeline/token_counts.py keys remembered counts by it)."""
        if self._fingerprint is None:
            import tokenizers
            import xxhash

            self._fingerprint = xxhash.xxh3_128_hexdigest(f"{tokenizers.__version__}\0{self.to_str()}".encode())
        return self._fingerprint

    @property
    def additive_over_whitespace(self) -> bool:
        """Whether this tokenizer's configuration proves count(a + g + b) == count(a) + count(b) for
        every non-empty run g of spaces, tabs, CRs and LFs (the chunker then sums the counts of a
        chunk's parts instead of counting it again: `pinakes.chunking`).

        Proved for: a normalizer that maps each character on its own, never merging across
        whitespace (BERT's, lowercasing, canonical or compatibility decomposition, accent
        stripping), a pre-tokenizer that splits at whitespace before anything else sees the text
        (BERT's, `Whitespace`, `WhitespaceSplit`), a WordPiece model (each word on its own), no
        special token with whitespace in it, and counts without special tokens (this counter's).
        Anything else (a BPE with a byte-level or metaspace pre-tokenizer, a prepending or
        replacing normalizer) is not proved, and its chunks are counted."""
        if self._additive is None:
            self._additive = _additive_configuration(json.loads(self.to_str()))
        return self._additive

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        # The fast batch skips the character offsets (same ids, same counts): a third of the cost
        # of the chunker's counting, which is a large part of a sync's driver work (docs/perf/writer.md).
        encodings = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]


def known_or_counted(count_batch: Callable[[Sequence[str]], list[int]], texts: Sequence[str],
                     known: Mapping[str, int]) -> list[int]:
    """Each text's token count: `known`'s where it has one (the same number the tokenizer gives),
    the rest counted in one `count_batch` call."""
    unknown = [text for text in texts if text not in known]
    if not unknown:
        return [known[text] for text in texts]
    counted = iter(count_batch(unknown))
    return [known[text] if text in known else next(counted) for text in texts]


# Tokenizer components (their `type` in tokenizer.json) that never join or split text across a run
# of ASCII whitespace differently from the parts on either side (see `additive_over_whitespace`).
_PER_CHARACTER_NORMALIZERS = frozenset({"BertNormalizer", "Lowercase", "NFD", "NFKD", "StripAccents"})
_WHITESPACE_PRE_TOKENIZERS = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})


def _additive_configuration(config: object) -> bool:
    if not isinstance(config, dict):
        return False
    parts = cast("dict[str, object]", config)
    normalizer = _typed(parts.get("normalizer"))
    steps: list[object] = [] if normalizer is None else [normalizer]
    if normalizer is not None and normalizer.get("type") == "Sequence":
        inner = normalizer.get("normalizers")
        steps = cast("list[object]", inner) if isinstance(inner, list) else [None]
    pre_tokenizer, model = _typed(parts.get("pre_tokenizer")), _typed(parts.get("model"))
    added: object = parts.get("added_tokens") or []
    tokens = [_typed(token) for token in cast("list[object]", added)] if isinstance(added, list) else [None]
    return (all(step is not None and step.get("type") in _PER_CHARACTER_NORMALIZERS for step in map(_typed, steps))
            and pre_tokenizer is not None and pre_tokenizer.get("type") in _WHITESPACE_PRE_TOKENIZERS
            and model is not None and model.get("type") == "WordPiece"
            and all(token is not None and isinstance(content := token.get("content"), str)
                    and not any(char.isspace() for char in content) for token in tokens))


def _typed(value: object) -> dict[str, object] | None:
    """A JSON object of tokenizer.json, or None for anything else."""
    return cast("dict[str, object]", value) if isinstance(value, dict) else None


def max_seq_length_from_dir(model_dir: Path) -> int | None:
    """The model's input limit (special tokens included) from its config files, without loading it:
    sentence-transformers' max_seq_length, else the tokenizer's model_max_length."""
    for name, key in (("sentence_bert_config.json", "max_seq_length"),
                      ("tokenizer_config.json", "model_max_length")):
        try:
            value = json.loads((model_dir / name).read_text(encoding="utf-8")).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        # transformers writes 1e30 for "unknown"; no real text model takes a million tokens.
        if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 1_000_000:
            return value
    return None


def max_input_tokens_from_dir(model_dir: Path) -> int | None:
    """max_seq_length minus special tokens, read from a model directory; None when undeterminable."""
    limit = max_seq_length_from_dir(model_dir)
    tokenizer_json = model_dir / "tokenizer.json"
    if limit is None or not tokenizer_json.is_file():
        return None
    return limit - TokenCounter.from_file(tokenizer_json).special_tokens
