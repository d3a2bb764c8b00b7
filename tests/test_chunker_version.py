"""CHUNKER_VERSION guards the chunker's output: a change to what `chunk_text` returns for the same
inputs must come with a version bump, because the version is part of every document's build key and
only a bump re-chunks the KBs already built with the old output.

The digest below is taken over fixed inputs covering every source type and heading mode, with a
deterministic word counter standing in for the model's tokenizer (what is guarded is the chunker's
logic, not a tokenizer's). When this test fails: if the output change is intended, bump
CHUNKER_VERSION in src/pinakes/chunking/version.py and add the new digest under the new version here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import xxhash

from pinakes.chunking import CHUNKER_VERSION, chunk_text
from pinakes.pipeline.keys import BuildKeys, build_keys
from tests.fakes import default_section

# The current version's digest over the inputs below (when the inputs grow, so does this record:
# "3" added UNBROKEN, "4" RST and ASCIIDOC).
GOLDEN = {
    "4": "90a274e893a19dfc",
}

MARKDOWN = """---
title: Front matter
---
# Guide

Intro paragraph with several words that run on for a while to make a block.

## Install

""" + "\n\n".join(f"Step {n}: " + "word " * (n * 7 % 90 + 5) for n in range(14)) + """

### Deep

A short one.

""" + "x" * 900 + "\n"

NUMBERED = "1. Scope\n\nThe scope text.\n\n1.1 Detail\n\nDetail text " + "more " * 120 + "\n\n2. Next\n\nEnd.\n"
CODE = "\n".join(f"def f{n}(x):\n    return x * {n}\n" for n in range(60))
RST = "=====\nGuide\n=====\n\nIntro.\n\nInstall\n-------\n\nStep " + "one " * 80 + "\n\nUsage\n-----\n\nUse.\n"
ASCIIDOC = "= Doc\n\nPreface.\n\n== Part\n\n=== Sub\n\nText " + "more " * 70 + "\n\n----\n== code\n----\n"
UNBROKEN = "Before.\n\n" + "z" * 20_000 + " tail words\n\nAfter.\n"  # one "token" to a WordPiece model
PDF_TEXT = "Page one text. " * 40 + "\n\n" + "Page two text. " * 40
PDF_PAGES = ((0, 600), (602, len(PDF_TEXT)))

WORD = re.compile(r"\w+|[^\w\s]")


def count(text: str) -> int:
    return len(WORD.findall(text))


def digest() -> str:
    cases: list[tuple[Any, ...]] = [
        (MARKDOWN, "markdown", "none", None),
        (NUMBERED, "text", "numbered", None),
        (NUMBERED, "text", "none", None),
        (CODE, "code", "none", None),
        (UNBROKEN, "text", "none", None),
        (RST, "text", "none", None, "rst"),
        (ASCIIDOC, "text", "none", None, "asciidoc"),
        (PDF_TEXT, "pdf", "none", PDF_PAGES),
    ]
    state = xxhash.xxh3_64()
    for text, source_type, headings, pages, *markup in cases:
        for max_tokens, overlap in ((60, 10), (250, 25)):
            for chunk in chunk_text(text, source_type, max_tokens=max_tokens, overlap=overlap,
                                    headings=headings, count_tokens=count, pages=pages,
                                    markup=markup[0] if markup else None):
                state.update(repr((source_type, headings, max_tokens, chunk.ordinal, chunk.char_start,
                                   chunk.char_end, chunk.token_count, chunk.heading_path,
                                   chunk.page_start, chunk.page_end)).encode())
    return state.hexdigest()


def test_chunk_output_matches_the_digest_recorded_for_this_chunker_version() -> None:
    assert CHUNKER_VERSION in GOLDEN, f"record GOLDEN[{CHUNKER_VERSION!r}] = {digest()!r}"
    assert digest() == GOLDEN[CHUNKER_VERSION], (
        "chunk output changed without a CHUNKER_VERSION bump: bump it in src/pinakes/chunking/version.py and "
        f"record GOLDEN[<new version>] = {digest()!r}")


def test_the_chunker_version_is_part_of_every_build_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.manifest import ChunkingSection, ExtractionSection
    from pinakes.pipeline import keys

    class _Manifest:
        embedding = default_section("fastembed")
        chunking = ChunkingSection()
        extraction = ExtractionSection()

    before: BuildKeys = build_keys(_Manifest())  # pyright: ignore[reportArgumentType]  # a stand-in manifest
    monkeypatch.setattr(keys, "CHUNKER_VERSION", CHUNKER_VERSION + "-next")
    after = build_keys(_Manifest())  # pyright: ignore[reportArgumentType]  # a stand-in manifest
    assert before.key("h", "markdown", "") != after.key("h", "markdown", "")


def test_a_version_bump_rechunks_every_document_on_the_next_sync(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.init import init_kb
    from pinakes.pipeline import keys
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    root = tmp_path / "kb"
    init_kb(root, name="bump")
    for name in ("a", "b"):
        (root / "docs" / f"{name}.md").write_text(f"# {name}\n\ntext {name}\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).noop
    monkeypatch.setattr(keys, "CHUNKER_VERSION", CHUNKER_VERSION + "-next")
    report = run_sync(root, SyncOptions(), embedder=FakeEmbedder())
    assert sorted(report.reembedded) == ["docs/a.md", "docs/b.md"]
