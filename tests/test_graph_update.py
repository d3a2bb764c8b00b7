"""The graph a sync updates for the documents it changed is the graph a full derivation makes (node ids
aside): after edits, deletions, moves, tag changes, new hubs and hubs left with one member. Whatever
the sync cannot vouch for (a sync killed before its graph, a graph rewritten by anything else) is
derived in full."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

import pytest

from pinakes.init import init_kb
from pinakes.pipeline import graph as graph_stage
from pinakes.pipeline.graph_rows import CENSUS_KEY
from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder

Dump = tuple[list[tuple[str, str]], list[tuple[str, str, str]]]
FULL = graph_stage.derive_structure  # the full derivation, as the fixture below finds it


def page(title: str, tags: list[str], sections: list[str], words: str = "text") -> str:
    front = f"---\ntags: [{', '.join(tags)}]\n---\n" if tags else ""
    body = "".join(f"\n## {section}\n\nSome {words} under {section}.\n\n### Detail of {section}\n\nMore {words}.\n"
                   for section in sections)
    return f"{front}# {title}\n{body}"


def write(root: Path, path: str, text: str) -> None:
    target = root / "docs" / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def remove(root: Path, path: str, *, keep_sidecar: bool = False) -> None:
    (root / "docs" / path).unlink()
    if not keep_sidecar:
        (root / "docs" / f"{path}.pnk.yaml").unlink()


def sync(root: Path) -> SyncReport:
    report = run_sync(root, SyncOptions(quiet=True), embedder=FakeEmbedder())
    assert report.ok, report.render_text()
    return report


def dump(root: Path) -> Dump:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        nodes = sorted(conn.execute("SELECT kind, key FROM nodes"))
        edges = sorted(conn.execute(
            "SELECT s.kind || ':' || s.key, d.kind || ':' || d.key, e.kind FROM edges e "
            "JOIN nodes s ON s.id = e.src JOIN nodes d ON d.id = e.dst"))
        assert len(set(nodes)) == len(nodes)
        return nodes, edges
    finally:
        conn.close()


def full_derivation(root: Path) -> tuple[Dump, dict[str, int]]:
    """The graph and structural census a full derivation makes of the index as it is."""
    conn = sqlite3.connect(root / ".pinakes" / "index.db", isolation_level=None)
    try:
        census = FULL(conn)
    finally:
        conn.close()
    return dump(root), census


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How each graph stage went: "full" or "update"."""
    seen: list[str] = []
    real_full, real_derive = graph_stage.derive_structure, graph_stage.derive_graph

    def full(conn: sqlite3.Connection) -> dict[str, int]:
        seen[-1] = "full"
        return real_full(conn)

    def derive(conn: sqlite3.Connection, kb_id: str, changed: Collection[str] | None = None) -> dict[str, int]:
        seen.append("update")
        return real_derive(conn, kb_id, changed)

    monkeypatch.setattr(graph_stage, "derive_structure", full)
    monkeypatch.setattr(graph_stage, "derive_graph", derive)
    return seen


def make_kb(root: Path) -> Path:
    init_kb(root, name="graph-update")
    for folder in ("guides", "notes", "ref"):
        for number in range(6):
            write(root, f"{folder}/p{number}.md", page(f"{folder} {number}", ["shared", f"t{number % 2}"],
                                                      [f"S{number}", f"T{number}"]))
    write(root, "top.md", page("top", ["lonely"], ["Only"]))
    return root


def check_same_as_full(root: Path, report: SyncReport) -> None:
    updated = dump(root)
    full, census = full_derivation(root)
    assert updated == full
    assert report.graph_census is not None
    assert {kind: report.graph_census[kind] for kind in census} == census


def test_an_updated_graph_is_the_full_derivation_after_every_kind_of_change(tmp_path: Path,
                                                                           derivations: list[str]) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    assert derivations == ["full"]  # nothing to update from: a first sync derives it whole
    rounds = [
        # one edit: new sections, other tags
        lambda: write(root, "guides/p0.md", page("guides 0", ["t1", "fresh"], ["New", "Other", "Third"])),
        # a deletion (its sidecar left behind) and a new document in a new folder with a new tag hub
        lambda: (remove(root, "notes/p1.md", keep_sidecar=True),
                 write(root, "extra/new.md", page("new", ["fresh", "shared"], ["Alpha"], words="new words"))),
        # a move to another folder (same content: the identity and chunks move with it)
        lambda: (root / "docs/ref/p2.md").rename(root / "docs/extra/p2.md"),
        # a folder emptied down to one document, and a document without sections or tags
        lambda: (remove(root, "ref/p0.md"), remove(root, "ref/p1.md"),
                 write(root, "ref/p3.md", "Plain text without a heading.\n")),
        # a deleted document restored (revived from its sidecar), and a tag dropped by every member
        lambda: (write(root, "notes/p1.md", page("notes 1", ["shared", "t1"], ["S1", "T1"])),
                 *(write(root, f"guides/p{n}.md", page(f"guides {n}", [], [f"S{n}"])) for n in (1, 2, 3))),
    ]
    for number, change in enumerate(rounds):
        change()
        report = sync(root)
        assert derivations[-1] == "update", (number, derivations)
        check_same_as_full(root, report)


def test_a_graph_rewritten_since_its_census_was_recorded_is_derived_in_full(tmp_path: Path,
                                                                              derivations: list[str]) -> None:
    root = make_kb(tmp_path / "kb")
    sync(root)
    conn = sqlite3.connect(root / ".pinakes" / "index.db", isolation_level=None)
    try:  # what an older version's derivation leaves: other tables, no census of them
        conn.execute("DELETE FROM edges WHERE kind = 'sibling'")
        conn.execute("DELETE FROM meta WHERE key = ?", (CENSUS_KEY,))
    finally:
        conn.close()
    write(root, "notes/p0.md", page("notes 0", ["shared"], ["Changed"]))
    report = sync(root)
    assert derivations[-1] == "full"
    check_same_as_full(root, report)


KILLED_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
run_sync({kb!r}, SyncOptions(quiet=True), embedder=FakeEmbedder())
"""


@pytest.mark.heavy
def test_after_a_sync_killed_before_its_graph_the_next_derives_it_in_full(tmp_path: Path,
                                                                            derivations: list[str]) -> None:
    """The killed sync committed documents the next one does not change: only a full derivation
    brings the graph to them."""
    root = make_kb(tmp_path / "kb")
    sync(root)
    write(root, "guides/p3.md", page("guides 3", ["moved-on"], ["Rewritten", "Again"]))
    remove(root, "notes/p2.md")
    env = {**os.environ, "PNK_FAULT": "sync.before-graph"}
    killed = subprocess.run([sys.executable, "-c", KILLED_SCRIPT.format(repo=str(REPO_ROOT), kb=str(root))],
                            env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    report = sync(root)
    assert derivations[-1] == "full"
    check_same_as_full(root, report)
    write(root, "guides/p3.md", page("guides 3", ["moved-on", "shared"], ["Third time"]))
    report = sync(root)
    assert derivations[-1] == "update"
    check_same_as_full(root, report)
