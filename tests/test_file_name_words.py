"""A document's file-name words are part of its build key: reading the name without pathlib (pairing
asks it of every document on every sync that pairs) must give exactly what pathlib gives."""

from __future__ import annotations

from pathlib import PurePosixPath

from hypothesis import given
from hypothesis import strategies as st

from pinakes.pipeline import context
from pinakes.pipeline.context import file_name_words


def by_pathlib(path: str) -> str:
    """file_name_words as it read the name before (`PurePosixPath(path).name`)."""
    name = context._EXTENSION.sub("", PurePosixPath(path).name) or PurePosixPath(path).name  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    words = [word for word in context._NAME_SPLIT.split(name)  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
             if word and not (len(word) >= 6 and context.is_identifier(word))]
    if len(words) <= 1 and not any(context._WORD_RUNS.search(word) for word in words):  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
        return ""
    return " ".join(words)


PARTS = st.sampled_from(["", ".", "..", "docs", "a b", "Ünïcode", "0042", "notes.v2", "x.tar.gz", ".hidden",
                         "report_2024-01", "01J9ZX7K3M4N5P6Q7R8S9T0VWX.md", "README", "page-iv.txt"])


@given(st.lists(PARTS, min_size=1, max_size=4), st.booleans())
def test_the_file_name_words_are_pathlibs(parts: list[str], trailing_slash: bool) -> None:
    path = "/".join(parts) + ("/" if trailing_slash else "")
    assert file_name_words(path) == by_pathlib(path)


def test_walked_paths() -> None:
    for path in ("docs/guide/Getting Started.md", "a/b/0042.txt", "x/.hidden.md", "notes.v2.rst.txt"):
        assert file_name_words(path) == by_pathlib(path)
