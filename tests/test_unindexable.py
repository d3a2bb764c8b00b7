"""A file no sync can index (issue #26): a binary named `.md` fails every sync until it changes, so
"run pnk sync" is no remedy. Sync's report and doctor name the exact `[sources] exclude` line that
leaves it out, and that line, pasted into the manifest, makes the next sync succeed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pinakes.doctor import DoctorContext, run_checks
from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.manifest.patterns import exclude_line, literal_pattern
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder

ZIP_NAMED_MD = b"PK\x03\x04" + b"\x00" * 64


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="unindexable")
    (root / "docs/good.md").write_text("# Good\n\nA readable note.\n", encoding="utf-8")
    (root / "docs/archive.md").write_bytes(ZIP_NAMED_MD)
    (root / "docs/odd [draft]*.md").write_bytes(ZIP_NAMED_MD)  # glob characters in the name
    return root


def set_exclude(root: Path, line: str) -> None:
    """Paste the remedy's line under [sources], as its reader would."""
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^# exclude = .*$", line, text, count=1)
    assert line in text
    manifest.write_text(text, encoding="utf-8")


def test_the_report_names_the_exclusion_and_pasting_it_makes_the_next_sync_succeed(kb: Path) -> None:
    first = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert not first.ok
    again = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())  # the same failure, every sync
    assert sorted(f.path for f in again.failures) == ["docs/archive.md", "docs/odd [draft]*.md"]
    line = again.exclusion
    assert line == 'exclude = ["docs/archive.md", "docs/odd [[]draft][*].md"]'
    assert line in again.render_text() and again.to_dict()["exclusion"] == line
    set_exclude(kb, line)
    after = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert after.ok and after.exclusion is None
    assert {path for path, _reason in after.skipped} == {"docs/archive.md", "docs/odd [draft]*.md"}


def test_the_line_keeps_the_patterns_the_manifest_already_excludes(kb: Path) -> None:
    set_exclude(kb, 'exclude = ["drafts/"]')
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert report.exclusion == 'exclude = ["drafts/", "docs/archive.md", "docs/odd [[]draft][*].md"]'


def test_doctor_gives_the_exclusion_not_another_sync(kb: Path) -> None:
    run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    checks = {check.name: check for check in run_checks(DoctorContext(kb))}
    failures = checks["sync failures"]
    assert failures.status == "FAIL"
    assert 'exclude = ["docs/archive.md", "docs/odd [[]draft][*].md"]' in (failures.remedy or "")
    coverage = checks["coverage"]
    assert coverage.status == "WARN" and "pnk sync" not in (coverage.remedy or "")
    assert "sync failures" in (coverage.remedy or "")


@pytest.mark.parametrize("relpath", ["notes.md", "docs/a b.md", "docs/x?.md", "docs/[x].md", "docs/**.md",
                                     "deep/er/name.md"])
def test_a_literal_pattern_selects_exactly_its_file(tmp_path: Path, relpath: str) -> None:
    """The pattern goes through the manifest's own glob rules: it leaves out that file and no other."""
    root = tmp_path / "kb"
    init_kb(root, name="patterns")
    set_exclude(root, exclude_line((), [literal_pattern(relpath)]))
    sources = load_manifest(root / "pinakes.toml").sources
    sources = type(sources)(roots=(".",), include=sources.include, exclude=sources.exclude)
    assert not sources.selects(relpath)
    for neighbour in ("other.md", f"sub/{relpath}", relpath.replace(".md", "2.md"), "docs/ab.md", "docs/x.md"):
        if neighbour != relpath:
            assert sources.selects(neighbour), neighbour


def test_an_empty_pdf_is_called_empty(kb: Path) -> None:
    pytest.importorskip("pypdfium2", reason="the [pdf] extra reads PDFs")
    (kb / "docs/empty.pdf").write_bytes(b"")
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    (error,) = [f.error for f in report.failures if f.path == "docs/empty.pdf"]
    assert "the file is empty (0 bytes)" in error and "Data format" not in error
    assert '"docs/empty.pdf"' in (report.exclusion or "")


