"""Links from text on a real vault: the product's edges against a reference resolver (#44).

    python bench/bench_text_links.py VAULT [--json OUT]

VAULT is an Obsidian vault folder, e.g. the English vault of Obsidian's own help
(`obsidianmd/obsidian-help`, folder `en/`; the repository carries no licence, so its files are
never committed here: bring it yourself). The script copies its files into a fresh KB in a
temporary folder, syncs it with the product (`run_sync`, the fake embedder of tests/fakes.py: links
do not depend on vectors), and reads the edges the index holds (`links` rows of origin 'text').

The reference is written apart from the product, from Obsidian's documented rules (help vault,
"Internal links"; tie-break as observed through `metadataCache.getFirstLinkpathDest`, docs/GUIDE.md)
and with another parser: markdown-it-py (CommonMark) finds what is code and what is a Markdown link
(reference-style ones resolved by markdown-it itself), wikilinks are read from its text tokens
only. It resolves against every file of the vault (attachments too, as Obsidian does) and keeps an
edge when the file resolved to is a document the KB indexes.

Reported: precision and recall of the product's edges (distinct linking → linked document pairs)
and of its link occurrences (per linking document, how often each document is linked), the links
each side leaves unresolved, and the disagreements, listed.
"""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import shutil
import sqlite3
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import unquote

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.fakes

NOTE_SUFFIX = ".md"
WIKILINK = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")
CODE = "\x00"  # stands for inline code or an escaped character in the text a wikilink is read from


# --- the reference ---------------------------------------------------------------------------------


def reference_links(text: str) -> list[tuple[str, str]]:
    """(kind, link path) of every link in a note, code excluded, by markdown-it's reading of it:
    kind is "wikilink" (also embeds) or "markdown" (inline, image, reference-style)."""
    from markdown_it import MarkdownIt

    # text_join off: an escaped character (`\\[`) stays a token of its own, never link syntax
    parser = MarkdownIt("commonmark").disable("text_join")
    found: list[tuple[str, str]] = []
    for token in parser.parse(text):
        if token.type != "inline" or not token.children:
            continue
        buffer: list[str] = []
        for child in token.children:
            if child.type == "text":
                buffer.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                buffer.append("\n")
            elif child.type == "text_special":  # escaped: `\\[` is never link syntax, `\\|` a table's pipe
                buffer.append(CODE if child.content in "[]" else child.markup or child.content)
            elif child.type == "code_inline":
                buffer.append(CODE)  # code may be a wikilink's label ([[Note|`code`]]), never its path
            else:
                _flush(buffer, found)  # html_inline and link markup end a run of text
                href = str(child.attrs.get("href") or child.attrs.get("src") or "")
                if child.type in ("link_open", "image") and href:
                    path = _markdown_path(href)
                    if path:
                        found.append(("markdown", path))
                if child.type == "image":  # its alt text is rendered from children of its own
                    buffer.extend(grand.content for grand in child.children or [] if grand.type == "text")
        _flush(buffer, found)
    return found


def _flush(buffer: list[str], found: list[tuple[str, str]]) -> None:
    """The wikilinks of a run of text tokens, then the run is over."""
    for match in WIKILINK.finditer("".join(buffer)):
        path = _wikilink_path(match.group(2))
        if path:
            found.append(("wikilink", path))
    buffer.clear()


def _wikilink_path(inner: str) -> str | None:
    path = re.split(r"\\?\|", inner, maxsplit=1)[0].split("#", 1)[0].strip()
    if not path or path.startswith("^") or SCHEME.match(path) or CODE in path:
        return None
    return path


def _markdown_path(href: str) -> str | None:
    if href.startswith(("#", "//")) or SCHEME.match(href):
        return None
    path = unquote(href.split("#", 1)[0].split("?", 1)[0])
    return path or None


def _fold(text: str) -> str:
    return unicodedata.normalize("NFC", text).casefold()


class ReferenceVault:
    """Every file of the vault, looked up by Obsidian's rules."""

    def __init__(self, files: list[str]):
        self.files = sorted(files)
        self.by_path = {_fold(path): path for path in self.files}

    def exact(self, path: str) -> str | None:
        folded = _fold(path)
        return self.by_path.get(folded) or self.by_path.get(folded + NOTE_SUFFIX)

    def resolve(self, kind: str, linkpath: str, source: str) -> tuple[str | None, int]:
        """(the file, how many matched by name) for `linkpath` written in `source`."""
        folder = posixpath.dirname(source)
        if linkpath.startswith(("./", "../", "/")):  # relative (or root) paths: exact, nothing else
            joined = linkpath[1:] if linkpath.startswith("/") else posixpath.join(folder, linkpath)
            normal = posixpath.normpath(joined)
            return (None if normal.startswith("..") else self.exact(normal)), 1
        if kind == "markdown" and folder:  # CommonMark: relative to the note
            hit = self.exact(posixpath.normpath(posixpath.join(folder, linkpath)))
            if hit:
                return hit, 1
        hit = self.exact(linkpath)  # from the vault root
        if hit:
            return hit, 1
        wanted = _fold(linkpath)
        matches: list[str] = []
        for path in self.files:  # by name: a note without its extension, any other file with it
            folded = _fold(path)
            names = [folded] + ([folded[: -len(NOTE_SUFFIX)]] if folded.endswith(NOTE_SUFFIX) else [])
            if any(name == wanted or name.endswith("/" + wanted) for name in names):
                matches.append(path)
        if not matches:
            return None, 0
        beside = [path for path in matches if posixpath.dirname(path) == folder]
        return (beside[0] if beside else min(matches, key=lambda path: (len(path), path))), len(matches)


