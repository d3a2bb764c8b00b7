"""The sidecar: reading (and every refusal, located), minting, and owned-key updates."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from pinakes.errors import EXIT_DATA, SidecarError
from pinakes.sidecar import (
    MAX_SIDECAR_BYTES,
    Link,
    Sidecar,
    document_path_for,
    is_sidecar_path,
    read_sidecar,
    sidecar_path_for,
    update_sidecar,
    write_new_sidecar,
)

KB = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"
PARTNER = "01J9ZX7K3M4N5P6Q7R8S9T0VWY"
DOC = "01J9ZX7K3M4N5P6Q7R8S9T0VWZ"
OTHER_DOC = "01J9ZX7K3M4N5P6Q7R8S9T0VX0"
EXTRACTION = {
    "backend": "claude-vision",
    "fingerprint": "claude-vision/3/abc123",
    "extracted": "2026-07-29T03:17:00Z",
    "content_hash": "5f1d7a3c9e0b2468ace13579bdf02468",
}


def _write(tmp_path: Path, text: str | bytes, name: str = "doc.md") -> Path:
    path = sidecar_path_for(tmp_path / name)
    if isinstance(text, str):
        path.write_bytes(text.encode("utf-8"))
    else:
        path.write_bytes(text)
    return path


def _refusal(tmp_path: Path, text: str | bytes) -> SidecarError:
    path = _write(tmp_path, text)
    with pytest.raises(SidecarError) as caught:
        read_sidecar(path, kb_id=KB)
    error = caught.value
    assert error.path == path, "the error must name the file"
    assert error.exit_code == EXIT_DATA
    assert error.remedy, "every refusal names a remedy"
    return error


# --- paths -----------------------------------------------------------------------------------


def test_the_sidecar_sits_beside_its_document() -> None:
    assert sidecar_path_for(Path("docs/notes/a.md")) == Path("docs/notes/a.md.pnk.yaml")
    assert document_path_for(Path("docs/notes/a.md.pnk.yaml")) == Path("docs/notes/a.md")
    assert is_sidecar_path("docs/paper.pdf.pnk.yaml")
    assert not is_sidecar_path("docs/paper.pdf")
    assert not is_sidecar_path("docs/.pnk.yaml")


# --- reading -------------------------------------------------------------------------------


def test_a_full_sidecar_reads_into_owned_fields_and_extra(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"""# notes on the paper
id: {DOC}
title: Attention is all you need
tags: [transformers, attention]
links:
  - target: pnk://self/{OTHER_DOC}
    rel: cites
  - target: pnk://{PARTNER}/{DOC}
    rel: extends
provenance:
  source: https://arxiv.org/abs/1706.03762
  extraction: {json.dumps(EXTRACTION)}
