"""Shared by the tests/test_links_*.py modules (this module holds no tests): the two synthetic KBs
copied side by side into a temporary directory (so `../partner-kb` resolves and the committed
corpora are never touched), synced through the real sync API with the deterministic fake embedder,
and small readers of what the index holds."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any, cast

from pinakes.pipeline.report import SyncReport
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.conftest import REPO_ROOT
from tests.test_serve_helpers import manifest_fake_embedder

DEMO_ID = "01M8P05RX7E8691VQVZ35N5HS3"
PARTNER_ID = "01M8P05RXHZDCE7J4M0T0EDGMH"
# Documents the committed sidecars link across the two KBs.
DEMO_OUTGOING = "01M8P0MB84BS9SF64T99A1N400"  # demo docs/loans/outgoing.md
PARTNER_BORROWING = "01M8P0MB9SGX4BNZ6TMJX564ET"  # partner docs/loans/borrowing-from-the-archive.md
PARTNER_COMPACT = "01M8P0MBAF99P5PQ86HMHE29E2"  # partner docs/emergency/heritage-emergency-compact.md
DEMO_PLAN = "01M8P0MB8HECY79VF4S79B9253"  # demo docs/emergency/plan.md
THIRD_KB = "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # a KB neither of them is
ABSENT_DOC = "01ARZ3NDEKTSV4RRFFQ69G5FAW"  # a document neither holds


def copy_kbs(tmp_path: Path) -> tuple[Path, Path]:
    """tests/demo-kb and tests/partner-kb, side by side under `tmp_path`, without any index."""
    demo, partner = tmp_path / "demo-kb", tmp_path / "partner-kb"
    for source, target in ((REPO_ROOT / "tests/demo-kb", demo), (REPO_ROOT / "tests/partner-kb", partner)):
        shutil.copytree(source, target, ignore=shutil.ignore_patterns(".pinakes"))
    return demo, partner


def sync(root: Path, **options: Any) -> SyncReport:  # Any: SyncOptions' own fields
    report = run_sync(root, SyncOptions(quiet=True, **options), embedder=manifest_fake_embedder(root))
    assert report.ok, report.render_text()
    return report


def scan_of(report: SyncReport, alias: str) -> dict[str, object]:
    found = [scan for scan in report.link_scans if scan["alias"] == alias]
    assert len(found) == 1, report.link_scans
    return found[0]


def rows(root: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:  # SQLite's values, as the row has them
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def inbound(root: Path) -> set[tuple[str, str, str, str]]:
    """(src_kb, src_doc, dst_doc, rel) of every reverse-scan row."""
    return {cast("tuple[str, str, str, str]", tuple(row)) for row in rows(
        root, "SELECT src_kb_id, src_doc_id, dst_doc_id, rel FROM links WHERE origin = 'reverse-scan'")}


def last_scan(root: Path, kb_id: str) -> str | None:
    found = rows(root, "SELECT last_scan FROM kb_refs WHERE kb_id = ?", kb_id)
    return found[0][0] if found else None


def append_link(sidecar: Path, target: str, rel: str) -> None:
    """Add a link by editing the YAML text, as a person would (the `links:` list is a block list)."""
    text = sidecar.read_text(encoding="utf-8")
    assert "links:\n" in text, text
    sidecar.write_text(text.replace("links:\n", f"links:\n  - target: {target}\n    rel: {rel}\n", 1),
                       encoding="utf-8")
