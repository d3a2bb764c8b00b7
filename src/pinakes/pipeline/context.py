"""Document context: what says which document a chunk belongs to, kept beside the chunk (issue #28).

A chunk cut from its document often no longer names it: an API page's module is named in its title,
a filing's company and quarter in its running footer and file name, a note's subject in its front
matter. The context gathers those, once per document, and adds each chunk's heading trail:

- the title (sidecar, front matter, first heading or PDF metadata) unless it is an identifier (an
  accession number, a hash, a ULID: words nobody types);
- the file name's words (`apple-10q-2022-q3.pdf` -> `apple 10q 2022 q3`);
- for a PDF, the running heads and feet the layout step strips from the body text
  (`ExtractedText.running_heads`), de-duplicated;
- the words the front matter declares (title, aliases, description);
- the chunk's heading trail, outermost first, less what the title already says.

Stored as `chunks.context` (never inside the cited text: `chunks.text`, its offsets and every
citation stay the document's own characters), searched by the keyword side as its own weighted
field and embedded ahead of the chunk by the vector side. It is bounded twice: MAX_CONTEXT_CHARS in
characters, and in tokens by what the model's input leaves beside the chunk (`fit_context`), for
which the chunker reserves CONTEXT_TOKENS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Protocol


class ContextChunk(Protocol):
    """What fitting a context reads of a chunk (`pinakes.chunking.Chunk` is one)."""

    @property
    def text(self) -> str: ...
    @property
    def token_count(self) -> int: ...
    @property
    def heading_path(self) -> tuple[str, ...] | None: ...


# Bumped whenever what the context holds or how it is embedded changes: it is in every document's
# build key (pipeline/keys.py), so a changed context re-embeds each document once.
CONTEXT_VERSION = "1"
# Tokens the chunker leaves free under the model's input limit, so every chunk's vector can carry
# its context (pipeline/chunk.py): all-MiniLM-L6-v2's 254 input tokens hold chunks of up to 222.
CONTEXT_TOKENS = 32
MAX_CONTEXT_CHARS = 400
# Tokens a joined count may exceed the sum of its parts' counts by.
JOIN_MARGIN_TOKENS = 4
# Running heads kept per document (a long report's chapter heads change; the first ones name it).
MAX_RUNNING_HEADS = 6

_WORD_RUNS = re.compile(r"[^\W\d_]{2,}")
_NAME_SPLIT = re.compile(r"[\W_]+")
_NUMBER_WORD = re.compile(r"^(?:\d+|[ivxlcdm]+|page|p\.?)$", re.IGNORECASE)
# Extensions a file name sheds before its words are read (`x.rst.txt` -> `x`).
_EXTENSION = re.compile(r"(?:\.[A-Za-z0-9]{1,5})+$")


def is_identifier(title: str) -> bool:
    """Whether a title is an identifier rather than words: nothing of two or more letters, or one
    token whose characters are a third or more digits (`0000320193-22-000070`, a ULID, a hash)."""
    stripped = title.strip()
    if not _WORD_RUNS.search(stripped):
        return True
    if len(stripped.split()) == 1 and len(stripped) >= 8:
        return sum(char.isdigit() for char in stripped) * 3 >= len(stripped)
    return False


def _file_name(path: str) -> str:
    """`PurePosixPath(path).name`, by a string split where that is the same (a walked path always:
    pairing asks this of every document on every sync that pairs, and pathlib's parse is most of it)."""
    name = path.rsplit("/", 1)[-1]
    return name if name not in ("", ".") else PurePosixPath(path).name


def file_name_words(path: str) -> str:
    """The words of a document's file name, without its extensions; nothing for a name that is an
    identifier (`0042.txt`, an accession number, a hash)."""
    base = _file_name(path)
    name = _EXTENSION.sub("", base) or base
    words = [word for word in _NAME_SPLIT.split(name) if word and not (len(word) >= 6 and is_identifier(word))]
    if len(words) <= 1 and not any(_WORD_RUNS.search(word) for word in words):
        return ""  # a bare number: a counter, not a name
    return " ".join(words)


def context_naming(sidecar_title: str | None, path: str) -> str:
    """What a document's context reads besides its content: whether and what title the sidecar
    gives (one that is set replaces the content's own, and an identifier leaves none), and the file
    name's words. Part of the build key (pipeline/keys.py), so a retitle or a rename that changes
    these rebuilds the document's chunks and vectors, while a move to another folder, or between
    names with the same words, stays a metadata refresh."""
    if not sidecar_title:
        given = "content"  # the content's own title (front matter, first heading, PDF metadata)
    elif is_identifier(sidecar_title):
        given = "none"
    else:
        given = f"sidecar:{sidecar_title.strip()}"
    return json.dumps([given, file_name_words(path)], ensure_ascii=False)


def running_head_words(heads: Sequence[str]) -> list[str]:
    """Running heads and feet without their page numbers, de-duplicated (case-insensitively), the
    first MAX_RUNNING_HEADS of them."""
    kept: dict[str, str] = {}
    for head in heads:
        words = head.split()
        while words and _page_mark(words[-1]):
            words.pop()
        while words and _page_mark(words[0]):
            words.pop(0)
        line = " ".join(words).strip(" |·-–—")
        if line and _WORD_RUNS.search(line):
            kept.setdefault(line.casefold(), line)
        if len(kept) == MAX_RUNNING_HEADS:
            break
    return list(kept.values())


def _page_mark(word: str) -> bool:
    """A page number, its word or a separator at a head's end (`| 2`, `Page iv`)."""
    bare = word.strip("|·-–—,.:()[]")
    return not bare or bool(_NUMBER_WORD.match(bare))


def document_context(title: str | None, path: str, *, running_heads: Sequence[str] = (),
                     declared_words: str = "") -> list[str]:
    """A document's context lines, in the order they are kept when room is short."""
    lines: list[str] = []
    if title and not is_identifier(title):
        lines.append(title.strip())
    lines.append(file_name_words(path))
    lines.extend(running_head_words(running_heads))
    lines.extend(line.strip() for line in declared_words.splitlines())
    return _unique(lines)


def chunk_context(document: Sequence[str], heading_path: Sequence[str] | None) -> str:
    """One chunk's context: its heading trail after the document's first line (its title), then
    the document's other lines; at most MAX_CONTEXT_CHARS, cut at a word."""
    trail = " > ".join(heading for heading in heading_path or ()
                       if heading.strip() and heading.strip().casefold() not in {line.casefold() for line in document})
    lines = [*document[:1], trail, *document[1:]]
    text = "\n".join(line for line in lines if line)
    if len(text) <= MAX_CONTEXT_CHARS:
        return text
    return text[:MAX_CONTEXT_CHARS].rsplit(None, 1)[0]


def fit_context(context: str, text: str, text_tokens: int, max_input_tokens: int,
                count_tokens: Callable[[str], int]) -> str:
    """The longest head of `context` (whole words) that, embedded ahead of `text` (`text_tokens`
    long), keeps the input within `max_input_tokens`: the model never truncates what it is given.
    The chunker reserves CONTEXT_TOKENS, so this cuts only a context longer than that."""
    if not context:
        return ""
    # Most chunks fit with room to spare: the two counts add up (WordPiece splits at whitespace; a
    # margin covers tokenizers that merge across it), so only a tight one is counted joined.
    if text_tokens + count_tokens(context) + JOIN_MARGIN_TOKENS <= max_input_tokens:
        return context
    words = context.split(" ")
    while words and count_tokens(embedding_input(" ".join(words), text)) > max_input_tokens:
        words = words[:len(words) - max(1, len(words) // 8)]
    return " ".join(words).strip()


def fitted_contexts(document: Sequence[str], chunks: Sequence[ContextChunk], max_input_tokens: int, *,
                    count_tokens: Callable[[str], int], count_tokens_batch: Callable[[Sequence[str]], list[int]],
                    additive: bool) -> tuple[list[str], dict[str, int]]:
    """Each chunk's context (`chunk_context` of the document's lines, `document_context`), fitted
    beside it (`fit_context`), and the token counts of the distinct contexts before fitting. Pure:
    the sync's writer and the chunk-ahead worker (pipeline/chunk_ahead.py) compute it alike."""
    contexts = [chunk_context(document, chunk.heading_path) for chunk in chunks]
    # Chunks under one heading share their context: each distinct text is counted once, all in one
    # batch (a call per text was an eighth of the driver's token counting on a corpus of manuals).
    distinct = list(dict.fromkeys(text for text in contexts if text))
    counted = dict(zip(distinct, count_tokens_batch(distinct), strict=True)) if distinct else {}

    def fitted(context: str, chunk: ContextChunk) -> str:
        def count(text: str) -> int:
            known = counted.get(text)
            if known is not None:
                return known
            # A context tried ahead of the chunk (`embedding_input`): where counts add up over the
            # blank line between them, the chunk's own count is known and only the head is counted.
            body = len(chunk.text) + 2
            if additive and len(text) > body and text.endswith(chunk.text) and text[-body:-body + 2] == "\n\n":
                return count_tokens(text[:-body]) + chunk.token_count
            return count_tokens(text)

        return fit_context(context, chunk.text, chunk.token_count, max_input_tokens, count)

    return [fitted(context, chunk) for context, chunk in zip(contexts, chunks, strict=True)], counted


def embedding_input(context: str, text: str) -> str:
    """What the model embeds for a chunk: its context, a blank line, its text."""
    return f"{context}\n\n{text}" if context else text


def _unique(lines: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for line in lines:
        key = line.casefold()
        if line and key not in seen:
            seen.add(key)
            out.append(line)
    return out
