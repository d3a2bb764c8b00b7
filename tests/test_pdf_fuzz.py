"""Fuzz the isolation boundary: truncated and corrupted PDFs, each through the isolated extractor.

Every case must either extract (page spans inside the text) or fail that document with a
`SourceError` naming it and saying why; never another exception, never longer than the wall-clock
limit, and never the test process itself (a parser crash that escaped the child would end the run
here). Seeds: the PDFs the tests already write (`make_pdf`, `minimal_pdf`) and, when
../shared/corpora is present, a real R manual. The mutations come from a fixed seed, so a failure
names a case that reproduces. The default run is a handful of cases; `-m heavy` runs many more.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pinakes.errors import SourceError
from pinakes.extract import isolation
from pinakes.extract.types import ExtractedText
from tests.conftest import SHARED_DIR

pytest.importorskip("pypdfium2", reason="the PDF parser under test is the [pdf] extra (pypdfium2)")

SEED = 20260801
R_MANUAL = SHARED_DIR / "corpora" / "r-manuals-pdf" / "docs" / "R-data.pdf"
# Tight limits, so a hang is caught in seconds; real PDFs of this size parse in well under one.
ADDRESS_SPACE = 768 << 20
CPU_SECONDS = 5


def generated_seeds() -> dict[str, bytes]:
    from tests.paid_gate_harness import minimal_pdf
    from tests.test_extract_text import make_pdf

    pages = [[f"Section {page} line {line}: tide tables and harbour dredging" for line in range(12)]
             for page in range(1, 4)]
    return {
        "make_pdf": make_pdf(pages),
        "minimal_pdf": minimal_pdf("Quarterly report", info="<< /Title (Annual report) >>").encode("latin-1"),
    }


def truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(1, len(data))]


def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 32)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def zero_a_run(data: bytes, rng: random.Random) -> bytes:
    start = rng.randrange(len(data))
    length = rng.randint(1, 4096)
    return data[:start] + bytes(min(length, len(data) - start)) + data[start + length:]


def splice(data: bytes, rng: random.Random) -> bytes:
    """A slice of the file copied over another place: duplicated objects, stray `endobj`s."""
    a, b = sorted(rng.sample(range(len(data)), 2))
    at = rng.randrange(len(data))
    return data[:at] + data[a:b] + data[at + (b - a):]


MUTATIONS: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "truncate": truncate, "flip": flip_bytes, "zero": zero_a_run, "splice": splice}


def cases(seed_name: str, count: int) -> list[tuple[str, str, int]]:
    return [(seed_name, mutation, index) for index in range(count) for mutation in MUTATIONS]


@pytest.fixture(autouse=True)
def tight_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolation, "ADDRESS_SPACE_BASE", ADDRESS_SPACE)
    monkeypatch.setattr(isolation, "CPU_SECONDS_BASE", CPU_SECONDS)


def seed_bytes(name: str) -> bytes:
    if name == "R-data":
        if not R_MANUAL.is_file():
            print(f"skipping: the R manuals are not present ({R_MANUAL})")
            pytest.skip(f"the R manuals are not present beside the repository ({R_MANUAL})")
        return R_MANUAL.read_bytes()
    return generated_seeds()[name]


def check_one_case(tmp_path: Path, seed_name: str, mutation: str, index: int) -> str:
    from pinakes.extract.pdf import extract

    rng = random.Random(f"{SEED}:{seed_name}:{mutation}:{index}")
    path = tmp_path / f"{seed_name}-{mutation}-{index}.pdf"
    path.write_bytes(MUTATIONS[mutation](seed_bytes(seed_name), rng))
    limits = isolation.Limits.for_input(path.stat().st_size)
    started = time.monotonic()
    try:
        extracted = extract(path, "pdf")
    except SourceError as exc:
        assert exc.path == path and exc.message, exc
        outcome = f"failed: {exc.message}"
    else:
        assert isinstance(extracted, ExtractedText) and extracted.pages is not None
        assert all(0 <= start <= end <= len(extracted.text) for start, end in extracted.pages)
        outcome = f"extracted {len(extracted.pages)} page(s)"
    assert time.monotonic() - started < limits.wall_seconds + 5
    return outcome


@pytest.mark.parametrize(("seed_name", "mutation", "index"), cases("make_pdf", 1) + cases("R-data", 1))
def test_a_damaged_pdf_extracts_or_fails_alone(tmp_path: Path, seed_name: str, mutation: str, index: int) -> None:
    print(check_one_case(tmp_path, seed_name, mutation, index))


@pytest.mark.heavy
@pytest.mark.parametrize(("seed_name", "mutation", "index"),
                         cases("make_pdf", 25) + cases("minimal_pdf", 25) + cases("R-data", 25))
def test_many_damaged_pdfs_extract_or_fail_alone(tmp_path: Path, seed_name: str, mutation: str, index: int) -> None:
    print(check_one_case(tmp_path, seed_name, mutation, index))


def test_the_parent_survives_every_case_and_the_worker_still_works(tmp_path: Path) -> None:
    """After a run of damaged files, an intact one still extracts through the same machinery."""
    for mutation in MUTATIONS:
        check_one_case(tmp_path, "make_pdf", mutation, 99)
    from pinakes.extract.pdf import extract

    path = tmp_path / "intact.pdf"
    path.write_bytes(generated_seeds()["make_pdf"])
    assert "harbour dredging" in extract(path, "pdf").text
