"""A hostile or broken partner KB is a per-partner problem (spec §6.2, issue #24 items 3 and 4):
an unreadable partner root, an unreadable subfolder, a partner path that is a symbolic-link loop,
a malformed sidecar and a three-KB cycle each leave `sync` exiting 0 with the problem reported,
nothing written and nothing stamped; `links`, `link`, `unlink`, `link --add-kb`, `status`,
`doctor`, `serve --kb` and MCP `pinakes_links` print no traceback, and no inbound row that still
exists is lost. Real faults: root runs the commands without the capabilities that bypass file
modes (setpriv), and real symbolic-link loops."""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pinakes.links import reverse
from pinakes.serve.config import load_kb
from pinakes.serve.tools import PinakesTools
from tests.conftest import REPO_ROOT
from tests.test_links_helpers import (
    DEMO_ID,
    DEMO_OUTGOING,
    PARTNER_BORROWING,
    PARTNER_ID,
    copy_kbs,
    inbound,
    last_scan,
    scan_of,
    sync,
)
from tests.test_serve_helpers import call_tool

pytestmark = pytest.mark.heavy  # subprocesses; CI runs them

CLI = """
import sys
sys.path.insert(0, {repo!r})
from tests.fakes import FakeEmbedder, substitute_embedder
substitute_embedder(None, lambda section, offline=None, threads=None: FakeEmbedder())
from pinakes.cli import main
sys.exit(main(sys.argv[1:]))
"""
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner", "--"]


def pnk(*args: str, modes_apply: bool = False) -> subprocess.CompletedProcess[str]:
    prefix = WITHOUT_OVERRIDE if modes_apply and os.geteuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-c", CLI.format(repo=str(REPO_ROOT)), *args],
                          capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})


def no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert "Pinakes bug" not in done.stdout + done.stderr, done.stdout


