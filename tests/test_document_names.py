"""The one grammar for naming a document (links/addresses.py): which form a text is, and that a
narrower grammar (MCP's ULID-only doc_id) is a subset of it that never looks at the filesystem.
Each command's use of it: test_cli_list_get.py (get), test_links_authoring.py (link, unlink, links),
test_likely_moves.py (adopt), test_serve_boundary.py (the MCP refusals)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinakes.errors import ToolArgumentError
from pinakes.links.addresses import EVERY_FORM, name_form, typed_path
from pinakes.serve import boundary

ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"


@pytest.mark.parametrize(("text", "form"), [
    (ULID, "ulid"), (ULID.lower(), "ulid"), (f"  {ULID}\n", "ulid"),
    (f"pnk://self/{ULID}", "uri"), (f"pnk://partner/{ULID}", "uri"),
    (f"partner:{ULID}", "alias"), ("self:docs/a.md", "alias"),
    ("docs/a.md", "path"), ("a.md", "path"),
])
def test_each_form_is_recognised(text: str, form: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert name_form(text) == form


def test_an_existing_file_is_a_path_even_when_it_looks_like_an_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ULID).write_text("a file named like an id")
    (tmp_path / "notes:draft.md").write_text("a file with a colon")
    assert name_form(ULID) == "path" and name_form("notes:draft.md") == "path"


def test_the_mcp_grammar_is_ulids_only_and_never_touches_the_filesystem(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_filesystem(path: object) -> bool:
        raise AssertionError(f"looked at the filesystem for {path!r}")

    monkeypatch.setattr(os.path, "exists", no_filesystem)
    assert boundary.DOC_ID_FORMS == ("ulid",) and set(boundary.DOC_ID_FORMS) < set(EVERY_FORM)
    assert name_form(ULID, accept=boundary.DOC_ID_FORMS) == "ulid"
    for text in (f"pnk://self/{ULID}", f"self:{ULID}", "docs/a.md"):
        assert name_form(text, accept=boundary.DOC_ID_FORMS) is None
        with pytest.raises(ToolArgumentError):
            boundary.check_doc_id(text)
    with pytest.raises(ToolArgumentError):  # canonical case only: ids compare as strings
        boundary.check_doc_id(ULID.lower())
    assert boundary.check_doc_id(ULID) == ULID


def test_a_typed_path_is_read_from_the_working_directory_else_from_the_kb_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb, elsewhere = tmp_path / "kb", tmp_path / "elsewhere"
    (kb / "docs").mkdir(parents=True)
    (kb / "docs" / "a.md").write_text("in the KB")
    (elsewhere / "docs").mkdir(parents=True)
    (elsewhere / "docs" / "b.md").write_text("outside the KB")
    monkeypatch.chdir(kb / "docs")
    assert typed_path(kb, "a.md") == kb / "docs" / "a.md"  # from the working directory, inside the KB
    monkeypatch.chdir(elsewhere)
    assert typed_path(kb, "docs/a.md") == kb / "docs" / "a.md"  # KB-relative, given from elsewhere (-C)
    assert typed_path(kb, "docs/b.md") == elsewhere / "docs" / "b.md"  # only there: another KB's, say
    assert typed_path(kb, "docs/none.md") == kb / "docs" / "none.md"  # nowhere: the refusal names the KB's
    assert typed_path(kb, kb / "docs" / "a.md") == kb / "docs" / "a.md"
