"""Issue #26 item 3: a link authored in one connected KB shows up as inbound in the other after one
plain `pnk sync` of each, in either order, without `--scan-links` and inside the freshness window;
an unchanged partner is still not walked within the window; and a sync that reports 0 inbound from
a partner it did not scan says when it will and how to scan now. Through the CLI (`pnk link`,
`pnk sync`, `pnk links`), on copies of tests/demo-kb and tests/partner-kb, with the fake embedder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pinakes.cli import main
from pinakes.links import reverse
from pinakes.manifest import EmbeddingSection
from tests.fakes import FakeEmbedder, substitute_embedder
from tests.test_links_helpers import DEMO_ID, PARTNER_ID, THIRD_KB, copy_kbs, inbound, rows

GOVERNANCE = "docs/governance/about.md"  # demo: no links of its own
EXHIBITIONS = "docs/about.md"  # partner: no links of its own


@pytest.fixture
def kbs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    def fake(section: EmbeddingSection, **_: object) -> FakeEmbedder:
        return FakeEmbedder(dim=section.dim, model=section.model, provider=section.provider)

    substitute_embedder(monkeypatch, fake)
    demo, partner = copy_kbs(tmp_path)
    for root in (demo, partner):  # both indexed and scanned once: every later sync is inside the window
        _pnk(root, "sync", "--quiet")
    for root in (demo, partner):
        _pnk(root, "sync", "--quiet")
    return demo, partner


def _pnk(root: Path, *argv: str) -> None:
    assert main(["-C", str(root), *argv]) == 0


def _inbound_in_pnk_links(root: Path, doc: str, capsys: pytest.CaptureFixture[str]) -> list[tuple[str, str]]:
    capsys.readouterr()
    _pnk(root, "links", doc, "--direction", "in", "--json")
    result = json.loads(capsys.readouterr().out)
    return [(item["kb"]["id"], edge["rel"]) for item in result["neighbours"] for edge in item["edges"]]


@pytest.mark.parametrize("target_first", [False, True], ids=["source-syncs-first", "target-syncs-first"])
@pytest.mark.parametrize("authored_in", ["demo", "partner"])
def test_a_link_authored_in_one_kb_is_inbound_in_the_other_after_one_plain_sync_of_each(
        kbs: tuple[Path, Path], authored_in: str, target_first: bool, capsys: pytest.CaptureFixture[str]) -> None:
    demo, partner = kbs
    source, target, source_doc, target_doc, alias, source_id = (
        (demo, partner, GOVERNANCE, EXHIBITIONS, "partner", DEMO_ID) if authored_in == "demo" else
        (partner, demo, EXHIBITIONS, GOVERNANCE, "archive", PARTNER_ID))
    assert _inbound_in_pnk_links(target, target_doc, capsys) == []
    _pnk(source, "link", source_doc, f"{alias}:{target_doc}", "--rel", "cites")
    for root in ((target, source) if target_first else (source, target)):
        _pnk(root, "sync")
    assert _inbound_in_pnk_links(target, target_doc, capsys) == [(source_id, "cites")]
    # and un-linking travels the same way
    _pnk(source, "unlink", source_doc, f"{alias}:{target_doc}")
    for root in ((target, source) if target_first else (source, target)):
        _pnk(root, "sync")
    assert _inbound_in_pnk_links(target, target_doc, capsys) == []


def test_a_partner_that_did_not_change_is_not_walked_within_the_window(
        kbs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    demo, partner = kbs
    walked: list[Path] = []
    real = reverse._enumerate_sidecars  # pyright: ignore[reportPrivateUsage] -- the test counts the walk's calls

    def recording(root: Path, *a: Any):
        return walked.append(root) or real(root, *a)

    monkeypatch.setattr(reverse, "_enumerate_sidecars", recording)
    (demo / "docs/governance/new.md").write_text("# New\n\nA note that changes the demo KB.\n", encoding="utf-8")
    _pnk(partner, "sync")  # the partner syncs, and nothing of its links changed
    capsys.readouterr()
    _pnk(demo, "sync")  # a sync with work to do: the reverse-scan step runs, and finds the partner fresh
    assert "links from partner: fresh" in capsys.readouterr().out
    assert walked == []


def test_a_hand_edit_in_a_partner_shows_up_once_the_partner_has_synced(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    sidecar = partner / f"{EXHIBITIONS}.pnk.yaml"
    governance = rows(demo, "SELECT id FROM documents WHERE path = ?", GOVERNANCE)[0][0]
    text = sidecar.read_text(encoding="utf-8")
    assert "links:" not in text
    sidecar.write_text(text + f"links:\n  - target: pnk://{DEMO_ID}/{governance}\n    rel: by-hand\n",
                       encoding="utf-8")
    _pnk(demo, "sync")  # the partner has not synced: its mark has not moved, the window holds
    assert not any(row[3] == "by-hand" for row in inbound(demo))
    _pnk(partner, "sync")  # its sync sees its sidecar's new cross-KB link and marks it
    _pnk(demo, "sync")
    assert any(row[3] == "by-hand" for row in inbound(demo))


def test_zero_inbound_from_a_partner_not_scanned_says_when_and_how(tmp_path: Path, kbs: tuple[Path, Path],
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    demo, partner = kbs
    # the partner's links to demo all go to a third KB instead (hand edits, then its sync, then demo's)
    for sidecar in partner.rglob("*.pnk.yaml"):
        text = sidecar.read_text(encoding="utf-8")
        sidecar.write_text(text.replace(f"pnk://{DEMO_ID}/", f"pnk://{THIRD_KB}/"), encoding="utf-8")
    _pnk(partner, "sync", "--quiet")
    _pnk(demo, "sync", "--quiet")
    assert not any(row[0] == PARTNER_ID for row in inbound(demo))
    (demo / "docs/governance/new.md").write_text("# New\n\nA change, so the sync reports its steps.\n",
                                                 encoding="utf-8")
    capsys.readouterr()
    _pnk(demo, "sync")
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("links from partner"))
    assert line.startswith("links from partner: fresh, 0 inbound (not scanned now")
    assert "UTC" in line and "pnk sync --scan-links" in line
    _pnk(demo, "sync", "--json", "--scan-links")
    scan = next(s for s in json.loads(capsys.readouterr().out)["link_scans"] if s["alias"] == "partner")
    assert scan["status"] == reverse.SCANNED and scan["next_scan"] is None

