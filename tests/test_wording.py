"""Counts read as English (issue #26: "1 document, 1 chunks"): one helper, `pinakes.wording`, used
wherever a count is printed; checked here through the commands a person runs on a one-document KB."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pinakes.cli import main
from pinakes.doctor import DoctorContext, run_checks
from pinakes.init import init_kb
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from pinakes.wording import counted, noun_for
from tests.fakes import FakeEmbedder


@pytest.mark.parametrize(("count", "noun", "plural", "expected"), [
    (0, "chunk", None, "0 chunks"), (1, "chunk", None, "1 chunk"), (2, "chunk", None, "2 chunks"),
    (1, "entry", "entries", "1 entry"), (3, "entry", "entries", "3 entries"),
])
def test_counted(count: int, noun: str, plural: str | None, expected: str) -> None:
    assert counted(count, noun, plural) == expected
    assert noun_for(count, noun, plural) == expected.split(" ", 1)[1]


@pytest.fixture
def one_document(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="one")
    (root / "docs/only.md").write_text("# Only\n\nOne short note.\n", encoding="utf-8")
    assert run_sync(root, SyncOptions(), embedder=FakeEmbedder()).ok
    return root


def test_list_says_one_document_one_chunk(one_document: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-C", str(one_document), "list"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 document, 1 chunk"


def test_doctor_counts_one_of_each_in_the_singular(one_document: Path) -> None:
    details = {check.name: check.detail for check in run_checks(DoctorContext(one_document))}
    assert details["index size"].startswith("1 active document (0 soft-deleted), 1 chunk")
    assert details["model.index"].endswith(": 1 vector")
    assert details["ID collisions"] == "1 sidecar, every ID unique"
    every = " ".join(details.values())
    assert not re.search(r"\b1 (documents|chunks|vectors|sidecars|entries)\b", every), every
