from pathlib import Path

import pytest

from pinakes.extract.source_types import SOURCE_TYPES, source_type_for


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("notes.md", "markdown"),
        ("README.MD", "markdown"),
        ("guide.markdown", "markdown"),
        ("plain.txt", "text"),
        ("howto.rst", "text"),
        ("letter.text", "text"),
        ("library.rst.txt", "text"),  # the last suffix decides
        ("notes.md.txt", "text"),
        ("main.py", "code"),
        ("lib.rs", "code"),
        ("app.ts", "code"),
        ("query.SQL", "code"),
        ("analysis.r", "code"),
        ("header.hpp", "code"),
        ("manual.pdf", "pdf"),
        ("scan.PDF", "pdf"),
        ("photo.png", "image"),  # read by OCR (the [ocr] extra)
        ("photo.gif", None),
        ("notes.md.pnk.yaml", None),  # a sidecar is never a source
        ("Makefile", None),
        (".gitignore", None),
        ("archive.tar.gz", None),
    ],
)
def test_source_type_for(name: str, expected: str | None) -> None:
    assert source_type_for(Path("docs") / name) == expected


def test_every_type_is_one_the_index_accepts() -> None:
    from pinakes.extract.source_types import SUFFIX_TO_TYPE

    assert set(SUFFIX_TO_TYPE.values()) == set(SOURCE_TYPES)
    assert all(suffix.startswith(".") and suffix == suffix.lower() for suffix in SUFFIX_TO_TYPE)
