"""The report's paths as one buffer (pipeline/path_list.py): a list of the same paths whatever is
taken out, and taking back the latest sidecar reads a few paths, not every one the report holds (a
first sync of 700,000 documents takes one back per unextractable new file)."""

from __future__ import annotations

import pytest

from pinakes.pipeline.path_list import PathList
from pinakes.pipeline.report import WrittenSidecars

PATHS = ["docs/a.md", "docs/ß/straße.md", "docs/e\u0301.md", "docs/\U0001f600.md", "x" * 300,
         "docs/raw-\udcff.md", "docs/z.md"]  # NFD, emoji, long, a name that is not UTF-8 (surrogate-escaped)


@pytest.mark.parametrize("index", [0, 1, 3, len(PATHS) - 1, -1, -len(PATHS)])
def test_deleting_one_path_leaves_the_list_a_list_would(index: int) -> None:
    paths, expected = PathList(PATHS), list(PATHS)
    del paths[index]
    del expected[index]
    assert paths == expected and list(paths) == expected and len(paths) == len(expected)
    paths.append("docs/new.md")
    assert paths[-1] == "docs/new.md" and list(paths)[:-1] == expected


def test_deleting_past_either_end_is_an_index_error() -> None:
    paths = PathList(PATHS)
    for index in (len(PATHS), -len(PATHS) - 1):
        with pytest.raises(IndexError):
            del paths[index]
    assert paths == PATHS


def test_deleting_a_slice_leaves_the_list_a_list_would() -> None:
    paths, expected = PathList(PATHS), list(PATHS)
    del paths[1:5:2]
    del expected[1:5:2]
    assert paths == expected


def test_taking_back_the_latest_sidecar_reads_a_few_paths_not_all(monkeypatch: pytest.MonkeyPatch) -> None:
    count = 20_000
    written = WrittenSidecars()
    for n in range(count):
        written.add(f"docs/p{n:06d}.md")
    decoded: list[int] = []
    read_one = PathList._at  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose

    def counted(self: PathList, index: int) -> str:
        decoded.append(index)
        return read_one(self, index)

    monkeypatch.setattr(PathList, "_at", counted)
    written.take_back(f"docs/p{count - 3:06d}.md")  # the latest group's document, as in a sync
    monkeypatch.undo()
    assert len(decoded) < 100, f"one take_back decoded {len(decoded)} paths of {count}"
    assert len(written) == count - 1 and not written.wrote_for(f"docs/p{count - 3:06d}.md")
    assert list(written.documents)[-3:] == [f"docs/p{count - 4:06d}.md", f"docs/p{count - 2:06d}.md",
                                            f"docs/p{count - 1:06d}.md"]