created: 2024-05-01
reviewed: false
rating: 4.5
authors: [Vaswani, Shazeer]
venue: {{name: NeurIPS, year: 2017}}
""",
    )
    sidecar = read_sidecar(path, kb_id=KB)
    assert sidecar.id == DOC
    assert sidecar.title == "Attention is all you need"
    assert sidecar.tags == ("transformers", "attention")
    assert sidecar.links == (Link(KB, OTHER_DOC, "cites"), Link(PARTNER, DOC, "extends"))
    assert sidecar.provenance["source"] == "https://arxiv.org/abs/1706.03762"
    assert sidecar.extraction == EXTRACTION
    assert sidecar.extra == {
        "created": "2024-05-01",  # a YAML timestamp is kept as the text written
        "reviewed": False,
        "rating": 4.5,
        "authors": ["Vaswani", "Shazeer"],
        "venue": {"name": "NeurIPS", "year": 2017},
    }


def test_self_means_the_kb_that_reads_the_sidecar(tmp_path: Path) -> None:
    path = _write(tmp_path, f"id: {DOC}\nlinks:\n  - target: pnk://self/{OTHER_DOC}\n    rel: cites\n")
    assert read_sidecar(path, kb_id=KB).links[0].kb_id == KB
    # A partner's sidecar read during a reverse scan resolves `self` to the partner (spec §6.2).
    assert read_sidecar(path, kb_id=PARTNER).links[0].kb_id == PARTNER


def test_a_minimal_sidecar_has_empty_owned_fields(tmp_path: Path) -> None:
    sidecar = read_sidecar(_write(tmp_path, f"id: {DOC}\ntitle:\ntags:\nlinks:\nprovenance:\n"), kb_id=KB)
    assert (sidecar.title, sidecar.tags, sidecar.links, sidecar.provenance, sidecar.extra) == (
        None,
        (),
        (),
        {},
        {},
    )
    assert sidecar.extraction is None


def test_yaml_11_traps_read_as_yaml_12(tmp_path: Path) -> None:
    sidecar = read_sidecar(
        _write(tmp_path, f"id: {DOC}\ncountry: NO\nshelf: 0755\nduration: 1:30\non: yes\nnothing: ~\n"),
        kb_id=KB,
    )
    assert sidecar.extra == {"country": "NO", "shelf": 755, "duration": "1:30", "on": "yes", "nothing": None}


def test_quoted_trap_values_stay_strings_and_tags_may_be_them(tmp_path: Path) -> None:
    sidecar = read_sidecar(_write(tmp_path, f"id: {DOC}\ntags: [NO, on, '0755', \"1:30\", yes]\n"), kb_id=KB)
    assert sidecar.tags == ("NO", "on", "0755", "1:30", "yes")


@pytest.mark.parametrize(
    ("literal", "value"),
    [("0o17", 15), ("0x1F", 31), ("0b101", 5), ("-12", -12), ("+12", 12), ("1_000", 1000), ("0755", 755)],
)
def test_integer_forms_read_as_yaml_12_integers(tmp_path: Path, literal: str, value: int) -> None:
    assert read_sidecar(_write(tmp_path, f"id: {DOC}\nn: {literal}\n"), kb_id=KB).extra["n"] == value


def test_raw_hash_is_xxh3_128_of_the_bytes(tmp_path: Path) -> None:
    import xxhash

    path = _write(tmp_path, f"id: {DOC}\n")
    assert read_sidecar(path, kb_id=KB).raw_hash == xxhash.xxh3_128_hexdigest(path.read_bytes())


def test_metadata_json_is_what_the_index_stores(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        f"id: {DOC}\ntitle: T\ntags: [a]\nlinks:\n  - target: pnk://self/{OTHER_DOC}\n    rel: cites\n"
        "provenance: {source: here}\nlang: é\n",
    )
    metadata = json.loads(read_sidecar(path, kb_id=KB).metadata_json())
    assert metadata == {
        "title": "T",
        "tags": ["a"],
        "links": [{"target": f"pnk://{KB}/{OTHER_DOC}", "rel": "cites"}],
        "provenance": {"source": "here"},
        "extra": {"lang": "é"},
    }


def test_a_bom_and_crlf_line_ends_are_read(tmp_path: Path) -> None:
    path = _write(tmp_path, b"\xef\xbb\xbf" + f"id: {DOC}\r\ntitle: T\r\n".encode())
    assert read_sidecar(path, kb_id=KB).title == "T"


# --- refusals, each naming the file and the line ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        (f"id: {DOC}\ntitle: [unclosed\n", 3, 1, "flow sequence"),
        (f"id: {DOC}\ntitle: a\ntitle: b\n", 3, 1, "duplicate key 'title' (first defined on line 2)"),
        (f"id: {DOC}\nid: {OTHER_DOC}\n", 2, 1, "duplicate key 'id'"),
        (f"id: {DOC}\nprovenance:\n  a: 1\n  a: 2\n", 4, 3, "duplicate key 'a'"),
        (f"- id: {DOC}\n", 1, 1, "must be a mapping"),
        ("", 1, 1, "empty"),
        ("title: x\n", 1, 1, "no `id`"),
        ("id: 0123\n", 1, 5, "must be a ULID"),
        (f"id: {DOC.lower()}\n", 1, 5, "must be a ULID"),
        (f"id: [{DOC}]\n", 1, 5, "must be a ULID"),
        (f"id: {DOC}\ntitle: 1984\n", 2, 8, "`title` must be a string"),
        (f"id: {DOC}\ntags: foo\n", 2, 7, "`tags` must be a list"),
        (f"id: {DOC}\ntags: [a, 0755]\n", 2, 11, "the number 755"),
        (f"id: {DOC}\ntags:\n  - ok\n  - true\n", 4, 5, "the boolean true"),
        (f"id: {DOC}\ntags: [a, '']\n", 2, 11, "non-empty string"),
        (f"id: {DOC}\nlinks:\n  - rel: cites\n", 3, 5, "no `target`"),
        (f"id: {DOC}\nlinks:\n  - target: pnk://self/{OTHER_DOC}\n", 3, 5, "no `rel`"),
        (f"id: {DOC}\nlinks: [pnk://self/{OTHER_DOC}]\n", 2, 9, "must be a mapping"),
        (f"id: {DOC}\nlinks:\n  - target: ../../etc/passwd\n    rel: cites\n", 3, 13, "not a pnk:// URI"),
        (f"id: {DOC}\nlinks:\n  - target: file:///etc/passwd\n    rel: cites\n", 3, 13, "not a pnk:// URI"),
        (f"id: {DOC}\nlinks:\n  - target: pnk://self/nope\n    rel: cites\n", 3, 13, "not a ULID"),
        (f"id: {DOC}\nlinks:\n  - target: pnk://research/{OTHER_DOC}\n    rel: cites\n", 3, 13, "research"),
        (f"id: {DOC}\nlinks:\n  - target: pnk://self/{OTHER_DOC}\n    rel: ''\n", 4, 10, "`rel`"),
        (f"id: {DOC}\nlinks:\n  - target: pnk://self/{OTHER_DOC}\n    rel: c\n    why: x\n", 5, 5, "'why'"),
        (f"id: {DOC}\nprovenance: somewhere\n", 2, 13, "`provenance` must be a mapping"),
        (f"id: {DOC}\nprovenance:\n  extraction:\n    backend: x\n", 4, 5, "extraction.fingerprint"),
        (f"id: {DOC}\nblob: !!binary aGVsbG8=\n", 2, 7, "binary"),
        (f"id: {DOC}\nx: !!python/object:os.system {{}}\n", 2, 4, "python/object"),
        (f"id: {DOC}\nx: !!set {{a, b}}\n", 2, 4, "set"),
        (f"id: {DOC}\nx: !custom value\n", 2, 4, "!custom"),
        (f"id: {DOC}\nx: .inf\n", 2, 4, "not a finite number"),
        (f"id: {DOC}\nx: .NaN\n", 2, 4, "not a finite number"),
        (f"id: {DOC}\nx: -.inf\n", 2, 4, "not a finite number"),
        (f"id: {DOC}\na: &x 1\nb: *x\n", 2, 4, "anchors and aliases"),
        (f"id: {DOC}\nb: *x\n", 2, 4, "undefined alias"),
        (f"id: {DOC}\nx: &a [1, *a]\n", 2, 4, "anchors and aliases (&a)"),  # it holds its own alias
        (f"id: {DOC}\n<<: {{a: 1}}\n", 2, 1, "merge keys"),
        (f"id: {DOC}\n1: x\n", 2, 1, "keys must be strings"),
        (f"id: {DOC}\nx: {{[a]: 1}}\n", 2, 5, "keys must be strings"),
        (f"%YAML 1.1\n---\nid: {DOC}\n", 1, 1, "%YAML 1.1"),
        (f"id: {DOC}\n---\nid: {OTHER_DOC}\n", 2, 1, "single document"),
        (f"id: {DOC}\nx:\n\t- a\n", 3, 1, "'\\t'"),
        (f"id: {DOC}\nx: a\x00b\n", 2, 5, "U+0000"),
    ],
)
def test_each_refusal_names_file_line_and_column(
    tmp_path: Path, text: str, line: int, column: int, fragment: str
) -> None:
    error = _refusal(tmp_path, text)
    assert error.message.startswith(f"line {line}, column {column}: "), error.message
    assert fragment in error.message
    assert str(error.path) in error.render()


def test_invalid_utf8_is_located(tmp_path: Path) -> None:
    error = _refusal(tmp_path, f"id: {DOC}\ntitle: caf".encode() + b"\xe9\n")
    assert error.message.startswith("line 2, column 11: not valid UTF-8")


def test_an_alias_bomb_fails_fast(tmp_path: Path) -> None:
    lines = [f"id: {DOC}", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    previous = "a"
    for name in "bcdefghijklm":
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    started = time.perf_counter()
    error = _refusal(tmp_path, "\n".join(lines) + "\n")
    assert time.perf_counter() - started < 1.0
    assert "anchors and aliases" in error.message


def test_deep_nesting_is_refused_without_a_traceback(tmp_path: Path) -> None:
    error = _refusal(tmp_path, f"id: {DOC}\nx: " + "[" * 5000 + "]" * 5000 + "\n")
    assert "nested deeper" in error.message


def test_an_oversized_sidecar_is_refused_before_parsing(tmp_path: Path) -> None:
    error = _refusal(tmp_path, f"id: {DOC}\nx: '" + "a" * MAX_SIDECAR_BYTES + "'\n")
    assert "larger than" in error.message


def test_a_missing_sidecar_is_a_sidecar_error(tmp_path: Path) -> None:
    with pytest.raises(SidecarError, match="does not exist"):
        read_sidecar(tmp_path / "absent.md.pnk.yaml", kb_id=KB)


# --- minting -------------------------------------------------------------------------------


def test_a_minted_sidecar_has_canonical_order_and_reads_back(tmp_path: Path) -> None:
    doc = tmp_path / "paper.pdf"
    path = write_new_sidecar(
        doc,
        doc_id=DOC,
        title="Attention: all you need",
        tags=["NO", "0755", "ml"],
        links=[Link(KB, OTHER_DOC, "cites")],
        provenance={"source": "https://arxiv.org/abs/1706.03762"},
    )
    assert path == sidecar_path_for(doc)
    text = path.read_text()
    keys = [line.split(":")[0] for line in text.splitlines() if line and not line.startswith(" ")]
    assert keys == ["id", "title", "tags", "links", "provenance"]
    assert "self" not in text  # links are written with the KB's ULID
    sidecar = read_sidecar(path, kb_id=PARTNER)
    assert sidecar.id == DOC
    assert sidecar.title == "Attention: all you need"
    assert sidecar.tags == ("NO", "0755", "ml")
    assert sidecar.links == (Link(KB, OTHER_DOC, "cites"),)
    assert sidecar.provenance == {"source": "https://arxiv.org/abs/1706.03762"}


def test_a_skeleton_sidecar_is_just_the_id_and_empty_lists(tmp_path: Path) -> None:
    path = write_new_sidecar(tmp_path / "a.md", doc_id=DOC)
    assert path.read_text() == f"id: {DOC}\ntags: []\nlinks: []\n"


def test_minting_never_overwrites_an_existing_sidecar(tmp_path: Path) -> None:
    path = _write(tmp_path, f"id: {OTHER_DOC}\n", name="a.md")
    before = path.read_bytes()
    with pytest.raises(SidecarError) as caught:
        write_new_sidecar(tmp_path / "a.md", doc_id=DOC)
    assert OTHER_DOC in caught.value.message
    assert path.read_bytes() == before


def test_minting_over_a_broken_sidecar_names_its_parse_error(tmp_path: Path) -> None:
    path = _write(tmp_path, f"id: {OTHER_DOC}\ntitle: [oops\n", name="a.md")
    before = path.read_bytes()
    with pytest.raises(SidecarError) as caught:
        write_new_sidecar(tmp_path / "a.md", doc_id=DOC)
    assert "does not parse" in caught.value.message
    assert "line 3" in caught.value.message
    assert path.read_bytes() == before


def test_minting_refuses_a_non_ulid_id(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_new_sidecar(tmp_path / "a.md", doc_id="not-a-ulid")
    assert not sidecar_path_for(tmp_path / "a.md").exists()


# --- updating ------------------------------------------------------------------------------

HAND_WRITTEN = f"""# Sidecar for the attention paper.
id: {DOC}   # permanent: never change

