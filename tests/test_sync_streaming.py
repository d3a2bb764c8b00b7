"""Sync at scale: documents stream through the DAG in groups, every file is accounted for, and
`pnk status` predicts the next sync. Fast tests, with the deterministic fake embedder."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from pinakes.init import init_kb
from pinakes.pipeline.report import SyncReport
from pinakes.pipeline.run import SyncOptions
from pinakes.pipeline.types import DocWork
from pinakes.rules import PipelineRun
from pinakes.rules import extract as extract_step
from pinakes.sources import walk as walk_step
from pinakes.sources.walk import FileState
from pinakes.sync import loader
from pinakes.sync.engine import run_sync
from pinakes.sync.status import kb_status
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder
from tests.kb_helpers import active_paths


def make_kb(root: Path, count: int) -> Path:
    init_kb(root, name="stream")
    for number in range(count):
        (root / "docs" / f"doc{number:02d}.md").write_text(
            f"# Document {number}\n\nParagraph {number} about topic {number % 3}.\n", encoding="utf-8")
    return root


def sync(root: Path, **options: object) -> SyncReport:
    return run_sync(root, SyncOptions(**cast("dict[str, Any]", options)), embedder=FakeEmbedder())



def work(path: str, size: int) -> DocWork:
    return DocWork(path, path, "markdown", FileState(path, size, 0, 0, "h"), None, None, "k", "added")


def test_groups_are_cut_by_estimated_tokens_and_keep_the_order() -> None:
    budget = loader.GROUP_TOKENS * loader.ESTIMATED_BYTES_PER_TOKEN
    items = [work("a", budget // 2), work("b", budget // 2), work("c", 1), work("huge", budget * 10),
             work("d", 1)]
    groups = loader.stream_groups(items)
    assert [[item.path for item in group] for group in groups] == [["a", "b"], ["c"], ["huge"], ["d"]]
    cap = loader.GROUP_MAX_DOCUMENTS
    beyond = int(cap * loader.LAST_GROUP_SLACK) - cap  # the most documents a short last group may have to join
    many = [work(f"s{n}", 1) for n in range(cap + beyond + 1)]
    assert [len(group) for group in loader.stream_groups(many)] == [cap, beyond + 1]
    many = [work(f"s{n}", 1) for n in range(2 * cap + 1)]
    assert [len(group) for group in loader.stream_groups(many)] == [cap, cap + 1]


def test_a_short_last_group_joins_the_one_before_it_within_the_slack() -> None:
    """A short tail would be embedded as a sorted set of its own (more padding, one more doit run):
    it joins the group before it while both together stay within LAST_GROUP_SLACK times each cap."""
    budget = loader.GROUP_TOKENS * loader.ESTIMATED_BYTES_PER_TOKEN
    cap = loader.GROUP_MAX_DOCUMENTS
    joined = loader.stream_groups([work(f"s{n}", 1) for n in range(cap + 44)])  # 300 small pages
    assert [len(group) for group in joined] == [cap + 44]
    assert [item.path for item in joined[0]] == [f"s{n}" for n in range(cap + 44)]  # the order kept
    # By bytes too: a tail past the slack of the token budget stays a group of its own.
    heavy = [work("a", budget), work("b", budget // 2)]
    assert [[item.path for item in group] for group in loader.stream_groups(heavy)] == [["a"], ["b"]]
    light = [work("a", budget), work("b", budget // 4)]
    assert [[item.path for item in group] for group in loader.stream_groups(light)] == [["a", "b"]]


def test_a_group_is_committed_before_the_next_group_is_extracted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb", 7)
    monkeypatch.setattr(loader, "GROUP_MAX_DOCUMENTS", 2)
    events: list[tuple[str, str, int, int]] = []
    real_extract = extract_step.run_extract

    def spying_extract(run: PipelineRun, item: DocWork) -> None:
        conn = run.ctx.writer()
        committed = conn.execute("SELECT COUNT(*) FROM documents WHERE state = 'active'").fetchone()[0]
        events.append(("extract", item.path, committed, len(run.extracted)))
        real_extract(run, item)

    monkeypatch.setattr(extract_step, "run_extract", spying_extract)
    report = sync(root)
    assert report.ok and len(report.added) == 7
    # Groups in path order (doit may extract a group's members in any order; commits are in path
    # order, which keeps chunk ids deterministic).
    paths = [path for _, path, _, _ in events]
    assert [set(paths[n:n + 2]) for n in range(0, 7, 2)] == [
        {f"docs/doc{m:02d}.md" for m in range(n, min(n + 2, 7))} for n in range(0, 7, 2)]
    # Before each group's first extraction, every earlier group is in the index already; no more
    # than one group's text is ever held.
    for position, (_, _path, committed, held) in enumerate(events):
        group_start = position - position % 2
        assert committed == group_start
        assert held == position - group_start
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        order = [row[0] for row in conn.execute(
            "SELECT d.path FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY c.id")]
    finally:
        conn.close()
    assert order == sorted(order)


def test_a_large_document_streams_its_chunks_in_slices(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from pinakes.pipeline import embed as embed_step

    root = make_kb(tmp_path / "kb", 1)
    monkeypatch.setattr(embed_step, "EMBED_SLICE_CHUNKS", 4)
    body = "\n\n".join(f"Paragraph {n} " + "word " * 240 for n in range(11))  # one chunk per paragraph
    (root / "docs" / "big.md").write_text(body, encoding="utf-8")
    embedder = FakeEmbedder()
    calls: list[int] = []
    real = embedder.embed_documents

    def counting(texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        calls.append(len(texts))
        return real(texts, batch_size)

    embedder.embed_documents = counting
    report = run_sync(root, SyncOptions(), embedder=embedder)
    assert report.ok
    assert max(calls) <= 4 and sum(calls) == report.chunks_embedded
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        (big_chunks,) = conn.execute("SELECT COUNT(*) FROM chunks c JOIN documents d ON d.id = c.doc_id "
                                     "WHERE d.path = 'docs/big.md'").fetchone()
        (vectors,) = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()
        (chunks,) = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()
    finally:
        conn.close()
    assert big_chunks >= 11 and vectors == chunks


STREAM_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder
from pinakes.sync import loader
loader.GROUP_MAX_DOCUMENTS = 3
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
report = run_sync({kb!r}, SyncOptions(), embedder=FakeEmbedder())
print(len(report.added))
"""


