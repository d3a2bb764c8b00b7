"""`pnk doctor`'s link checks: per connected KB, found or not on this machine, scan freshness and
link coverage; dangling links in either direction."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from pinakes.doctor import DoctorContext
from pinakes.doctor.checks_links import checks
from pinakes.links import reverse
from tests.test_links_helpers import ABSENT_DOC, DEMO_ID, append_link, copy_kbs, sync


def _by_name(root: Path) -> dict[str, tuple[str, str]]:
    return {check.name: (check.status, check.detail) for check in checks(DoctorContext(root))}


def test_a_scanned_partner_reports_coverage_and_no_dangling_links(tmp_path: Path) -> None:
    demo, partner = copy_kbs(tmp_path)
    sync(partner)
    sync(demo)
    found = _by_name(demo)
    status, detail = found["links: partner"]
    assert status == "OK" and "link coverage 4/33 documents" in detail
    assert found["dangling links"][0] == "OK"


def test_a_missing_partner_a_stale_scan_and_dangling_links_are_warned(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    demo, partner = copy_kbs(tmp_path)
    append_link(demo / "docs/loans/outgoing.md.pnk.yaml", f"pnk://{DEMO_ID}/{ABSENT_DOC}", "gone")
    sync(demo)
    assert _by_name(demo)["links: partner"][0] == "OK"
    later = reverse.now() + reverse.FRESHNESS_WINDOW + timedelta(minutes=1)
    monkeypatch.setattr(reverse, "now", lambda: later)
    status, detail = _by_name(demo)["links: partner"]
    assert status == "WARN" and "older than the freshness window" in detail
    status, detail = _by_name(demo)["dangling links"]
    assert status == "WARN" and ABSENT_DOC in detail
    shutil.rmtree(partner)
    status, detail = _by_name(demo)["links: partner"]
    assert status == "WARN" and "no KB at" in detail and "on this machine" in detail


def test_links_that_could_not_be_checked_are_never_said_to_resolve(tmp_path: Path) -> None:
    """Issue #26 item 10: doctor said "every link checked resolves (not checked ...)" about links it
    had not checked. Now it counts what it checked and says apart what it could not."""
    demo, partner = copy_kbs(tmp_path)
    sync(demo)  # the partner has no index: demo's 4 links into it cannot be checked
    status, detail = _by_name(demo)["dangling links"]
    assert status == "OK" and "resolves" not in detail
    assert detail.endswith("; 4 links not checked (4 to partner): that KB or its index is not on this machine")
    checked = int(detail.split(" link")[0])
    assert checked > 0 and detail.startswith(f"{checked} links checked: all resolve")
    sync(partner)
    status, detail = _by_name(demo)["dangling links"]
    assert status == "OK" and detail == f"{checked + 4} links checked: all resolve"