# --- my own fields ---
country: NO
shelf: 0755
duration: 1:30
on: yes
draft: True
nothing: ~
score: +12
created: 2024-5-1
title: "Attention"      # quoted on purpose
tags:
    - ml        # broad
    - 'nlp'
# above links
links:
    - target: pnk://self/{OTHER_DOC}   # sibling
      rel: cites
provenance:
    source: https://arxiv.org/abs/1706.03762   # where it came from
summary: >
    A folded block
    that spans lines.
# the end
"""


def _stat(path: Path) -> tuple[int, int]:
    info = os.stat(path)
    return info.st_mtime_ns, info.st_ino


def test_an_update_that_changes_nothing_does_not_write(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = _stat(path)
    result = update_sidecar(
        path,
        kb_id=KB,
        title="Attention",
        tags=["ml", "nlp"],
        links=[Link(KB, OTHER_DOC, "cites")],  # equal to pnk://self/...: no rewrite to expand it
        provenance_extraction=None,
    )
    assert path.read_text() == HAND_WRITTEN
    assert _stat(path) == before
    assert result == read_sidecar(path, kb_id=KB)


def test_updating_tags_changes_only_the_tags(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    before = read_sidecar(path, kb_id=KB)
    after = update_sidecar(path, kb_id=KB, tags=["ml", "attention", "nlp"])
    assert after.tags == ("ml", "attention", "nlp")
    assert (after.id, after.title, after.links, after.provenance, after.extra) == (
        before.id,
        before.title,
        before.links,
        before.provenance,
        before.extra,
    )
    text = path.read_text()
    expected = HAND_WRITTEN.replace("    - ml        # broad\n", "    - ml        # broad\n    - attention\n")
    assert text == expected  # every other byte, comment, quote and spelling is as written


def test_yaml_11_traps_survive_a_rewrite_of_other_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    update_sidecar(path, kb_id=KB, title="Attention is all you need")
    text = path.read_text()
    for line in ("country: NO", "shelf: 0755", "duration: 1:30", "on: yes", "draft: True", "nothing: ~"):
        assert f"\n{line}\n" in text
    assert "score: +12\n" in text and "created: 2024-5-1\n" in text
    assert re.search(r'\ntitle: "Attention is all you need" +# quoted on purpose\n', text)


def test_extraction_is_additive_and_reversible(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    after = update_sidecar(path, kb_id=KB, provenance_extraction=EXTRACTION)
    assert after.provenance == {"source": "https://arxiv.org/abs/1706.03762", "extraction": EXTRACTION}
    assert "# where it came from" in path.read_text()

    refreshed = dict(EXTRACTION, fingerprint="claude-vision/4/def456")
    after = update_sidecar(path, kb_id=KB, provenance_extraction=refreshed)
    assert after.extraction == refreshed

    after = update_sidecar(path, kb_id=KB, provenance_extraction=None)
    assert after.provenance == {"source": "https://arxiv.org/abs/1706.03762"}
    assert path.read_text() == HAND_WRITTEN


def test_extraction_on_a_sidecar_without_provenance_adds_the_block(tmp_path: Path) -> None:
    path = _write(tmp_path, f"id: {DOC}\nauthor: me\n")
    after = update_sidecar(path, kb_id=KB, provenance_extraction=EXTRACTION)
    assert after.provenance == {"extraction": EXTRACTION}
    assert after.extra == {"author": "me"}
    update_sidecar(path, kb_id=KB, provenance_extraction=None)
    assert path.read_text() == f"id: {DOC}\nauthor: me\n"


def test_changed_links_are_written_with_the_kb_ulid(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    after = update_sidecar(
        path, kb_id=KB, links=[Link(KB, OTHER_DOC, "cites"), Link(PARTNER, DOC, "extends")]
    )
    assert after.links == (Link(KB, OTHER_DOC, "cites"), Link(PARTNER, DOC, "extends"))
    text = path.read_text()
    assert "pnk://self/" not in text
    assert f"pnk://{KB}/{OTHER_DOC}" in text and f"pnk://{PARTNER}/{DOC}" in text
    assert "# sibling" in text  # the kept entry keeps its comment


def test_removing_the_title_keeps_its_neighbours_comments(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    after = update_sidecar(path, kb_id=KB, title=None)
    assert after.title is None
    text = path.read_text()
    assert "title" not in text
    assert text.count("#") == HAND_WRITTEN.count("#") - 1  # only the title's own comment went


def test_adding_owned_keys_to_a_bare_sidecar_places_them_canonically(tmp_path: Path) -> None:
    path = _write(tmp_path, f"id: {DOC}\n# about the author\nauthor: me\n")
    update_sidecar(path, kb_id=KB, title="T", tags=["a"], links=[Link(PARTNER, OTHER_DOC, "cites")])
    text = path.read_text()
    assert text.index("title") < text.index("tags") < text.index("links") < text.index("# about the author")
    assert text.index("# about the author") < text.index("author: me")


def test_an_update_keeps_crlf_line_ends_and_a_bom(tmp_path: Path) -> None:
    original = b"\xef\xbb\xbf" + f"id: {DOC}\r\ntags: [a]  # mine\r\n".encode()
    path = _write(tmp_path, original)
    update_sidecar(path, kb_id=KB, tags=["a", "b"])
    written = path.read_bytes()
    assert written.startswith(b"\xef\xbb\xbf" + f"id: {DOC}\r\n".encode())
    assert re.fullmatch(rb"tags: \[a, b\] +# mine\r\n", written.split(b"\r\n", 1)[1])


def test_an_update_refuses_a_broken_sidecar_and_leaves_it_alone(tmp_path: Path) -> None:
    text = f"id: {DOC}\ntitle: a\ntitle: b\n"
    path = _write(tmp_path, text)
    with pytest.raises(SidecarError, match="line 3"):
        update_sidecar(path, kb_id=KB, tags=["x"])
    assert path.read_text() == text


def test_update_returns_what_a_fresh_read_returns(tmp_path: Path) -> None:
    path = _write(tmp_path, HAND_WRITTEN)
    result = update_sidecar(path, kb_id=KB, tags=["z"], title="New", provenance_extraction=EXTRACTION)
    assert isinstance(result, Sidecar)
    assert result == read_sidecar(path, kb_id=KB)


def test_removing_a_first_key_keeps_the_comment_lines_after_it(tmp_path: Path) -> None:
    path = _write(tmp_path, f"title: T  # goes with the title\n# about the id\nid: {DOC}\n")
    update_sidecar(path, kb_id=KB, title=None)
    assert path.read_text() == f"# about the id\nid: {DOC}\n"


def test_comment_lines_after_a_flow_list_survive_removing_the_next_key(tmp_path: Path) -> None:
    path = _write(tmp_path, f"id: {DOC}\ntags: []\n# before the title\ntitle: T\nauthor: me\n")
    update_sidecar(path, kb_id=KB, title=None)
    assert path.read_text() == f"id: {DOC}\ntags: []\n# before the title\nauthor: me\n"


def test_document_markers_and_a_version_directive_survive_an_update(tmp_path: Path) -> None:
    path = _write(tmp_path, f"%YAML 1.2\n---\n# the id\nid: {DOC}\n...\n")
    update_sidecar(path, kb_id=KB, tags=["a"])
    assert path.read_text() == f"%YAML 1.2\n---\n# the id\nid: {DOC}\ntags: [a]\n...\n"