@pytest.mark.heavy
def test_kill_during_embedding_loses_at_most_the_group_in_flight(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 12)
    script = STREAM_SCRIPT.format(repo=str(REPO_ROOT), kb=str(root))
    env = {**os.environ, "PNK_FAULT": "sync.mid-document-write:8"}  # inside the 8th document's write
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        committed = {row[0] for row in conn.execute("SELECT path FROM documents WHERE state = 'active'")}
    finally:
        conn.close()
    # Groups of 3: groups 1 and 2 and the first document of group 3 were committed; only the 8th
    # document (rolled back) and the rest of its group are lost.
    assert committed == {f"docs/doc{n:02d}.md" for n in range(7)}
    env.pop("PNK_FAULT")
    again = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "5"
    assert active_paths(root) == {f"docs/doc{n:02d}.md" for n in range(12)}


def sidecar_ids(root: Path) -> dict[str, str]:
    """Each document's ID as its sidecar on disk says it (document path -> ID)."""
    ids: dict[str, str] = {}
    for sidecar in (root / "docs").glob("*.pnk.yaml"):
        line = next(line for line in sidecar.read_text(encoding="utf-8").splitlines() if line.startswith("id: "))
        ids[f"docs/{sidecar.name.removesuffix('.pnk.yaml')}"] = line[4:].strip()
    return ids


@pytest.mark.heavy
def test_kill_while_minting_a_later_group_loses_nothing_and_the_next_sync_converges(tmp_path: Path) -> None:
    """New documents' sidecars are minted group by group, just before each group's extraction: a
    kill -9 between two mints of the second group leaves the first group committed, the sidecars
    written so far (each ID on disk before any index row names it) and none for the groups not
    reached. The next sync indexes the minted documents under the IDs on disk, mints the rest,
    and one more sync finds nothing to do."""
    root = make_kb(tmp_path / "kb", 12)
    script = STREAM_SCRIPT.format(repo=str(REPO_ROOT), kb=str(root))
    env = {**os.environ, "PNK_FAULT": "sync.after-sidecar-write:5"}  # the 2nd mint of group 2 (groups of 3)
    killed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    minted = sidecar_ids(root)
    assert set(minted) == {f"docs/doc{n:02d}.md" for n in range(5)}  # streamed: not all 12 up front
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        committed = dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'").fetchall())
        # Hashing was deferred to each group: the walk cache learned only what was hashed, never "".
        cached = dict(conn.execute("SELECT path, content_hash FROM walk_cache").fetchall())
    finally:
        conn.close()
    assert committed == {path: minted[path] for path in ("docs/doc00.md", "docs/doc01.md", "docs/doc02.md")}
    assert cached == {path: walk_step.hash_file(root / path) for path in cached}
    assert {path for path in cached if path.endswith(".md")} == set(committed)
    env.pop("PNK_FAULT")
    again = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           timeout=120)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "9"
    ids = sidecar_ids(root)
    assert {path: ids[path] for path in minted} == minted  # every ID minted before the kill is kept
    assert len(set(ids.values())) == len(ids) == 12  # no duplicate
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        assert dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'").fetchall()) == ids
        assert conn.execute("SELECT COUNT(*) FROM documents WHERE state != 'active'").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM chunks c LEFT JOIN embeddings e ON e.chunk_id = c.id "
                            "WHERE e.chunk_id IS NULL").fetchone() == (0,)
    finally:
        conn.close()
    assert sync(root).noop


