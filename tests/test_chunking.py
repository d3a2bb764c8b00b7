from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinakes.chunking import Chunk, chunk_text
from tests.kb_helpers import packaged_token_counter


def words(text: str) -> int:
    """A cheap deterministic tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def subwords(text: str) -> int:
    """Additive like WordPiece: a word of n characters is ceil(n / 4) tokens."""
    return sum(math.ceil(len(word) / 4) for word in text.split())


def characters(text: str) -> int:
    """Not additive over joins (the separating whitespace costs tokens too), like many BPEs."""
    return len(text)


COUNTERS: dict[str, Callable[[str], int]] = {"words": words, "subwords": subwords, "characters": characters}


def chunk(text: str, source_type: str = "markdown", *, max_tokens: int = 50, overlap: int = 0,
          headings: str = "none", count: Callable[[str], int] = words, **kwargs: Any) -> list[Chunk]:
    return chunk_text(text, source_type, max_tokens=max_tokens, overlap=overlap, headings=headings,
                      count_tokens=count, **kwargs)


def assert_chunk_invariants(text: str, chunks: list[Chunk], count: Callable[[str], int], max_tokens: int,
                            overlap: int, source_type: str = "markdown") -> None:
    previous: Chunk | None = None
    covered = [False] * len(text)
    for ordinal, piece in enumerate(chunks):
        assert piece.ordinal == ordinal
        assert piece.text == text[piece.char_start:piece.char_end]  # the span invariant
        assert piece.text.strip(), "a chunk is never empty or whitespace"
        assert piece.token_count == count(piece.text)
        assert piece.token_count <= max_tokens
        if previous is not None:
            assert piece.char_start > previous.char_start, "a chunk never contains all of the previous one"
            if overlap == 0 or piece.heading_path != previous.heading_path:
                assert piece.char_start >= previous.char_end
        for index in range(piece.char_start, piece.char_end):
            covered[index] = True
        previous = piece
    # Markdown front matter is metadata, deliberately never a chunk (the one exception).
    from pinakes.chunking import _front_matter_end, _line_spans

    lines = _line_spans(text)
    front_end = _front_matter_end(text, lines)
    metadata_end = lines[front_end - 1][1] if front_end and source_type == "markdown" else 0
    missed = [index for index, char in enumerate(text)
              if not char.isspace() and not covered[index] and index >= metadata_end]
    assert not missed, f"characters dropped from every chunk at {missed[:10]}"


# --- markdown -----------------------------------------------------------------------------------


def test_heading_line_is_part_of_the_first_chunk_and_paths_nest() -> None:
    text = "# Guide\n\nIntro text.\n\n## Install\n\nRun pip.\n\n### Linux\n\nUse apt.\n\n## Use\n\nCall it.\n"
    chunks = chunk(text)
    assert [c.text for c in chunks] == [
        "# Guide\n\nIntro text.",
        "## Install\n\nRun pip.",
        "### Linux\n\nUse apt.",
        "## Use\n\nCall it.",
    ]
    assert [c.heading_path for c in chunks] == [
        ("Guide",), ("Guide", "Install"), ("Guide", "Install", "Linux"), ("Guide", "Use"),
    ]


def test_text_before_the_first_heading_has_no_heading_path() -> None:
    chunks = chunk("Preamble here.\n\n# Title\n\nBody.")
    assert [c.heading_path for c in chunks] == [None, ("Title",)]


def test_heading_syntax_follows_atx_rules() -> None:
    text = "#hashtag is not a heading\n\n    # indented code is not one\n\n## Closing hashes ##\n\nx\n\n#\n\ny"
    chunks = chunk(text)
    assert [c.heading_path for c in chunks] == [None, ("Closing hashes",)]
    assert "#hashtag" in chunks[0].text and "y" in chunks[-1].text  # an empty `#` starts nothing


def test_hash_lines_inside_fenced_code_are_not_headings() -> None:
    text = "# Real\n\n```python\n# a comment\n\nx = 1\n```\n\n~~~\n## also code\n~~~\n\nafter"
    chunks = chunk(text, max_tokens=100)
    assert {c.heading_path for c in chunks} == {("Real",)}


def test_fenced_block_stays_together_across_blank_lines() -> None:
    fence = "```\nline one\n\nline two\n```"
    text = f"# T\n\n{'word ' * 8}\n\n{fence}"
    chunks = chunk(text, max_tokens=10)
    assert any(c.text.endswith(fence) and fence in c.text for c in chunks)


def test_yaml_front_matter_is_neither_headings_nor_text() -> None:
    text = "---\ntitle: x\n# a yaml comment\n---\n\n# Heading\n\nbody"
    chunks = chunk(text)
    assert [c.heading_path for c in chunks] == [("Heading",)]
    assert chunks[0].text == "# Heading\n\nbody"


def test_heading_stays_with_text_when_the_next_paragraph_is_long() -> None:
    paragraph = " ".join(f"w{i}." for i in range(45))
    chunks = chunk(f"## Short heading\n\n{paragraph}", max_tokens=46)
    assert chunks[0].text.startswith("## Short heading\n\nw0.")
    assert all(c.heading_path == ("Short heading",) for c in chunks)


# --- text and the numbered outline --------------------------------------------------------------

OUTLINE = "1. Introduction\nWhy.\n\n1.1 Scope\nWhat.\n\n1.1.1 Detail\nMore.\n\n1.2 Terms\nWords.\n\n2. Method\nHow.\n"


def test_numbered_outline_is_accepted_when_the_whole_walk_is_valid() -> None:
    chunks = chunk(OUTLINE, "text", headings="numbered")
    assert [c.heading_path for c in chunks] == [
        ("1. Introduction",),
        ("1. Introduction", "1.1 Scope"),
        ("1. Introduction", "1.1 Scope", "1.1.1 Detail"),
        ("1. Introduction", "1.2 Terms"),
        ("2. Method",),
    ]
    assert chunks[1].text == "1.1 Scope\nWhat."


@pytest.mark.parametrize(
    "broken",
    [
        OUTLINE + "\n4. Skipped three\nx\n",  # a gap
        OUTLINE + "\n1. Restarted list\nx\n",  # a second list restarting at 1
        "2. Starts at two\nx\n\n3. Next\ny\n",  # the walk starts at 1
        OUTLINE.replace("1.1.1 Detail", "1.1.2 Detail"),  # a child must start at 1
    ],
)
def test_numbered_outline_is_rejected_for_the_whole_document_on_one_misstep(broken: str) -> None:
    chunks = chunk(broken, "text", headings="numbered", max_tokens=5)
    assert len(chunks) > 1
    assert all(c.heading_path is None for c in chunks)


def test_numbered_headings_are_off_by_default_and_for_markdown_and_code() -> None:
    assert all(c.heading_path is None for c in chunk(OUTLINE, "text", max_tokens=5))
    assert all(c.heading_path is None for c in chunk(OUTLINE, "code", headings="numbered", max_tokens=5))
    assert all(c.heading_path is None for c in chunk(OUTLINE, "markdown", headings="numbered", max_tokens=5))


def test_code_and_pdf_never_record_headings() -> None:
    code = "# comment line\nimport os\n\n\ndef f():\n    return 1\n"
    assert all(c.heading_path is None for c in chunk(code, "code"))
    assert all(c.heading_path is None for c in chunk("# Not a heading\n\nbody", "pdf"))


# --- packing, splitting, overlap ----------------------------------------------------------------


def test_paragraphs_pack_up_to_max_tokens_without_crossing_blank_lines_midway() -> None:
    paragraphs = [" ".join(f"p{n}w{i}" for i in range(4)) for n in range(6)]
    text = "\n\n".join(paragraphs)
    chunks = chunk(text, "text", max_tokens=9)
    assert [c.text for c in chunks] == ["\n\n".join(paragraphs[i:i + 2]) for i in (0, 2, 4)]


def test_oversize_paragraph_is_split_never_trimmed() -> None:
    sentences = [" ".join(f"s{n}w{i}" for i in range(7)) + "." for n in range(40)]
    text = "# Long\n\n" + " ".join(sentences)
    chunks = chunk(text, max_tokens=20)
    assert len(chunks) > 10
    assert_chunk_invariants(text, chunks, words, 20, 0)
    rejoined = " ".join(c.text for c in chunks).split()
    assert rejoined == text.split()  # every word, in order, exactly once
    assert all(c.text.endswith(".") for c in chunks[1:-1])  # cut at sentence ends when possible


def test_unbroken_string_is_split_at_characters_as_a_last_resort() -> None:
    blob = "x" * 1000
    chunks = chunk(blob, "text", max_tokens=64, count=characters)
    assert "".join(c.text for c in chunks) == blob
    assert all(c.token_count <= 64 for c in chunks)


def test_long_lines_of_code_split_at_lines() -> None:
    code = "\n".join(f"value_{i} = compute({i}, {i + 1})" for i in range(50))
    chunks = chunk(code, "code", max_tokens=12)
    assert all(re.fullmatch(r"(value_\d+ = compute\(\d+, \d+\)\n?)+", c.text) for c in chunks)
    assert_chunk_invariants(code, chunks, words, 12, 0)


def test_overlap_repeats_the_tail_of_the_previous_chunk_within_a_section() -> None:
    text = "# S\n\n" + "\n\n".join(" ".join(f"b{n}w{i}" for i in range(8)) for n in range(6))
    chunks = chunk(text, max_tokens=20, overlap=3)
    assert len(chunks) >= 3
    for previous, following in itertools.pairwise(chunks):
        shared = text[following.char_start:previous.char_end]
        assert following.char_start < previous.char_end
        assert 0 < words(shared) <= 3
        assert previous.text.endswith(shared)


def test_overlap_never_crosses_a_section() -> None:
    text = "# A\n\n" + "alpha " * 30 + "\n\n# B\n\n" + "beta " * 30
    chunks = chunk(text, max_tokens=12, overlap=4)
    for previous, following in itertools.pairwise(chunks):
        if previous.heading_path != following.heading_path:
            assert following.char_start >= previous.char_end
            assert following.text.startswith("# B")


def test_crlf_is_kept_inside_chunks_and_never_ends_one() -> None:
    text = "# Title\r\n\r\nline one\r\nline two\r\n\r\n## Next\r\n\r\nbody\r\n"
    chunks = chunk(text)
    assert [c.text for c in chunks] == ["# Title\r\n\r\nline one\r\nline two", "## Next\r\n\r\nbody"]
    assert [c.heading_path for c in chunks] == [("Title",), ("Title", "Next")]


@pytest.mark.parametrize("text", ["", "   ", "\n\n\r\n\t \n"])
@pytest.mark.parametrize("source_type", ["markdown", "text", "code", "pdf"])
def test_empty_documents_have_no_chunks(text: str, source_type: str) -> None:
    assert chunk(text, source_type) == []


def test_pages_are_looked_up_from_the_extractor_spans() -> None:
    pages_text = ["first page words here", "second page text", "third page closing words"]
    text = "\n\n".join(pages_text)
    spans: list[tuple[int, int]] = []
    position = 0
    for page in pages_text:
        spans.append((position, position + len(page)))
        position += len(page) + 2
    chunks = chunk(text, "pdf", max_tokens=7, pages=spans)
    assert [(c.page_start, c.page_end) for c in chunks] == [(1, 2), (3, 3)]
    assert all(c.heading_path is None for c in chunks)
    assert all(c.page_start is None for c in chunk(text, "text", max_tokens=7))


@pytest.mark.parametrize(("field", "value"), [("max_tokens", 0), ("overlap", 50), ("overlap", -1)])
def test_invalid_sizes_are_refused(field: str, value: int) -> None:
    arguments: dict[str, Any] = {"max_tokens": 50, "overlap": 0, field: value}
    with pytest.raises(ValueError, match=field):
        chunk_text("text", "text", count_tokens=words, **arguments)


def test_unknown_modes_are_refused() -> None:
    with pytest.raises(ValueError, match="heading mode"):
        chunk("x", "text", headings="roman")
    with pytest.raises(ValueError, match="source type"):
        chunk("x", "html")


def test_counting_is_batched_and_linear_in_the_text() -> None:
    """10k-document syncs: every character is counted a bounded number of times, mostly in batches."""
    text = "\n\n".join(f"## H{n}\n\n" + " ".join(f"w{n}x{i}." for i in range(60)) for n in range(300))
    counted = {"single_chars": 0, "batch_chars": 0, "batches": 0}

    def single(value: str) -> int:
        counted["single_chars"] += len(value)
        return words(value)

    def batch(values: Sequence[str]) -> list[int]:
        counted["batch_chars"] += sum(len(value) for value in values)
        counted["batches"] += 1
        return [words(value) for value in values]

    chunks = chunk_text(text, "markdown", max_tokens=25, overlap=5, count_tokens=single, count_tokens_batch=batch)
    assert_chunk_invariants(text, chunks, words, 25, 5)
    assert counted["single_chars"] == 0
    assert counted["batch_chars"] <= 4 * len(text)


def test_real_tokenizer_counts_and_limits(packaged_tokenizer_counter: object) -> None:
    from pinakes.embed.tokens import TokenCounter

    assert isinstance(packaged_tokenizer_counter, TokenCounter)
    counter = packaged_tokenizer_counter
    text = (
        "# Embeddings\r\n\r\nSentence-transformers maps text to vectors. " * 40
        + "\n\n## Détails\n\nUnicode: 東京 — naïve café; " * 30
        + "\n\n```\nsupercalifragilisticexpialidocious_identifier_" + "x" * 300 + "\n```\n"
    )
    chunks = chunk_text(text, "markdown", max_tokens=254, overlap=25, count_tokens=counter.count,
                        count_tokens_batch=counter.count_batch)
    assert len(chunks) > 2
    assert_chunk_invariants(text, chunks, counter.count, 254, 25)
    assert any(c.heading_path == ("Embeddings", "Détails") for c in chunks)


def test_unspaced_cjk_is_cut_near_the_limit_with_the_real_tokenizer(packaged_tokenizer_counter: object) -> None:
    """No whitespace and no sentence ends: the character-level cut must stay cheap and fill chunks."""
    from pinakes.embed.tokens import TokenCounter

    assert isinstance(packaged_tokenizer_counter, TokenCounter)
    counter = packaged_tokenizer_counter
    text = "".join(chr(0x4E00 + (index * 7919) % 20000) for index in range(20_000))
    calls: list[int] = []

    def count(value: str) -> int:
        calls.append(len(value))
        return counter.count(value)

    chunks = chunk_text(text, "text", max_tokens=250, overlap=0, count_tokens=count)
    assert_chunk_invariants(text, chunks, counter.count, 250, 0)
    assert all(c.token_count >= 0.95 * 250 for c in chunks[:-1])
    assert sum(calls) < 6 * len(text)  # a few counts of about one chunk each, not a bisection


@pytest.fixture
def packaged_tokenizer_counter() -> object:
    return packaged_token_counter()


# --- the span invariant, as a property ----------------------------------------------------------

_word = st.one_of(
    st.sampled_from(["alpha", "beta", "gamma.", "delta!", "Ω", "東京。", "naïve", "x" * 40, "1.", "2.1"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc")), min_size=1, max_size=12),
)
_paragraph = st.lists(_word, min_size=1, max_size=80).map(" ".join)


def _heading_line(level: int, title: str) -> str:
    return "#" * level + " " + title


def _numbered_line(number: str, title: str) -> str:
    return f"{number} {title}"


def _joined(lines: list[str], newline: str, trailing: bool) -> str:
    return newline.join(lines) + (newline if trailing else "")


_line = st.one_of(
    _paragraph,
    st.builds(_heading_line, st.integers(1, 7), _paragraph),
    st.sampled_from(["```", "~~~", "---", "#", "1. One", "1.1 Sub", "2. Two", "", "   ", "\t", "=====",
                     "-----", "~~~~~~~~", "== Part", "=== Sub", "----", "...."]),
    st.builds(_numbered_line, st.sampled_from(["1.", "1.1", "1.2", "2.", "2.1.1"]),
              _paragraph),
)
_document = st.builds(
    _joined,
    st.lists(_line, max_size=40),
    st.sampled_from(["\n", "\r\n", "\n\n", "\r\n\r\n"]),
    st.booleans(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=_document,
    source_type=st.sampled_from(["markdown", "text", "code", "pdf"]),
    headings=st.sampled_from(["none", "numbered"]),
    counter_name=st.sampled_from(sorted(COUNTERS)),
    max_tokens=st.integers(1, 60),
    overlap_share=st.floats(0, 0.9),
    markup=st.sampled_from([None, "rst", "asciidoc"]),
)
def test_span_invariant_holds_for_any_document(text: str, source_type: str, headings: str, counter_name: str,
                                               max_tokens: int, overlap_share: float, markup: str | None) -> None:
    count = COUNTERS[counter_name]
    overlap = int(max_tokens * overlap_share)
    markup = markup if source_type == "text" else None
    chunks = chunk_text(text, source_type, max_tokens=max_tokens, overlap=overlap, headings=headings,
                        count_tokens=count, markup=markup)
    assert_chunk_invariants(text, chunks, count, max_tokens, overlap, source_type)
    if source_type in ("code", "pdf") or (source_type == "text" and headings == "none" and markup is None):
        assert all(c.heading_path is None for c in chunks)


def test_a_long_run_without_spaces_is_bounded_in_characters_too() -> None:
    from pinakes.chunking import MAX_CHARS_PER_TOKEN

    # A WordPiece model reads any run of 100+ characters as one unknown token: counted as such here.
    def wordpiece_like(text: str) -> int:
        return sum(1 for _ in re.finditer(r"\S{100,}|\w+|[^\w\s]", text))

    text = "Intro.\n\n" + "a" * 5_000_000 + "\n\nOutro words.\n"
    chunks = chunk_text(text, "text", max_tokens=250, overlap=25, count_tokens=wordpiece_like)
    limit = 250 * MAX_CHARS_PER_TOKEN
    assert max(len(chunk.text) for chunk in chunks) <= limit
    assert all(text[c.char_start:c.char_end] == c.text for c in chunks)  # the span invariant
    assert sum(c.text.count("a") for c in chunks) >= 5_000_000  # split, never trimmed
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))


def test_a_heading_never_stands_alone_as_a_chunk() -> None:
    text = "# Guide\n\n## Install\n\nRun the installer.\n\n## Use\n\nRun it.\n\n## Trailing heading\n"
    chunks = chunk(text)
    assert all(c.text.strip() not in ("# Guide", "## Trailing heading") for c in chunks)
    assert chunks[0].text.startswith("# Guide\n\n## Install\n\nRun the installer.")
    assert chunks[0].heading_path == ("Guide", "Install")
    assert chunks[-1].text.endswith("## Trailing heading")
    assert all(text[c.char_start:c.char_end] == c.text for c in chunks)


def test_numbered_chapters_lead_their_first_subsection() -> None:
    text = "1. Ordering\n\n1.1 You can order copies.\n\n1.2 A day permit costs £8.\n\n2. Fees\n\n2.1 Copies cost money.\n"
    chunks = chunk(text, "text", overlap=5, headings="numbered")
    assert [c.text for c in chunks] == ["1. Ordering\n\n1.1 You can order copies.", "1.2 A day permit costs £8.",
                                        "2. Fees\n\n2.1 Copies cost money."]  # a one-line clause is text
    assert chunks[0].heading_path == ("1. Ordering", "1.1 You can order copies.")


def test_rst_section_titles_are_headings() -> None:
    text = ("=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\nStep one.\n\nDetails\n~~~~~~~\n\n"
            "More.\n\nUsage\n-----\n\nUse it.\n\n----\n\nAfter a transition.\n")
    chunks = chunk(text, "text", overlap=5, markup="rst")
    assert [c.heading_path for c in chunks] == [("Guide",), ("Guide", "Install"), ("Guide", "Install", "Details"),
                                                ("Guide", "Usage")]
    assert chunks[1].text.startswith("Install\n-------\n\nStep one.")
    assert "After a transition." in chunks[-1].text
    assert all(text[c.char_start:c.char_end] == c.text for c in chunks)


def test_asciidoc_section_titles_are_headings_outside_delimited_blocks() -> None:
    text = "= Doc\n\nPreface.\n\n== Part\n\nText.\n\n----\n== not a title\n----\n\n== Next\n\nEnd.\n"
    chunks = chunk(text, "text", overlap=5, markup="asciidoc")
    assert [c.heading_path for c in chunks] == [("Doc",), ("Doc", "Part"), ("Doc", "Next")]
    assert "== not a title" in chunks[1].text


def test_text_without_markup_keeps_its_old_rules() -> None:
    text = "Guide\n=====\n\nIntro.\n"
    assert chunk(text, "text", overlap=5)[0].heading_path is None