# --- the run ---------------------------------------------------------------------------------------


def build_kb(vault: Path, where: Path) -> Path:
    from pinakes.init import init_kb
    from pinakes.sync import SyncOptions
    from pinakes.sync.engine import run_sync
    from tests.fakes import FakeEmbedder

    root = where / "kb"
    shutil.copytree(vault, root / "vault")
    init_kb(root, name="vault")
    manifest = root / "pinakes.toml"
    text = re.sub(r"^roots = \[.*\]$", 'roots = ["vault"]', manifest.read_text(encoding="utf-8"), count=1, flags=re.M)
    manifest.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    print(f"synced {len(report.added)} documents in {time.perf_counter() - started:.1f} s; "
          f"census {report.graph_census}", file=sys.stderr)
    return root


def product_occurrences(root: Path) -> tuple[Counter[tuple[str, str]], list[tuple[str, int, str, str]]]:
    from pinakes.kb import KBPaths

    conn = sqlite3.connect(KBPaths(root).index_db)
    try:
        occurrences = Counter(
            (src, dst) for src, dst in conn.execute(
                "SELECT s.path, d.path FROM text_links t JOIN documents s ON s.id = t.doc_id "
                "JOIN documents d ON d.id = t.dst_doc_id WHERE t.status IN ('resolved', 'ambiguous') "
                "AND t.doc_id != t.dst_doc_id"))
        problems = conn.execute(
            "SELECT s.path, t.line, t.status, t.target FROM text_links t JOIN documents s ON s.id = t.doc_id "
            "WHERE t.status IN ('unresolved', 'ambiguous') ORDER BY s.path, t.line").fetchall()
        edges = {(src, dst) for src, dst in conn.execute(
            "SELECT s.path, d.path FROM links l JOIN documents s ON s.id = l.src_doc_id "
            "JOIN documents d ON d.id = l.dst_doc_id WHERE l.origin = 'text'")}
    finally:
        conn.close()
    assert edges == set(occurrences), "the links rows are the distinct pairs of the resolved text links"
    return occurrences, problems


def reference(root: Path, documents: set[str]) -> tuple[Counter[tuple[str, str]], list[tuple[str, str]], int]:
    vault = root / "vault"
    files = [path.relative_to(root).as_posix() for path in vault.rglob("*") if path.is_file()
             and not path.name.endswith(".pnk.yaml") and ".obsidian" not in path.parts]
    resolver = ReferenceVault(files)
    occurrences: Counter[tuple[str, str]] = Counter()
    unresolved: list[tuple[str, str]] = []
    ambiguous = 0
    for source in sorted(documents):
        if not source.endswith(NOTE_SUFFIX):
            continue
        text = (root / source).read_text(encoding="utf-8")
        for kind, linkpath in reference_links(text):
            target, matched = resolver.resolve(kind, linkpath, source)
            ambiguous += matched > 1
            if target is None:
                unresolved.append((source, linkpath))
            elif target in documents and target != source:
                occurrences[(source, target)] += 1
    return occurrences, unresolved, ambiguous


def scores(found: Counter[tuple[str, str]], truth: Counter[tuple[str, str]]) -> dict[str, float | int]:
    hits = sum((found & truth).values())
    return {"found": sum(found.values()), "reference": sum(truth.values()), "agree": hits,
            "precision": round(hits / max(1, sum(found.values())), 4),
            "recall": round(hits / max(1, sum(truth.values())), 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description="the product's links from text against a reference resolver")
    parser.add_argument("vault", type=Path)
    parser.add_argument("--json", type=Path, default=None, help="write the numbers and disagreements here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-text-links-") as scratch:
        root = build_kb(args.vault.resolve(), Path(scratch))
        conn = sqlite3.connect(root / ".pinakes" / "index.db")
        documents = {path for (path,) in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
        conn.close()
        found, problems = product_occurrences(root)
        truth, unresolved, ambiguous = reference(root, documents)
    edge_scores = scores(Counter(set(found)), Counter(set(truth)))
    occurrence_scores = scores(found, truth)
    result: dict[str, Any] = {
        "documents": len(documents),
        "edges": edge_scores, "occurrences": occurrence_scores,
        "product_unresolved": sum(1 for p in problems if p[2] == "unresolved"),
        "product_ambiguous": sum(1 for p in problems if p[2] == "ambiguous"),
        "reference_unresolved": len(unresolved), "reference_ambiguous": ambiguous,
        "only_product": sorted(map(list, (found - truth).keys())),
        "only_reference": sorted(map(list, (truth - found).keys())),
        "product_problems": [list(p) for p in problems],
        "reference_unresolved_links": sorted(map(list, unresolved)),
    }
    print(json.dumps({key: value for key, value in result.items()
                      if not isinstance(value, list)}, indent=2))
    for key in ("only_product", "only_reference"):
        for pair in result[key][:20]:
            print(f"{key}: {pair}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