@pytest.fixture
def kbs(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root ignores file modes and setpriv (util-linux) is not installed to drop that")
    demo, partner = copy_kbs(tmp_path)
    sync(partner)
    sync(demo)
    yield demo, partner
    for path in [tmp_path, *tmp_path.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)


def _every_command(demo: Path, partner: Path, *, modes_apply: bool) -> dict[str, subprocess.CompletedProcess[str]]:
    source = "docs/loans/outgoing.md"
    return {
        "sync": pnk("-C", str(demo), "sync", "--scan-links", modes_apply=modes_apply),
        "links": pnk("-C", str(demo), "links", source, "--json", modes_apply=modes_apply),
        "link": pnk("-C", str(demo), "link", source, f"partner:{PARTNER_BORROWING}", "--rel", "x",
                    modes_apply=modes_apply),
        "link-path": pnk("-C", str(demo), "link", source, "partner:docs/about.md", "--rel", "x",
                         modes_apply=modes_apply),
        "unlink": pnk("-C", str(demo), "unlink", source, "partner:docs/about.md", modes_apply=modes_apply),
        "add-kb": pnk("-C", str(demo), "link", "--add-kb", "again", str(partner), modes_apply=modes_apply),
        "status": pnk("-C", str(demo), "status", modes_apply=modes_apply),
        "doctor": pnk("-C", str(demo), "doctor", modes_apply=modes_apply),
        "serve": pnk("serve", "--kb", str(demo), "--kb", str(partner), modes_apply=modes_apply),
    }


def _assert_partner_problem(demo: Path, before: set[tuple[str, str, str, str]], stamp: str | None,
                            done: dict[str, subprocess.CompletedProcess[str]], reason: str) -> None:
    for result in done.values():
        no_traceback(result)
    assert done["sync"].returncode == 0, done["sync"].stderr
    assert "links from partner: failed" in done["sync"].stdout and reason in done["sync"].stdout
    assert done["links"].returncode == 0 and reason in done["links"].stdout
    for name in ("link", "link-path", "unlink", "add-kb", "serve"):
        assert done[name].returncode == 2 and "pnk: error:" in done[name].stderr, (name, done[name].stderr)
        assert "remedy:" in done[name].stderr
    assert done["status"].returncode == 0
    assert done["doctor"].returncode in (0, 1) and "WARN  links: partner" in done["doctor"].stdout
    assert reason in done["doctor"].stdout
    assert inbound(demo) == before  # nothing written
    assert last_scan(demo, PARTNER_ID) == stamp  # nothing stamped
    assert (demo / "pinakes.toml").read_text().count("[[links.kb]]") == 1  # --add-kb wrote nothing


def test_an_unreadable_partner_root_is_a_problem_of_that_partner_only(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    before, stamp = inbound(demo), last_scan(demo, PARTNER_ID)
    assert before  # the committed sidecars link the two KBs
    partner.chmod(0o000)
    done = _every_command(demo, partner, modes_apply=True)
    _assert_partner_problem(demo, before, stamp, done, "Permission denied")


def test_a_partner_path_that_is_a_symlink_loop_is_a_problem_of_that_partner_only(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    before, stamp = inbound(demo), last_scan(demo, PARTNER_ID)
    moved = partner.with_name("partner-real")
    partner.rename(moved)
    loop_a, loop_b = partner.with_name("loop-a"), partner.with_name("loop-b")
    loop_a.symlink_to(loop_b.name)
    loop_b.symlink_to(loop_a.name)
    partner.symlink_to(loop_a.name)
    done = _every_command(demo, partner, modes_apply=False)
    _assert_partner_problem(demo, before, stamp, done, "symbolic links")


def test_an_unreadable_partner_folder_fails_the_walk_and_a_retry_succeeds(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    with sqlite3.connect(demo / ".pinakes/index.db") as conn:  # the last scan is past its window
        conn.execute("UPDATE kb_refs SET last_scan = '2020-01-01T00:00:00+00:00'")
    before, stamp = inbound(demo), last_scan(demo, PARTNER_ID)
    (partner / "docs/loans").chmod(0o000)  # where the partner's links into the demo KB live
    done = pnk("-C", str(demo), "sync", modes_apply=True)
    no_traceback(done)
    assert done.returncode == 0 and "links from partner: failed" in done.stdout
    assert "docs/loans: directory cannot be listed (Permission denied)" in done.stdout
    assert inbound(demo) == before and last_scan(demo, PARTNER_ID) == stamp
    for command in (["links", "docs/loans/outgoing.md"], ["status"], ["doctor"]):
        no_traceback(pnk("-C", str(demo), *command, modes_apply=True))
    (partner / "docs/loans").chmod(0o755)
    again = pnk("-C", str(demo), "sync")  # not suppressed by a stamp: the failed walk left none
    assert again.returncode == 0 and "links from partner: failed" not in again.stdout, again.stdout
    assert "links from partner: unchanged" in again.stdout or "links from partner: scanned" in again.stdout
    assert inbound(demo) == before and last_scan(demo, PARTNER_ID) != stamp


def test_a_malformed_partner_sidecar_keeps_the_rows_and_a_three_kb_cycle_scans(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    third = demo.parent / "third-kb"
    shutil.copytree(demo, third, ignore=shutil.ignore_patterns(".pinakes"))
    manifest = (third / "pinakes.toml").read_text()
    (third / "pinakes.toml").write_text(manifest.replace(DEMO_ID, "01ARZ3NDEKTSV4RRFFQ69G5FAV"), encoding="utf-8")
    # demo -> partner -> third -> demo: every KB lists the next one
    assert pnk("-C", str(partner), "link", "--add-kb", "third", str(third)).returncode == 0
    assert pnk("-C", str(third), "link", "--add-kb", "demo", str(demo)).returncode == 0
    before, stamp = inbound(demo), last_scan(demo, PARTNER_ID)
    bad = partner / "docs/about.md.pnk.yaml"
    good = bad.read_text()
    bad.write_text(good + "links: [unclosed\n", encoding="utf-8")
    done = pnk("-C", str(demo), "sync", "--scan-links")
    no_traceback(done)
    assert done.returncode == 0 and "docs/about.md.pnk.yaml does not parse" in done.stdout
    assert inbound(demo) == before and last_scan(demo, PARTNER_ID) == stamp
    bad.write_text(good, encoding="utf-8")  # (the partner's own sync would fail on it, rightly)
    for kb in (third, partner, demo):
        result = pnk("-C", str(kb), "sync", "--scan-links")
        no_traceback(result)
        assert result.returncode == 0, result.stderr
    assert inbound(demo) >= before  # the cycle's scans keep every row that still exists
    for command in (["links", "docs/loans/outgoing.md", "--depth", "3"], ["doctor"]):
        no_traceback(pnk("-C", str(demo), *command))


def test_mcp_pinakes_links_marks_an_unreadable_served_partner_unreachable(kbs: tuple[Path, Path]) -> None:
    demo, partner = kbs
    tools = PinakesTools([load_kb(demo, "archive"), load_kb(partner, "museum")])
    try:
        shutil.rmtree(partner / ".pinakes")  # the served partner's index goes away under the server
        result = call_tool(tools, "pinakes_links", {"doc_id": DEMO_OUTGOING})
    finally:
        tools.close()
    found = {item["doc_id"]: item for item in result["neighbours"]}
    assert found[PARTNER_BORROWING]["reachable"] is False and found[PARTNER_BORROWING]["reason"]


def test_an_io_error_mid_walk_is_a_partner_problem(kbs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """EIO cannot be made on demand by a test; the walk's listing is made to raise it."""
    demo, partner = kbs
    before, stamp = inbound(demo), last_scan(demo, PARTNER_ID)
    real_scandir = os.scandir

    def failing(path: str) -> object:
        if str(path).startswith(str(partner)):
            raise OSError(errno.EIO, "Input/output error", path)
        return real_scandir(path)

    with monkeypatch.context() as patched:
        patched.setattr(os, "scandir", failing)
        report = sync(demo, scan_links=True)
    scan = scan_of(report, "partner")
    assert scan["status"] == reverse.FAILED and "Input/output error" in str(scan["problems"])
    assert inbound(demo) == before and last_scan(demo, PARTNER_ID) == stamp


def test_a_partner_folder_removed_mid_scan_is_a_partner_problem(kbs: tuple[Path, Path],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOENT mid-walk: the walk lists the partner's sidecars, then a folder goes before they are read."""
    from pinakes.sources import walk as walk_module

    demo, partner = kbs
    before, stamp = inbound(demo), last_scan(demo, PARTNER_ID)
    real_walk = walk_module.walk

    def walk_then_remove(root: Path, *args: Any, **kwargs: Any) -> object:  # walk's own, passed through
        found = real_walk(root, *args, **kwargs)
        if Path(root) == partner.resolve():
            shutil.rmtree(partner / "docs/loans")
        return found

    with monkeypatch.context() as patched:
        patched.setattr(walk_module, "walk", walk_then_remove)
        report = sync(demo, scan_links=True)
    scan = scan_of(report, "partner")
    assert scan["status"] == reverse.FAILED and "cannot be read" in str(scan["problems"]), scan
    assert inbound(demo) == before and last_scan(demo, PARTNER_ID) == stamp
