"""Links from text on a real vault: Obsidian's own help (`obsidianmd/obsidian-help`, its `en/` folder).

That repository carries no licence, so none of its files is committed here: these tests read the
vault from the folder `PINAKES_OBSIDIAN_HELP` names (or `../shared/corpora/obsidian-help/docs` when
the shared corpora hold it) and are skipped without one. bench/bench_text_links.py is the
measurement (docs/QUALITY.md); these pin what it showed:

- on every note, the links the product parses are the links an independent CommonMark parser
  (markdown-it-py, the bench's reference) finds outside code, target for target; named real files
  whose code blocks and code spans hold wikilinks give none;
- (heavy) synced as a KB, the product's edges against the reference resolver: precision and recall
  of edges and of link occurrences at least 0.98, and the unresolved links listed.
"""

from __future__ import annotations

import importlib.util
import os
import re
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from pinakes.links.text_links import parse_text_links

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "corpora" / "obsidian-help" / "docs"
VAULT = Path(os.environ["PINAKES_OBSIDIAN_HELP"]) if os.environ.get("PINAKES_OBSIDIAN_HELP") else SHARED

pytestmark = pytest.mark.skipif(not (VAULT / "Linking notes and files" / "Internal links.md").is_file(),
                                reason="Obsidian's help vault is not here: set PINAKES_OBSIDIAN_HELP to its en/ folder")


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_text_links", ROOT / "bench" / "bench_text_links.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def notes() -> list[Path]:
    return sorted(VAULT.rglob("*.md"))


def test_every_note_parses_to_the_links_an_independent_parser_finds_outside_code() -> None:
    reference = bench()
    differ: list[tuple[str, Counter[str], Counter[str]]] = []
    for note in notes():
        text = note.read_text(encoding="utf-8")
        ours = Counter(link.target for link in parse_text_links(text, "markdown") if link.syntax != "uri")
        theirs = Counter(path for _kind, path in reference.reference_links(text))
        if ours != theirs:
            differ.append((note.relative_to(VAULT).as_posix(), ours - theirs, theirs - ours))
    assert not differ, differ[:5]


def fenced_lines(text: str) -> set[int]:
    inside = False
    lines: set[int] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(r"^\s*(?:>\s*)*(```|~~~)", line):
            inside = not inside
            continue
        if inside:
            lines.add(number)
    return lines


@pytest.mark.parametrize(("note", "in_code"), [
    ("Linking notes and files/Embed files.md", "![[Internal links]]"),
    ("Editing and formatting/Properties.md", 'link: "[[Episode IV]]"'),
    ("Obsidian Publish/Custom domains.md", "[[redirects]]"),
])
def test_wikilinks_in_real_code_blocks_are_not_links(note: str, in_code: str) -> None:
    text = (VAULT / note).read_text(encoding="utf-8")
    code = fenced_lines(text)
    lines = [number for number, line in enumerate(text.splitlines(), start=1) if in_code in line]
    assert set(lines) & code, f"{note} no longer shows {in_code!r} in a code block"
    assert not {link.line for link in parse_text_links(text, "markdown")} & code


def test_the_internal_links_page_links_outside_code_only() -> None:
    text = (VAULT / "Linking notes and files" / "Internal links.md").read_text(encoding="utf-8")
    links = parse_text_links(text, "markdown")
    by_line = {link.line: link for link in links}
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("- Wikilink: `[[Three laws of motion]]`"):
            assert number not in by_line  # both examples are inline code
        if "Use \\[\\[Wikilinks\\]\\]" in line:
            assert number not in by_line  # escaped brackets
    settings = [link for link in links if link.target == "Settings" and link.subpath == "Files and links"]
    assert settings, "the page links to Settings#Files and links outside code"


@pytest.mark.heavy
def test_edges_on_the_synced_vault_match_the_reference_resolver(tmp_path: Path) -> None:
    import sqlite3

    reference = bench()
    root = reference.build_kb(VAULT, tmp_path)
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    documents = {path for (path,) in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    conn.close()
    found, problems = reference.product_occurrences(root)
    truth, unresolved, _ambiguous = reference.reference(root, documents)
    edges = reference.scores(Counter(set(found)), Counter(set(truth)))
    occurrences = reference.scores(found, truth)
    assert edges["reference"] > 500 and edges["precision"] >= 0.98 and edges["recall"] >= 0.98, edges
    assert occurrences["precision"] >= 0.98 and occurrences["recall"] >= 0.98, occurrences
    listed = {(path, target) for path, _line, status, target in problems if status == "unresolved"}
    assert listed and listed <= set(unresolved)  # every link the product leaves unresolved, the reference does
