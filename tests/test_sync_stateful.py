"""Random sequences of create / edit / rename (with and without the sidecar) / delete / sidecar-only
edit / duplicate, with a sync after every step, checked against the identity rules of spec §6.4."""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

NAMES = st.sampled_from(["a", "b", "c", "d", "sub/e", "sub/f"])
CONTENTS = st.sampled_from(["alpha words", "beta words", "gamma words", "delta", "epsilon text"])
EMBEDDER = FakeEmbedder()


class SyncMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="pnk-stateful-"))
        self.kb = self.tmp / "kb"
        init_kb(self.kb, name="stateful")
        self.expected: dict[str, str | None] = {}  # path -> ID it must have (None: any new ID)
        self.seen_ids: set[str] = set()
        self.touched: set[str] = set()
        self.sidecar_bytes: dict[str, bytes] = {}

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- helpers -----------------------------------------------------------------------------
    def doc(self, name: str) -> Path:
        return self.kb / "docs" / f"{name}.md"

    def rel(self, name: str) -> str:
        return f"docs/{name}.md"

    def present(self) -> list[str]:
        return sorted(self.expected)

    def sync(self) -> None:
        report = run_sync(self.kb, SyncOptions(), embedder=EMBEDDER)
        assert report.ok, report.render_text()
        active = self.index_ids()
        for path, want in self.expected.items():
            assert path in active, f"{path} is on disk but not indexed"
            if want is not None:
                assert active[path] == want, f"{path} changed ID"
            else:
                assert active[path] not in self.seen_ids, f"{path} reused ID {active[path]}"
            self.expected[path] = active[path]
        assert set(active) == set(self.expected), "index rows do not match the files on disk"
        assert len(set(active.values())) == len(active), "two paths share an ID"
        for path in self.expected:
            sidecar = self.kb / (path + ".pnk.yaml")
            if path not in self.touched and path in self.sidecar_bytes:
                assert sidecar.read_bytes() == self.sidecar_bytes[path], f"{path}: sidecar rewritten"
            self.sidecar_bytes[path] = sidecar.read_bytes()
        self.seen_ids.update(active.values())
        self.touched = set()

    def index_ids(self) -> dict[str, str]:
        conn = sqlite3.connect(self.kb / ".pinakes" / "index.db")
        try:
            return dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'"))
        finally:
            conn.close()

    # --- rules -------------------------------------------------------------------------------
    @rule(name=NAMES, content=CONTENTS)
    def create(self, name: str, content: str) -> None:
        path = self.rel(name)
        if path in self.expected:
            return
        self.doc(name).parent.mkdir(parents=True, exist_ok=True)
        self.doc(name).write_text(content, encoding="utf-8")
        stale_sidecar = self.kb / (path + ".pnk.yaml")
        if stale_sidecar.exists():  # an orphan from a delete: the file comes back with its old ID
            stale_sidecar.unlink()
        self.expected[path] = None
        self.touched.add(path)
        self.sync()

    @precondition(lambda self: self.expected)
    @rule(data=st.data(), content=CONTENTS)
    def edit(self, data: st.DataObject, content: str) -> None:
        path = data.draw(st.sampled_from(self.present()))
        (self.kb / path).write_text(content + " edited", encoding="utf-8")
        self.sync()

    @precondition(lambda self: self.expected)
    @rule(data=st.data(), target_name=NAMES, with_sidecar=st.booleans())
    def rename(self, data: st.DataObject, target_name: str, with_sidecar: bool) -> None:
        path = data.draw(st.sampled_from(self.present()))
        target = self.rel(target_name)
        if target in self.expected or (self.kb / (target + ".pnk.yaml")).exists():
            return
        doc_id = self.expected.pop(path)
        (self.kb / target).parent.mkdir(parents=True, exist_ok=True)
        (self.kb / path).rename(self.kb / target)
        if with_sidecar:
            (self.kb / (path + ".pnk.yaml")).rename(self.kb / (target + ".pnk.yaml"))
        # Without its sidecar the document is still found: the one new path holding the gone
        # document's exact content is a rename (another *indexed* copy is not a candidate).
        self.expected[target] = doc_id
        self.touched.add(target)
        self.sync()

    @precondition(lambda self: self.expected)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(self.present()))
        (self.kb / path).unlink()
        del self.expected[path]
        self.sync()
        assert (self.kb / (path + ".pnk.yaml")).exists(), "a sidecar was deleted"

    @precondition(lambda self: self.expected)
    @rule(data=st.data(), tag=st.sampled_from(["x", "y", "z"]))
    def edit_sidecar(self, data: st.DataObject, tag: str) -> None:
        path = data.draw(st.sampled_from(self.present()))
        sidecar = self.kb / (path + ".pnk.yaml")
        text = sidecar.read_text(encoding="utf-8")
        lines = [line for line in text.splitlines() if not line.startswith("tags:")]
        sidecar.write_text("\n".join([*lines, f"tags: [{tag}]"]) + "\n", encoding="utf-8")
        self.touched.add(path)
        self.sync()

    @precondition(lambda self: self.expected)
    @rule(data=st.data(), target_name=NAMES)
    def duplicate(self, data: st.DataObject, target_name: str) -> None:
        path = data.draw(st.sampled_from(self.present()))
        target = self.rel(target_name)
        if target in self.expected or (self.kb / (target + ".pnk.yaml")).exists():
            return
        (self.kb / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.kb / path, self.kb / target)
        self.expected[target] = None
        self.touched.add(target)
        self.sync()

    @invariant()
    def every_present_document_has_a_sidecar(self) -> None:
        for path in self.expected:
            assert (self.kb / (path + ".pnk.yaml")).exists()


SyncMachine.TestCase.settings = settings(
    max_examples=8, stateful_step_count=8, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestSyncStateful = SyncMachine.TestCase