def test_every_file_is_accounted_for_in_text_and_json(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_kb(tmp_path / "kb", 2)
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(
        '# exclude = ["drafts/"]', 'exclude = ["drafts/", "*.log.txt"]'), encoding="utf-8")
    docs = root / "docs"
    (docs / "page.xlsx").write_text("x", encoding="utf-8")
    (docs / "data.json").write_text("{}", encoding="utf-8")
    (docs / "run.log.txt").write_text("log", encoding="utf-8")
    (docs / "drafts").mkdir()
    (docs / "drafts" / "wip.md").write_text("# wip", encoding="utf-8")
    (docs / "outside.md").symlink_to(tmp_path)
    (docs / "locked.md").write_text("# locked", encoding="utf-8")
    real_hash = walk_step.hash_file

    def refusing(path: str | Path) -> str:
        if str(path).endswith("locked.md"):
            raise PermissionError(13, "Permission denied")
        return real_hash(path)

    monkeypatch.setattr(walk_step, "hash_file", refusing)
    report = sync(root)
    expected = {("docs/page.xlsx", walk_step.SKIP_NO_EXTRACTOR),
                ("docs/data.json", walk_step.SKIP_NO_EXTRACTOR),
                ("docs/run.log.txt", walk_step.SKIP_EXCLUDED),
                ("docs/drafts/", walk_step.SKIP_EXCLUDED),
                ("docs/outside.md", walk_step.SKIP_SYMLINK)}
    assert set(report.skipped) == expected
    assert [(f.path, f.stage) for f in report.failures] == [("docs/locked.md", "read")]
    assert "Permission denied" in report.failures[0].error
    assert not report.ok and len(report.added) == 2
    text = report.render_text()
    assert "files: 2 indexed, 0 unchanged, 5 skipped, 1 failed" in text
    for path, reason in expected:
        assert path in text and reason in text
    data = report.to_dict()
    assert {(entry["path"], entry["reason"]) for entry in cast("list[dict[str, str]]", data["skipped"])} == expected
    assert data["counts"] == {"indexed": 2, "unchanged": 0, "skipped": 5, "failed": 1}
    # An indexed document that becomes unreadable is held as it was, never soft-deleted.
    monkeypatch.setattr(walk_step, "hash_file", real_hash)
    assert sync(root).ok
    (docs / "doc00.md").write_text("# changed\n", encoding="utf-8")

    def refusing_doc00(path: str | Path) -> str:
        return refusing(str(path).replace("doc00", "locked"))

    monkeypatch.setattr(walk_step, "hash_file", refusing_doc00)
    held = sync(root)
    assert held.deleted == [] and "docs/doc00.md" in active_paths(root)
    assert ("docs/doc00.md", "read") in {(f.path, f.stage) for f in held.failures}


def test_a_hostile_file_name_is_escaped_in_the_text_report(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 0)
    (root / "docs" / "evil\x1b[2J\nname.html").write_text("x", encoding="utf-8")
    text = sync(root).render_text()
    assert "\x1b" not in text and "evil\\x1b[2J\\nname.html" in text


def test_status_predicts_what_the_next_sync_does(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 5)
    assert sync(root).ok
    docs = root / "docs"
    (docs / "doc00.md").write_text("# Document 0\n\nRewritten.\n", encoding="utf-8")  # changed
    (docs / "doc01.md").rename(docs / "moved.md")  # moved, sidecar left behind: hash rename
    (docs / "doc02.md").unlink()  # deleted
    sidecar = docs / "doc03.md.pnk.yaml"
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace("tags: []", "tags: [fresh]"),
                       encoding="utf-8")
    (docs / "new.md").write_text("# New\n\nBrand new.\n", encoding="utf-8")
    (docs / "skip.xlsx").write_text("x", encoding="utf-8")
    before = {p: p.stat().st_mtime_ns for p in docs.rglob("*")}
    status = kb_status(root)
    assert {p: p.stat().st_mtime_ns for p in docs.rglob("*")} == before  # status wrote nothing
    assert not status.up_to_date
    report = sync(root)
    assert status.added == report.added == ["docs/new.md"]
    assert status.changed == report.changed == ["docs/doc00.md"]
    assert status.renamed == report.renamed == [("docs/doc01.md", "docs/moved.md")]
    assert status.deleted == report.deleted == ["docs/doc02.md"]
    assert "docs/doc03.md" in status.metadata_refreshed and "docs/doc03.md" in report.metadata_refreshed
    assert status.skipped == report.skipped == [("docs/skip.xlsx", walk_step.SKIP_NO_EXTRACTOR)]
    assert "docs/new.md.pnk.yaml" in status.sidecars_written
    after = kb_status(root)
    assert after.up_to_date and after.unchanged == 5 and after.last_sync_at is not None
    assert json.loads(json.dumps(after.to_dict()))["up_to_date"] is True


