"""Packing a section's blocks into chunks of at most `max_tokens` tokens, with overlap.

Blocks are packed greedily; a block longer than the limit is split at sentence, then line, then word
boundaries, and as a last resort at characters: split, never trimmed. `overlap` tokens from the tail
of the previous chunk of the same section are repeated at the start of the next. Chunk sizes are
first estimated by adding the counts of their parts (`pack_estimated`); a section whose chunks a
non-additive tokenizer pushed over the limit is packed again counting each chunk as it closes
(`pack_exact`). For a tokenizer whose counts add up over whitespace (`additive`), a chunk whose
parts are all joined by whitespace is not counted again: its count is the sum of its parts'.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from pinakes.chunking.counting import TokenTally
from pinakes.chunking.spans import lstrip, rstrip


@dataclass(frozen=True, slots=True)
class Atom:
    """A span packed whole: a block, or a part of a block too long to be one chunk."""

    start: int
    end: int
    tokens: int
    heading: bool = False  # a section's heading line, which must lead into the text after it
    level: int = 0  # the split level its parts would come from (see Packer.split)


WORD = re.compile(r"\S+")
# A sentence ends at . ! ? (and any closing quotes or brackets) before whitespace, or at a
# CJK full stop, which is not followed by a space.
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]]*(?=\s)|[。！？]")
_SPLIT_SENTENCES, _SPLIT_LINES, _SPLIT_WORDS, _SPLIT_CHARACTERS = range(4)
# A character-level cut stops growing once a piece holds this share of the limit, or after this
# many steps (each step is one count of about one piece).
_GOOD_ENOUGH = 0.95
_MAX_GROW_STEPS = 6


@dataclass(frozen=True, slots=True)
class Planned:
    """A chunk as packing planned it: its own atoms span [start, end); `overlap_limit` tokens are
    reserved in `tokens` for the tail of the previous chunk, which will be prepended."""

    start: int
    end: int
    tokens: int
    overlap_limit: int
    # The exact count of [start, end) where it is the sum of its atoms' (every join between them is
    # whitespace and the tokenizer is additive over it); None: only a count of the text can say.
    exact: int | None = None


# Joins over which an additive tokenizer's counts add up: a non-empty run of these characters only.
# (Other whitespace is left to the tokenizer: BERT's normalizer deletes some of it, such as a form
# feed, which then joins the words on either side into one.)
_JOIN = " \t\n\r"


def joined(text: str, end: int, start: int) -> bool:
    """Whether text[end:start], the gap between two counted parts, is a join they add up over."""
    return start > end and not text[end:start].strip(_JOIN)


class Packer:
    def __init__(
        self, text: str, counter: TokenTally, max_tokens: int, overlap: int, *, split_sentences: bool,
        additive: bool = False,
    ) -> None:
        self.text = text
        self.counter = counter
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.first_level = _SPLIT_SENTENCES if split_sentences else _SPLIT_LINES
        # The tokenizer counts a + join + b as count(a) + count(b) (see `joined`): chunks made of
        # joined parts are then known exactly without a count.
        self.additive = additive

    def pack_estimated(self, sections: list[list[Atom]]) -> list[list[tuple[int, int, int | None]]]:
        """Chunk spans per section, sized by adding the counts of their parts, each with its exact
        count where the parts prove it (`additive`; else None: the caller counts it).

        Each chunk after the first of a section reserves room for its overlap while packing; the
        overlaps themselves are resolved afterwards for the whole document in one counting batch.
        """
        planned = [self._pack(atoms) for atoms in sections]
        jobs: list[tuple[int, int, list[tuple[int, int]]]] = []  # (section, chunk, candidate words)
        for section_index, chunks in enumerate(planned):
            for chunk_index in range(1, len(chunks)):
                previous, limit = chunks[chunk_index - 1], chunks[chunk_index].overlap_limit
                if limit > 0:
                    jobs.append((section_index, chunk_index, self._overlap_words(previous, limit)))
        counts = iter(self.counter.many([self.text[a:b] for _, _, words in jobs for a, b in words]))
        starts: dict[tuple[int, int], tuple[int, int | None]] = {}
        for section_index, chunk_index, words in jobs:
            chunk = planned[section_index][chunk_index]
            word_counts = [next(counts) for _ in words]
            overlap_start = self._overlap_start(words, word_counts, chunk.overlap_limit)
            if overlap_start is not None:
                starts[section_index, chunk_index] = (overlap_start,
                                                      self._with_overlap(chunk, words, word_counts, overlap_start))
        spans: list[list[tuple[int, int, int | None]]] = []
        for section_index, chunks in enumerate(planned):
            spans.append([])
            for chunk_index, chunk in enumerate(chunks):
                start, exact = starts.get((section_index, chunk_index), (chunk.start, chunk.exact))
                spans[-1].append((start, chunk.end, exact))
        return spans

    def _with_overlap(self, chunk: Planned, words: list[tuple[int, int]], counts: list[int],
                      overlap_start: int) -> int | None:
        """The exact count of `chunk` with the previous chunk's words from `overlap_start` on ahead
        of it, where every join (between the words, and before the chunk) proves it."""
        if chunk.exact is None:
            return None
        total, previous_end = chunk.exact, chunk.start
        for (word_start, word_end), word_tokens in zip(reversed(words), reversed(counts), strict=True):
            if word_start < overlap_start:
                break
            if not joined(self.text, word_end, previous_end):
                return None
            total, previous_end = total + word_tokens, word_start
        return total

    def pack_exact(self, atoms: list[Atom]) -> list[tuple[int, int, int]]:
        """Chunk spans of one section, each counted for real as it closes and re-split when a
        tokenizer that is not additive over the whitespace between parts put it over the limit.
        The next chunk's overlap is taken from the chunk actually emitted. Slower (one counting
        call per chunk), so used only where the estimate proved wrong."""
        chunks: list[tuple[int, int, int]] = []
        for planned in self._pack(atoms):
            start = planned.start
            if planned.overlap_limit > 0 and chunks:
                last_start, last_end, _ = chunks[-1]
                words = self._overlap_words(Planned(last_start, last_end, 0, 0), planned.overlap_limit)
                counts = self.counter.many([self.text[a:b] for a, b in words])
                overlap_start = self._overlap_start(words, counts, planned.overlap_limit)
                if overlap_start is not None:
                    start = overlap_start
            chunks.extend(self._fitted(start, planned.end))
        return chunks

    def _pack(self, atoms: list[Atom]) -> list[Planned]:
        """Greedily pack atoms into chunks of at most max_tokens tokens (estimated).

        An atom longer than max_tokens is replaced by its parts. A heading that would otherwise
        end up alone (the paragraph after it is too long to join it) pulls in that paragraph's
        first parts instead, so the heading line leads real text.
        """
        limit = self.max_tokens
        queue = deque(atoms)
        chunks: list[Planned] = []
        start = end = tokens = reserved = 0
        exact: int | None = None
        open_chunk = only_heading = False
        while queue:
            atom = queue.popleft()
            if atom.tokens > limit or (only_heading and tokens + atom.tokens > limit):
                parts = self.split(atom)
                if len(parts) > 1 or parts[0] != atom:
                    queue.extendleft(reversed(parts))
                    continue
            if not open_chunk:
                start, end, tokens, reserved, open_chunk = atom.start, atom.end, atom.tokens, 0, True
                exact = atom.tokens if self.additive else None
            elif tokens + atom.tokens <= limit:
                if exact is not None:
                    exact = exact + atom.tokens if joined(self.text, end, atom.start) else None
                end, tokens = atom.end, tokens + atom.tokens
            else:
                chunks.append(Planned(start, end, tokens, reserved, exact))
                reserved = max(0, min(self.overlap, limit - atom.tokens))
                start, end, tokens = atom.start, atom.end, reserved + atom.tokens
                exact = atom.tokens if self.additive else None
            only_heading = atom.heading
        if open_chunk:
            chunks.append(Planned(start, end, tokens, reserved, exact))
        return chunks

    def split(self, atom: Atom) -> list[Atom]:
        """The parts of `atom` at the first split level that divides it, each counted.

        Parts still longer than max_tokens carry the next level, so packing splits them again.
        """
        for level in range(max(atom.level, self.first_level), _SPLIT_CHARACTERS):
            spans = self._split_spans(atom.start, atom.end, level)
            if len(spans) > 1:
                counts = self.counter.many([self.text[start:end] for start, end in spans])
                return [
                    Atom(start, end, tokens, level=level + 1)
                    for (start, end), tokens in zip(spans, counts, strict=True)
                ]
        if atom.tokens > self.max_tokens:
            return self._split_characters(atom.start, atom.end, self.max_tokens)
        return [atom]

    def _split_spans(self, start: int, end: int, level: int) -> list[tuple[int, int]]:
        text = self.text
        if level == _SPLIT_WORDS:
            return [match.span() for match in WORD.finditer(text, start, end)]
        if level == _SPLIT_LINES:
            cuts = [match.end() for match in re.finditer("\n", text[start:end])]
        else:
            cuts = [match.end() for match in _SENTENCE_END.finditer(text[start:end])]
        spans: list[tuple[int, int]] = []
        piece_start = start
        for cut in [*(start + cut for cut in cuts), end]:
            piece_end = rstrip(text, piece_start, cut)
            piece_start = lstrip(text, piece_start, piece_end)
            if piece_start < piece_end:
                spans.append((piece_start, piece_end))
            piece_start = cut
        return spans

    def _split_characters(self, start: int, end: int, limit: int) -> list[Atom]:
        """Cut an unbroken string (no whitespace to split at) into pieces of at most `limit` tokens.

        Each cut is found by proportion rather than bisection: guess a length from the characters
        per token seen so far, then shrink or grow it by the ratio of the count to the limit. On
        text of even density (an unspaced CJK run, a base64 blob) that takes two or three counts
        of about one piece each, where a bisection counts a window many times larger a dozen
        times. Pieces end within a few percent of the limit, never over it. Each piece takes at
        least one character, so this always terminates; a single character worth more than
        `limit` tokens (only possible with a tiny limit) becomes its own piece.
        """
        pieces: list[Atom] = []
        text, count = self.text, self.counter.one
        chars_per_token = 4.0  # a first guess; replaced by what the text itself shows
        position = start
        while position < end:
            rest = end - position
            length = max(1, min(rest, int(limit * chars_per_token)))
            tokens = count(text[position:position + length])
            while tokens > limit and length > 1:
                length = max(1, min(length - 1, length * limit // tokens))
                tokens = count(text[position:position + length])
            for _ in range(_MAX_GROW_STEPS):
                if length >= rest or tokens >= limit * _GOOD_ENOUGH:
                    break
                longer = min(rest, length + max(1, length * (limit - tokens) // max(tokens, 1)))
                longer_tokens = count(text[position:position + longer])
                if longer_tokens > limit:
                    break
                length, tokens = longer, longer_tokens
            pieces.append(Atom(position, position + length, tokens, level=_SPLIT_CHARACTERS))
            chars_per_token = length / max(tokens, 1)
            position += length
        return pieces

    def _overlap_words(self, previous: Planned, limit: int) -> list[tuple[int, int]]:
        """The words of `previous` that could be repeated: at most the last `limit` (every word
        is at least one token), never its first word, so a chunk never holds all of the previous.

        Only the chunk's tail is scanned (every chunk's, so a whole scan re-read the document): the
        first word found in a window that starts inside the chunk may be cut, or be the chunk's
        first word, so it is dropped; every later one is a whole word the full scan finds too. The
        window widens until it holds `limit` words after that one or reaches the chunk's start."""
        reach = (limit + 1) * 8
        while True:
            window = max(previous.start, previous.end - reach)
            words = [match.span() for match in WORD.finditer(self.text, window, previous.end)][1:]
            if window == previous.start or len(words) >= limit:
                return words[-limit:]
            reach *= 4

    @staticmethod
    def _overlap_start(words: list[tuple[int, int]], counts: list[int], limit: int) -> int | None:
        """Where the longest run of trailing words within `limit` tokens starts; None if none fits."""
        overlap_start, tokens = None, 0
        for (word_start, _), word_tokens in zip(reversed(words), reversed(counts), strict=True):
            if tokens + word_tokens > limit:
                break
            overlap_start, tokens = word_start, tokens + word_tokens
        return overlap_start

    def _fitted(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """[start, end) counted for real; re-split tighter when it is over the limit."""
        tokens = self.counter.one(self.text[start:end])
        if tokens <= self.max_tokens:
            return [(start, end, tokens)]
        return self._refit(start, end, tokens)

    def _refit(self, start: int, end: int, tokens: int) -> list[tuple[int, int, int]]:
        """Split [start, end) (`tokens` long) into pieces that each count within the limit, by
        packing it again under a budget shrunk in proportion to the overshoot."""
        budget = self.max_tokens
        while True:
            budget = max(1, min(budget - 1, budget * self.max_tokens // tokens))
            tight = Packer(self.text, self.counter, budget, 0,
                           split_sentences=self.first_level == _SPLIT_SENTENCES)
            pieces = tight._pack([Atom(start, end, budget + 1)])
            counts = self.counter.many([self.text[piece.start:piece.end] for piece in pieces])
            if max(counts) <= self.max_tokens or budget == 1:
                return [(piece.start, piece.end, count) for piece, count in zip(pieces, counts, strict=True)]
            tokens = max(counts)


