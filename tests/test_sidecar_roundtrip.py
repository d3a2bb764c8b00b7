"""Property tests: what a person wrote in a sidecar survives Pinakes touching it (spec §2.2).

Sidecars are generated as text, the way a person writes them: comments in every position, three
quoting styles, blank lines, the YAML 1.1 trap values, nested user keys, and the owned keys in any
order among the user's own. Each file uses one consistent indentation, since the dumper applies a
single indentation setting (a documented normalisation), and flow lists are written `[a, b]`.

(a) An update that changes nothing leaves the file byte-identical and does not rewrite it.
(b) An update of owned keys changes only those: every user entry survives byte for byte, every
    comment that is not about an owned value survives, the id survives, and a re-read gives the
    new values. A second identical update is then a no-op.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinakes.sidecar import EXTRACTION_FIELDS, Link, read_sidecar, update_sidecar

KB = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"
PARTNER = "01J9ZX7K3M4N5P6Q7R8S9T0VWY"
DOC = "01J9ZX7K3M4N5P6Q7R8S9T0VWZ"
TARGET_DOCS = ["01J9ZX7K3M4N5P6Q7R8S9T0VX0", "01J9ZX7K3M4N5P6Q7R8S9T0VX1", "01J9ZX7K3M4N5P6Q7R8S9T0VX2"]

# Plain scalars a person writes, with the YAML 1.1 traps among them, each read as YAML 1.2.
USER_SCALARS = [
    "NO", "0755", "1:30", "yes", "on", "~", "null", "True", "+12", "0o17", "2024-1-5", "1.5e3",
    "'single quoted'", '"double: quoted"', "plain words here", '""', "-3", "https://example.org/a?b=c",
]  # fmt: skip
USER_KEYS = ["country", "shelf", "duration", "on", "created", "author", "notes", "score", "draft", "lang"]
TAG_WORDS = ["ml", "nlp", "NO", "yes", "on", "1:30", "'0755'", '"true"', "deep learning"]
NEW_TAGS = ["ml", "nlp", "NO", "0755", "yes", "1:30", "x: y", "#hash", "deep learning", "é"]
TITLE_TEXT = st.text(alphabet="abc XYZ:#'\"-é0123456789", min_size=1, max_size=24).filter(str.strip)
RELS = ["cites", "extends", "see-also"]


@dataclass
class Layout:
    mapping: int  # indent of a nested mapping
    offset: int  # columns before a block sequence's dash
    sequence: int  # columns before a block sequence item's content

    def dash(self, depth: int = 0) -> str:
        return " " * (depth + self.offset) + "- "

    def item(self) -> str:
        return " " * self.sequence


@dataclass
class Generated:
    text: str
    crlf: bool
    user_chunks: list[str] = field(default_factory=list[str])  # must survive verbatim
    kept_comments: list[str] = field(default_factory=list[str])  # must survive, once each


class Comments:
    """Unique comment texts: `keep` ones are the author's and must survive any update; `own` ones
    annotate an owned value and may leave with it."""

    def __init__(self, draw: st.DrawFn):
        self.draw = draw
        self.count = 0
        self.kept: list[str] = []

    def eol(self, kind: str) -> str:
        if not self.draw(st.booleans()):
            return ""
        self.count += 1
        text = f"# {kind}{self.count}"
        if kind == "keep":
            self.kept.append(text)
        return " " * self.draw(st.integers(1, 3)) + text

    def lines(self, indent: str = "") -> list[str]:
        out: list[str] = []
        for _ in range(self.draw(st.integers(0, 2))):
            if self.draw(st.booleans()):
                out.append("")
            self.count += 1
            text = f"# keep{self.count}"
            self.kept.append(text)
            out.append(indent + text)
        return out


def _user_entry(draw: st.DrawFn, key: str, layout: Layout, comments: Comments) -> list[str]:
    kind = draw(st.sampled_from(["scalar", "flow", "mapping", "sequence", "literal"]))
    if kind == "scalar":
        return [f"{key}: {draw(st.sampled_from(USER_SCALARS))}{comments.eol('keep')}"]
    if kind == "flow":
        items = draw(st.lists(st.sampled_from(USER_SCALARS[:12]), min_size=1, max_size=3))
        return [f"{key}: [{', '.join(items)}]{comments.eol('keep')}"]
    if kind == "mapping":
        names = draw(st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=1, max_size=3, unique=True))
        lines = [f"{key}:"]
        for name in names:
            lines.append(
                f"{' ' * layout.mapping}{name}: {draw(st.sampled_from(USER_SCALARS))}{comments.eol('keep')}"
            )
        return lines
    if kind == "sequence":
        values = draw(st.lists(st.sampled_from(USER_SCALARS), min_size=1, max_size=3))
        return [f"{key}:"] + [f"{layout.dash()}{value}{comments.eol('keep')}" for value in values]
    return [f"{key}: |", f"{' ' * layout.mapping}first line", f"{' ' * layout.mapping}  indented: NO"]


def _owned_entry(draw: st.DrawFn, key: str, layout: Layout, comments: Comments) -> list[str]:
    if key == "id":
        return [f"id: {DOC}{comments.eol('keep')}"]
    if key == "title":
        styled = draw(st.sampled_from(["Plain title", "'Single: quoted'", '"Double # quoted"', "NO", "|-"]))
        if styled == "|-":
            return ["title: |-", f"{' ' * layout.mapping}A block title"]
        return [f"title: {styled}{comments.eol('own')}"]
    if key == "tags":
        words = draw(st.lists(st.sampled_from(TAG_WORDS), max_size=4, unique=True))
        if not words or draw(st.booleans()):
            return [f"tags: [{', '.join(words)}]{comments.eol('keep')}"]
        lines = ["tags:"]
        for word in words:
            lines.append(f"{layout.dash()}{word}{comments.eol('own')}")
            lines.extend(comments.lines(indent=" " * layout.offset))
        return lines
    if key == "links":
        lines = ["links:"]
        for _ in range(draw(st.integers(1, 3))):
            kb = draw(st.sampled_from(["self", KB, PARTNER]))
            lines.append(
                f"{layout.dash()}target: pnk://{kb}/{draw(st.sampled_from(TARGET_DOCS))}{comments.eol('own')}"
            )
            lines.append(f"{layout.item()}rel: {draw(st.sampled_from(RELS))}{comments.eol('own')}")
            lines.extend(comments.lines(indent=" " * layout.offset))
        return lines
    assert key == "provenance"
    lines = [
        "provenance:",
        f"{' ' * layout.mapping}source: https://example.org/paper.pdf{comments.eol('keep')}",
    ]
    if draw(st.booleans()):
        lines.append(f"{' ' * layout.mapping}extraction:")
        for name in EXTRACTION_FIELDS:
            lines.append(f"{' ' * 2 * layout.mapping}{name}: old-{name}{comments.eol('own')}")
    return lines


@st.composite
def sidecars(draw: st.DrawFn) -> Generated:
    layout = draw(st.sampled_from([Layout(2, 0, 2), Layout(2, 2, 4), Layout(4, 2, 4), Layout(4, 4, 6)]))
    comments = Comments(draw)
    owned = ["id"] + [key for key in ("title", "tags", "links", "provenance") if draw(st.booleans())]
    user = draw(st.lists(st.sampled_from(USER_KEYS), max_size=5, unique=True))
    order = draw(st.permutations(owned + user))
    lines = draw(st.sampled_from([[], ["---"], ["%YAML 1.2", "---"]]))
    lines += comments.lines()
    chunks: list[str] = []
    for key in order:
        if key in owned:
            entry = _owned_entry(draw, key, layout, comments)
        else:
            entry = _user_entry(draw, key, layout, comments)
            chunks.append("\n".join(entry) + "\n")
        lines.extend(entry)
        lines.extend(comments.lines())
    return Generated("\n".join(lines) + "\n", draw(st.booleans()), chunks, comments.kept)


@st.composite
def changes(draw: st.DrawFn) -> dict[str, Any]:
    chosen: dict[str, Any] = {}
    if draw(st.booleans()):
        chosen["title"] = draw(st.none() | TITLE_TEXT)
    if draw(st.booleans()):
        chosen["tags"] = draw(st.lists(st.sampled_from(NEW_TAGS), max_size=4, unique=True))
    if draw(st.booleans()):
        links = st.builds(
            Link, st.sampled_from([KB, PARTNER]), st.sampled_from(TARGET_DOCS), st.sampled_from(RELS)
        )
        chosen["links"] = draw(st.lists(links, max_size=3))
    if draw(st.booleans()):
        fields = st.fixed_dictionaries(
            {name: st.sampled_from([f"new-{name}", "2026-07-29T03:17:00Z"]) for name in EXTRACTION_FIELDS}
        )
        chosen["provenance_extraction"] = draw(st.none() | fields)
    return chosen


FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
THOROUGH = settings(FAST, max_examples=1500)


def _write(tmp_path: Path, generated: Generated) -> Path:
    path = tmp_path / "doc.md.pnk.yaml"
    path.write_text(generated.text, encoding="utf-8", newline="\r\n" if generated.crlf else "\n")
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    return path


def _fingerprint(path: Path) -> tuple[bytes, int, int]:
    info = os.stat(path)
    return path.read_bytes(), info.st_mtime_ns, info.st_ino


def check_untouched(tmp_path: Path, generated: Generated) -> None:
    path = _write(tmp_path, generated)
    before = _fingerprint(path)
    current = read_sidecar(path, kb_id=KB)
    update_sidecar(
        path,
        kb_id=KB,
        title=current.title,
        tags=current.tags,
        links=current.links,
        # the reader holds provenance.extraction to a mapping of strings (sidecar/model.py)
        provenance_extraction=cast("dict[str, str] | None", current.extraction),
    )
    assert _fingerprint(path) == before


def check_owned_update(tmp_path: Path, generated: Generated, chosen: dict[str, Any]) -> None:
    path = _write(tmp_path, generated)
    before = read_sidecar(path, kb_id=KB)
    after = update_sidecar(path, kb_id=KB, **chosen)
    raw = path.read_bytes()
    assert raw.count(b"\r\n") == (raw.count(b"\n") if generated.crlf else 0), "line ends must be kept"
    text = raw.decode("utf-8").replace("\r\n", "\n")

    assert after == read_sidecar(path, kb_id=KB)
    assert after.id == before.id
    assert after.extra == before.extra
    assert after.title == chosen.get("title", before.title)
    assert after.tags == tuple(chosen.get("tags", before.tags))
    assert after.links == tuple(chosen.get("links", before.links))
    assert after.extraction == chosen.get("provenance_extraction", before.extraction)
    other_provenance = {k: v for k, v in before.provenance.items() if k != "extraction"}
    assert {k: v for k, v in after.provenance.items() if k != "extraction"} == other_provenance

    for chunk in generated.user_chunks:
        assert chunk in text, f"user entry not preserved verbatim:\n{chunk}"
    for comment in generated.kept_comments:
        assert text.count(comment + "\n") == 1, f"comment {comment!r} lost or duplicated"
    assert f"id: {DOC}" in text
    for marker in ("---\n", "%YAML 1.2\n---\n"):
        assert text.startswith(marker) == generated.text.startswith(marker), "document markers must be kept"

    settled = _fingerprint(path)
    update_sidecar(path, kb_id=KB, **chosen)
    assert _fingerprint(path) == settled, "a repeated update must be a no-op"


@FAST
@given(generated=sidecars())
def test_an_update_with_the_current_values_leaves_the_file_untouched(
    tmp_path: Path, generated: Generated
) -> None:
    check_untouched(tmp_path, generated)


@FAST
@given(generated=sidecars(), chosen=changes())
def test_an_update_changes_only_the_owned_keys_it_names(
    tmp_path: Path, generated: Generated, chosen: dict[str, Any]
) -> None:
    check_owned_update(tmp_path, generated, chosen)


@pytest.mark.heavy
@THOROUGH
@given(generated=sidecars())
def test_untouched_thoroughly(tmp_path: Path, generated: Generated) -> None:
    check_untouched(tmp_path, generated)


@pytest.mark.heavy
@THOROUGH
@given(generated=sidecars(), chosen=changes())
def test_owned_update_thoroughly(tmp_path: Path, generated: Generated, chosen: dict[str, Any]) -> None:
    check_owned_update(tmp_path, generated, chosen)