def test_status_on_a_kb_never_synced(tmp_path: Path) -> None:
    root = make_kb(tmp_path / "kb", 2)
    status = kb_status(root)
    assert not status.index_exists and status.added == ["docs/doc00.md", "docs/doc01.md"]
    assert "no index yet" in status.render_text()
    assert not (root / ".pinakes" / "index.db").exists()


SYNC_ON_TERMINAL = """
import sys, time
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync


class SlowFake(FakeEmbedder):
    def embed_documents(self, texts, batch_size=None):
        time.sleep(0.05)  # long enough for the bar to redraw between documents
        return super().embed_documents(texts, batch_size)


from pinakes.sync import loader
loader.GROUP_MAX_DOCUMENTS = 2
report = run_sync({kb!r}, SyncOptions(quiet=sys.argv[1] == "quiet"), embedder=SlowFake())
print(len(report.added))
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs a POSIX pseudo-terminal")
@pytest.mark.parametrize("mode", ["loud", "quiet"])
def test_a_sync_on_a_terminal_draws_a_progress_bar_unless_quiet(tmp_path: Path, mode: str) -> None:
    from tests.terminal import run_on_pty

    root = make_kb(tmp_path / "kb", 12)
    stdout, screen = run_on_pty(SYNC_ON_TERMINAL.format(repo=str(REPO_ROOT), kb=str(root)), mode)
    assert stdout.strip() == "12"
    if mode == "quiet":
        assert screen == ""
        return
    # doit swaps sys.stderr while its tasks run; the bar still reaches the terminal.
    assert re.search(r"\d+/12 documents +\d+%\|", screen), screen
    assert re.search(r"\d+ chunks", screen) and "docs/doc" in screen, screen
    assert "Traceback" not in screen


def test_a_document_that_will_be_slow_is_announced_before_its_embedding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from pinakes.pipeline import chunk as chunk_step

    root = make_kb(tmp_path / "kb", 2)
    # Each paragraph one chunk: within the model's input less the room kept for its context.
    (root / "docs" / "big.md").write_text("\n\n".join(f"Para {n} " + "word " * 200 for n in range(6)),
                                          encoding="utf-8")
    monkeypatch.setattr(chunk_step, "SLOW_DOCUMENT_CHUNKS", 5)
    stream = io.StringIO()
    events: list[str] = []
    embedder = FakeEmbedder()
    real = embedder.embed_documents

    def noting(texts: Sequence[str], batch_size: int | None = None) -> np.ndarray:
        events.append(f"embed {len(texts)} (announced so far: {stream.getvalue().count('big.md')})")
        return real(texts, batch_size)

    embedder.embed_documents = noting
    report = run_sync(root, SyncOptions(), embedder=embedder, progress_stream=stream)
    assert report.ok
    assert stream.getvalue().startswith("sync: docs/big.md: 6 chunks to embed")
    assert all(event.endswith("(announced so far: 1)") for event in events), events
    quiet = io.StringIO()
    (root / "docs" / "big.md").write_text("\n\n".join(f"Other {n} " + "text " * 240 for n in range(6)),
                                          encoding="utf-8")
    run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder(), progress_stream=quiet)
    assert quiet.getvalue() == ""


def test_restoring_many_sidecars_is_announced_and_minting_is_not_waited_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Restored sidecars are written at pairing, before any indexing: said before it starts. New
    documents' sidecars are minted with their groups, so nothing waits on them in one block."""
    import io

    from pinakes.pipeline import sidecar_writes

    root = make_kb(tmp_path / "kb", 3)
    monkeypatch.setattr(sidecar_writes, "MANY_SIDECARS", 3)
    stream = io.StringIO()
    report = run_sync(root, SyncOptions(), embedder=FakeEmbedder(), progress_stream=stream)
    assert report.ok and len(report.sidecars_written) == 3
    assert "writing 3 sidecars" not in stream.getvalue()
    for sidecar in (root / "docs").glob("*.pnk.yaml"):
        sidecar.unlink()
    stream = io.StringIO()
    report = run_sync(root, SyncOptions(), embedder=FakeEmbedder(), progress_stream=stream)
    assert report.ok and len(report.sidecars_written) == 3
    assert stream.getvalue().startswith("sync: writing 3 sidecars")