def test_status_names_the_exclusion_too(kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.cli import main

    run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert main(["-C", str(kb), "status"]) == 0
    out = capsys.readouterr().out
    assert 'exclude = ["docs/archive.md", "docs/odd [[]draft][*].md"]' in out
    assert main(["-C", str(kb), "status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["exclusion"] == 'exclude = ["docs/archive.md", "docs/odd [[]draft][*].md"]'


def test_a_file_no_sync_can_extract_keeps_no_sidecar(kb: Path) -> None:
    """Issue #40: pairing minted a sidecar (a permanent ID) for each unextractable file, which no
    index would ever refer to. The sidecar the run minted is taken back; the good document keeps its."""
    for _ in range(2):  # and the next sync, which tries again, does the same
        report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
        assert sorted(f.path for f in report.failures) == ["docs/archive.md", "docs/odd [draft]*.md"]
        assert not (kb / "docs/archive.md.pnk.yaml").exists()
        assert not (kb / "docs/odd [draft]*.md.pnk.yaml").exists()
        assert "docs/archive.md.pnk.yaml" not in report.sidecars_written
    assert (kb / "docs/good.md.pnk.yaml").exists()
    set_exclude(kb, report.exclusion or "")  # pyright: ignore[reportPossiblyUnboundVariable]  # the loop runs twice
    after = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert after.ok and after.orphaned_sidecars == []  # nothing left behind by the failed files


def test_a_sidecar_the_run_did_not_mint_is_never_taken_back(kb: Path) -> None:
    """A sidecar that was there before the sync (written by hand, or minted by the pre-commit hook)
    holds an ID someone chose to keep: it stays, however the file fails."""
    from pinakes.ids import new_ulid
    from pinakes.sidecar import write_new_sidecar

    write_new_sidecar(kb / "docs/archive.md", doc_id=new_ulid(), title="The archive")
    kept = (kb / "docs/archive.md.pnk.yaml").read_bytes()
    report = run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    assert "docs/archive.md" in {f.path for f in report.failures}
    assert (kb / "docs/archive.md.pnk.yaml").read_bytes() == kept


def test_a_run_that_writes_no_sidecars_still_names_the_file_and_its_exclusion(kb: Path) -> None:
    """Without its sidecar, an index-only run (the post-commit hook, `pnk eval`) does not try the file;
    it keeps the failure the last sync recorded, so status and doctor still give the exclusion line,
    until the file changes."""
    run_sync(kb, SyncOptions(), embedder=FakeEmbedder())
    hooked = run_sync(kb, SyncOptions(index_only=True), embedder=FakeEmbedder())
    assert sorted(f.path for f in hooked.failures) == ["docs/archive.md", "docs/odd [draft]*.md"]
    assert {f.stage for f in hooked.failures} == {"unextractable"}
    assert hooked.exclusion == 'exclude = ["docs/archive.md", "docs/odd [[]draft][*].md"]'
    assert not any("not indexed yet" in note for note in hooked.notes)
    checks = {check.name: check for check in run_checks(DoctorContext(kb))}
    assert 'exclude = ["docs/archive.md", "docs/odd [[]draft][*].md"]' in (checks["sync failures"].remedy or "")
    fixed_later = kb / "docs/archive.md"
    fixed_later.write_text("# Archive\n\nNow a readable note.\n", encoding="utf-8")
    later = fixed_later.stat().st_mtime + 5  # the failure is recorded to the second: an edit seconds later
    os.utime(fixed_later, (later, later))
    fixed = run_sync(kb, SyncOptions(index_only=True), embedder=FakeEmbedder())
    assert [f.path for f in fixed.failures] == ["docs/odd [draft]*.md"]
    assert any(note.startswith("docs/archive.md: not indexed yet") for note in fixed.notes)
