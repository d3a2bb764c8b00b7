"""The index as doctor's checks read it (`pinakes.doctor.index_reading`): an index that cannot be
opened is reported once, by the index checks, and every other check that reads the index skips
what it needed it for; a connection a check opened is closed when the check is done with it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from pinakes.doctor import DoctorContext, run_checks
from pinakes.doctor.index_reading import readable_index
from pinakes.kb import KBPaths
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, build_kb

DOCS = [Doc("docs/a.md", "# Alpha\n\nAeroplanes and wings.\n"), Doc("docs/b.md", "# Beta\n\nBoats and sails.\n")]


def set_schema_version(index: Path, version: str) -> None:
    conn = sqlite3.connect(index)
    try:
        with conn:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (version,))
    finally:
        conn.close()


@pytest.fixture
def index(tmp_path: Path) -> Path:
    return build_kb(tmp_path / "kb", DOCS, HashEmbedder())


def test_a_readable_index_is_open_inside_the_block_and_closed_after_it(index: Path) -> None:
    with readable_index(index) as conn:
        assert conn is not None
        assert conn.execute("SELECT COUNT(*) FROM documents WHERE state = 'active'").fetchone()[0] == 2
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")


@pytest.mark.parametrize("fault", ["missing", "another schema version"])
def test_an_index_that_cannot_be_opened_reads_as_none(index: Path, fault: str) -> None:
    if fault == "missing":
        index = index.with_name("absent.db")
    else:
        set_schema_version(index, "999")
    with readable_index(index) as conn:
        assert conn is None


def test_only_the_index_checks_report_an_index_that_cannot_be_opened(index: Path) -> None:
    root = index.parent.parent
    assert KBPaths(root).index_db == index
    healthy = [check for check in run_checks(DoctorContext(root)) if check.status == "FAIL"]
    assert healthy == []

    set_schema_version(index, "999")
    failed = [check for check in run_checks(DoctorContext(root)) if check.status == "FAIL"]

    assert [(check.name, check.remedy) for check in failed] == [("index schema", "pnk sync --rebuild")]
    assert "schema_version 999" in failed[0].detail
