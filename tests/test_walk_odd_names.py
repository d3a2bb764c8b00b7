"""A file whose name is not UTF-8 (a byte os.fsdecode keeps as a lone surrogate): the index, its
sidecar and JSON cannot name it, so the walk skips it with its name shown and the remedy, and the
sync indexes everything else (it raised UnicodeEncodeError at the walk cache's insert)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from pinakes.init import init_kb
from pinakes.pipeline.run import SyncOptions
from pinakes.sources.walk import SKIP_NOT_UTF8
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder


@pytest.mark.skipif(os.name != "posix", reason="only a POSIX file system keeps a name's raw bytes")
@pytest.mark.parametrize("with_sidecars", [False, True], ids=["first-sync-columns", "with-a-sidecar"])
def test_a_name_that_is_not_utf8_is_skipped_with_its_remedy_and_the_rest_indexed(tmp_path: Path,
                                                                                   with_sidecars: bool) -> None:
    root = tmp_path / "kb"
    init_kb(root, name="odd")
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    (docs / "plain.md").write_text("# Plain\n\nA page with a UTF-8 name.\n", encoding="utf-8")
    (docs / "café.md").write_text("# Café\n\nA page with a UTF-8 accent.\n", encoding="utf-8")
    raw = os.path.join(os.fsencode(docs), b"caf\xe9-latin1.md")  # Latin-1 "é": not UTF-8
    with open(raw, "wb") as handle:
        handle.write(b"# Latin-1 name\n\nA page whose name is not UTF-8.\n")
    raw_dir = os.path.join(os.fsencode(docs), b"dir-\x80")
    os.mkdir(raw_dir)
    with open(os.path.join(raw_dir, b"inside.md"), "wb") as handle:
        handle.write(b"# Inside\n\nA page in a folder whose name is not UTF-8.\n")
    if with_sidecars:  # not a first sync of a bare tree: the walk keeps dicts
        (docs / "plain.md.pnk.yaml").write_text("id: 01JABCDEFGHJKMNPQRSTVWXYZ0\n", encoding="utf-8")

    for _ in range(2):  # the first sync, then one that walks against the cache
        report = run_sync(root, SyncOptions(), embedder=FakeEmbedder())
        skipped = dict(report.skipped)
        assert skipped.get("docs/caf\\xe9-latin1.md") == SKIP_NOT_UTF8
        assert skipped.get("docs/dir-\\x80/inside.md") == SKIP_NOT_UTF8
        assert not report.failures
        # What a user sees: the text and the JSON print on a strict UTF-8 stream.
        report.render_text().encode("utf-8")
        json.dumps(report.to_dict(), ensure_ascii=False).encode("utf-8")
    assert "rename it" in SKIP_NOT_UTF8
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        assert sorted(row[0] for row in conn.execute("SELECT path FROM documents WHERE state = 'active'")) == \
            ["docs/café.md", "docs/plain.md"]
    finally:
        conn.close()
    indexed = sorted(str(path.relative_to(root)) for path in docs.glob("*.pnk.yaml"))
    assert indexed == ["docs/café.md.pnk.yaml", "docs/plain.md.pnk.yaml"]
