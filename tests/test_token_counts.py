"""Token counts remembered across syncs (pipeline/token_counts.py): an edit of a large document
counts only the texts that changed, and the chunks are exactly those a sync without the store makes."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Digits, Whitespace
from tokenizers.pre_tokenizers import Sequence as PreTokenizers

from pinakes.embed.tokens import TokenCounter
from pinakes.kb import KBPaths
from pinakes.pipeline import token_counts
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb, sync

PARAGRAPHS = 120
BLOCKS_AND_CHUNKS = 64  # characters: longer than any word of the manual


class Tokenized(HashEmbedder):
    """HashEmbedder vectors, token counts from a real `tokenizers` tokenizer (one token per word and
    per punctuation run; with `digits`, one per digit too); remembers every text it counted."""

    def __init__(self, *, digits: bool = False, remembered: bool = True) -> None:
        super().__init__()
        tokenizer = Tokenizer(WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = (PreTokenizers([Whitespace(), Digits(individual_digits=True)]) if digits
                                   else Whitespace())
        self.counter = TokenCounter(tokenizer)
        self.token_counter = self.counter if remembered else None
        self.counted: list[str] = []

    def count_tokens(self, text: str) -> int:
        self.counted.append(text)
        return self.counter.count(text)

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        self.counted.extend(texts)
        return self.counter.count_batch(texts)


def manual(edited: int | None = None) -> str:
    def paragraph(number: int) -> str:
        words = " ".join(f"w{number}x{k}" for k in range(25 + number % 7))
        return f"Paragraph {number} {'was rewritten today' if number == edited else 'says'}: {words}."

    return "# Manual\n\n" + "\n\n".join(paragraph(n) for n in range(PARAGRAPHS)) + "\n"


def chunk_rows(root: Path) -> list[tuple[int, str, int, int, int]]:
    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        return conn.execute("SELECT c.ordinal, c.text, c.char_start, c.char_end, c.token_count FROM chunks c "
                            "JOIN documents d ON d.id = c.doc_id WHERE d.path = 'docs/manual.md' "
                            "ORDER BY c.ordinal").fetchall()
    finally:
        conn.close()


def store_rows(root: Path) -> int:
    conn = sqlite3.connect(KBPaths(root).cache_dir / token_counts.STORE_NAME)
    try:
        return int(conn.execute("SELECT count(*) FROM counts").fetchone()[0])
    finally:
        conn.close()


def edited_kb(root: Path, model: Tokenized, *, before_edit: object = None) -> Path:
    """A KB of the manual synced with `model`, then the manual edited (`before_edit(root)` first)
    and synced again with `model`."""
    build_kb(root, [Doc("docs/manual.md", manual())], model, max_tokens=40, overlap=5)
    if callable(before_edit):
        before_edit(root)
    (root / "docs/manual.md").write_text(manual(edited=60), encoding="utf-8")
    model.counted.clear()
    sync(root, model)
    return root


@pytest.fixture(autouse=True)
def small_documents_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    # The manual (~25 kB) stands for a large document; the threshold's own value is a cost trade-off.
    monkeypatch.setattr(token_counts, "REMEMBERED_DOCUMENT_CHARS", 10_000)
    assert len(manual()) > 10_000


def test_an_edit_counts_only_the_changed_texts_and_chunks_exactly_as_without_the_store(tmp_path: Path) -> None:
    remembered = edited_kb(tmp_path / "remembered", Tokenized())
    model = Tokenized(remembered=False)
    edited_kb(tmp_path / "counted", model)
    assert chunk_rows(remembered) == chunk_rows(tmp_path / "counted")
    assert len(chunk_rows(remembered)) > 60

    again = Tokenized()
    (remembered / "docs/manual.md").write_text(manual(edited=61), encoding="utf-8")
    sync(remembered, again)
    long_texts = [text for text in again.counted if len(text) > BLOCKS_AND_CHUNKS]
    # Without the store every block and chunk is counted; with it, only those holding the edits.
    assert len([text for text in model.counted if len(text) > BLOCKS_AND_CHUNKS]) > 200
    assert 1 <= len(long_texts) <= 12, long_texts
    # (a chunk after the edited paragraph holds that paragraph's last words as its overlap)
    assert all("60" in text or "61" in text for text in long_texts), long_texts


def test_a_damaged_store_is_replaced_and_the_chunks_do_not_change(tmp_path: Path) -> None:
    def damage(root: Path) -> None:
        (KBPaths(root).cache_dir / token_counts.STORE_NAME).write_bytes(b"not a database" * 500)

    damaged = edited_kb(tmp_path / "damaged", Tokenized(), before_edit=damage)
    reference = edited_kb(tmp_path / "reference", Tokenized(remembered=False))
    assert chunk_rows(damaged) == chunk_rows(reference)
    assert store_rows(damaged) > 0


def test_counts_are_never_taken_from_another_tokenizer(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    build_kb(root, [Doc("docs/manual.md", manual())], Tokenized(), max_tokens=40, overlap=5)
    (root / "docs/manual.md").write_text(manual(edited=60), encoding="utf-8")
    digits = Tokenized(digits=True)
    sync(root, digits)
    rows = chunk_rows(root)
    assert all(tokens == digits.counter.count(text) for _, text, _, _, tokens in rows)
    assert any(tokens != Tokenized().counter.count(text) for _, text, _, _, tokens in rows)
    reference = tmp_path / "reference"
    build_kb(reference, [Doc("docs/manual.md", manual(edited=60))], Tokenized(digits=True, remembered=False),
             max_tokens=40, overlap=5)
    assert rows == chunk_rows(reference)


def test_the_store_stays_within_its_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_counts, "MAX_ROWS", 50)
    root = edited_kb(tmp_path / "kb", Tokenized())
    assert 0 < store_rows(root) <= 50


def test_a_small_document_opens_no_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(token_counts, "REMEMBERED_DOCUMENT_CHARS", 100_000)
    root = edited_kb(tmp_path / "kb", Tokenized())
    assert not (KBPaths(root).cache_dir / token_counts.STORE_NAME).exists()


def test_an_edits_few_new_counts_wait_until_they_are_worth_a_write(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "kb"
    build_kb(root, [Doc("docs/manual.md", manual())], Tokenized(), max_tokens=40, overlap=5)
    written = store_rows(root)
    assert written >= token_counts.WORTH_WRITING  # the first chunking of the document is written
    (root / "docs/manual.md").write_text(manual(edited=60), encoding="utf-8")
    sync(root, Tokenized())
    assert store_rows(root) == written  # a handful of new texts: no write
    monkeypatch.setattr(token_counts, "WORTH_WRITING", 1)
    both = manual(edited=60).replace("Paragraph 61 says", "Paragraph 61 was rewritten today")
    (root / "docs/manual.md").write_text(both, encoding="utf-8")
    again = Tokenized()
    sync(root, again)
    # the first edit's texts were counted again (never written), and now both edits' are
    assert any("60" in text and "61" not in text for text in again.counted if len(text) > BLOCKS_AND_CHUNKS)
    assert store_rows(root) > written
