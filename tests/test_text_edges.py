"""The graph stage's links from text (links/text_edges.py) resolve each link exactly as the resolver
does over every path of the KB (links/resolve.py), while reading only the documents a link could
name: the paths whose name is one the resolver would look up for some link (#45: a dict and a
`PathIndex` of all 700k paths, for 1,749 links, were +564 MB of the graph stage).

Proved two ways: on generated paths and links (case, NFC/NFD, Markdown suffixes, relative and
root paths, `..` past the root, trailing slashes, shared names in many folders), the resolution
over the paths kept is the one over all paths; and through the real sync, on a KB of such links,
every stored link's status, target and candidate count are the full resolver's."""

from __future__ import annotations

import functools
import random
import sqlite3
import unicodedata
from pathlib import Path

import pytest

from pinakes.errors import PinakesError
from pinakes.ids import parse_pnk_uri
from pinakes.kb import KBPaths
from pinakes.links import text_edges
from pinakes.links.resolve import NamesLookedUp, PathIndex, Resolution, name_key, resolve_link
from pinakes.manifest import load_manifest
from tests.fakes import HashEmbedder
from tests.kb_helpers import Doc, init_test_kb, stable_ulid, sync, write_documents

EMBEDDER = HashEmbedder()
SYNTAXES = ("wikilink", "embed", "markdown", "image", "reference")


def kept(paths: list[str], links: list[tuple[str, str, str]]) -> list[str]:
    """The paths `derive_text_edges` reads for `links` (target, syntax, source path)."""
    lookups = NamesLookedUp()
    for target, syntax, source in links:
        resolve_link(target, syntax, source, lookups)
    return [path for path in paths if _name_key(path) in lookups.names]


_name_key = functools.cache(name_key)


def generated(seed: int) -> tuple[list[str], list[tuple[str, str, str]]]:
    """Paths and links over a small vocabulary, so names collide across folders, cases, suffixes and
    normalisation forms."""
    rng = random.Random(seed)
    folders = ["", "a", "A", "a/b", "bb", "x/y/z", "Café", "cafe\u0301", "sub", "sub/deep"]
    names = ["Note", "note", "NOTE", "Café", "Cafe\u0301", "Straße", "STRASSE", "Twin", "md", "Figure 1",
             "a", "b", "index", "x.y"]
    suffixes = [".md", ".MD", ".markdown", ".mdown", ".mkd", ".txt", ".pdf", ".png", "", ".md.md"]

    def path() -> str:
        folder = rng.choice(folders)
        return f"{folder}/{rng.choice(names)}{rng.choice(suffixes)}".lstrip("/")

    paths = sorted({path() for _ in range(400)} - {""})
    prefixes = ["", "", "", "./", "../", "../../", "/", "a/", "b/", "sub/", "../sub/", "x/../", "../../../../"]
    links: list[tuple[str, str, str]] = []
    for _ in range(1500):
        target = rng.choice(prefixes) + rng.choice([*names, *folders]) + rng.choice([*suffixes, "/", " "])
        if rng.random() < 0.1:
            target = rng.choice(paths)  # a path as it is, or changed in case and form
            target = rng.choice([target, target.upper(), unicodedata.normalize("NFD", target), "/" + target])
        links.append((target, rng.choice(SYNTAXES), rng.choice(paths)))
    return paths, links


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_paths_kept_for_a_link_resolve_it_as_all_paths_do(seed: int) -> None:
    paths, links = generated(seed)
    whole = PathIndex(paths)
    statuses: set[str] = set()
    for target, syntax, source in links:
        expected = resolve_link(target, syntax, source, whole)
        part = kept(paths, [(target, syntax, source)])  # the paths kept were this the KB's only link
        assert resolve_link(target, syntax, source, PathIndex(part)) == expected, (target, syntax, source)
        assert len(part) < len(paths) / 4
        statuses.add(expected.status)
    assert statuses == {"resolved", "ambiguous", "unresolved", "attachment"}  # every outcome was compared


OTHER_KB = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"
MISSING = "01J9ZX7K3M4N5P6Q7R8S9T0VWY"
VALVE = stable_ulid("docs/Valve.md")
HUB = (
    "# Hub\n\n"
    "Shared names: [[Twin]] [[twin]] [[a/Twin]] [[b/Twin]] [[TWIN.md]] [[Twin.markdown]] [[Twin.mkd]].\n"
    "Case and form: [[CAFE\u0301]] [[café.MD]] [[Straße]] [[STRASSE]] [[docs/x/CASE]] [[readme]] [[README.md]].\n"
    "Relative: [[./Valve]] [[./valve.md]] [[../Valve]] [[../docs/Valve]] [[../../../../escape]] [[./sub/../Valve]].\n"
    "Root: [[/docs/Valve.md]] [[/docs/Valve]] [[/Valve]] [[docs/Valve]] [[docs/sub/Deep]].\n"
    "Markdown: [v](Valve.md) [d](sub/Deep.md) [u](../outside.md) [n](Notes) [t](notes.txt) ![f](fig.png).\n"
    "Suffixes: [[Notes]] [[Notes.markdown]] [[Notes.mdown]] [[Notes.md]] [[notes.txt]] [[notes]].\n"
    "Trailing: [[Valve/]] [[sub/]] [[docs/]] [[Valve ]].\n"
    "Attachments: ![[fig.png]] ![[Figure 1.pdf]] [[clip.mp4]] [[Nowhere]].\n"
    f"Addresses: pnk://self/{VALVE} pnk://self/{MISSING} pnk://{OTHER_KB}/{MISSING} pnk://self/not-an-id.\n"
)
INNER = ("# Inner\n\n[[Twin]] [up](../Valve.md) [same](Deep.md) [[Deep]] [[../Valve]] [[../../x]] "
         "[[../../../outside]] [here](./twin.md) [[sub/Twin]] [[Notes]]\n")
DOCS = [
    Doc("docs/hub.md", HUB),
    Doc("docs/Valve.md", "# Valve\n\nA valve.\n", title="Valve"),
    Doc("docs/a/Twin.md", "# Twin A\n\nOne.\n"),
    Doc("docs/a/b/Twin.md", "# Twin AB\n\nTwo.\n"),
    Doc("docs/bb/Twin.md", "# Twin BB\n\nThree.\n"),
    Doc("docs/sub/twin.md", "# twin\n\nFour.\n"),
    Doc("docs/sub/Twin.markdown", "# Twin md\n\nFive.\n"),
    Doc("docs/sub/Deep.md", "# Deep\n\nDeep.\n"),
    Doc("docs/sub/inner.md", INNER),
    Doc("docs/Café.md", "# Café\n\nCoffee.\n"),
    Doc("docs/Straße.md", "# Straße\n\nA street.\n"),
    Doc("docs/x/Case.md", "# Case\n\nUpper.\n"),
    Doc("docs/x/case.md", "# case\n\nLower.\n"),
    Doc("docs/README.MD", "# Readme\n\nRead me.\n"),
    Doc("docs/Notes.markdown", "# Notes\n\nNotes.\n"),
    Doc("docs/x/Notes.mdown", "# Notes x\n\nMore notes.\n"),
    Doc("docs/notes.txt", "Plain notes.\n"),
    *[Doc(f"docs/filler/page {n}.md", f"# Page {n}\n\nNothing links here.\n") for n in range(12)],
]


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("text-edges") / "kb"
    init_test_kb(root, EMBEDDER.identity)
    write_documents(root, DOCS)
    sync(root, EMBEDDER)
    return root


def full_resolution(conn: sqlite3.Connection, kb_id: str) -> dict[int, tuple[str, str | None, str | None, int]]:
    """Each active document's stored link resolved over a `PathIndex` of every active path, and each
    address against every active id: what the graph stage derived before it read only some paths."""
    documents = dict(conn.execute("SELECT id, path FROM documents WHERE state = 'active'").fetchall())
    by_path = {path: doc_id for doc_id, path in documents.items()}
    index = PathIndex(by_path)
    resolved: dict[int, tuple[str, str | None, str | None, int]] = {}
    for row_id, doc_id, syntax, target in conn.execute(
            "SELECT t.id, t.doc_id, t.syntax, t.target FROM text_links t "
            "JOIN documents d ON d.id = t.doc_id AND d.state = 'active'").fetchall():
        if syntax == "uri":
            try:
                dst_kb, dst_doc = parse_pnk_uri(target, self_kb_id=kb_id)
            except PinakesError:
                resolved[row_id] = ("unresolved", None, None, 0)
                continue
            known = dst_kb != kb_id or dst_doc in documents
            resolved[row_id] = ("resolved", dst_kb, dst_doc, 1) if known else ("unresolved", None, None, 0)
            continue
        found: Resolution = resolve_link(target, syntax, documents[doc_id], index)
        dst = by_path[found.path] if found.path is not None else None
        resolved[row_id] = (found.status, kb_id if dst else None, dst, found.candidates)
    return resolved


def stored(conn: sqlite3.Connection) -> dict[int, tuple[str, str | None, str | None, int]]:
    return {row_id: (status, dst_kb, dst_doc, candidates) for row_id, status, dst_kb, dst_doc, candidates in
            conn.execute("SELECT id, status, dst_kb_id, dst_doc_id, candidates FROM text_links")}


def test_every_link_the_sync_stored_is_resolved_as_over_every_path(kb: Path) -> None:
    kb_id = load_manifest(KBPaths(kb).manifest).kb.id
    with sqlite3.connect(KBPaths(kb).index_db) as conn:
        expected = full_resolution(conn, kb_id)
        found = stored(conn)
        edges = set(conn.execute("SELECT src_doc_id, dst_kb_id, dst_doc_id FROM links WHERE origin = 'text'"))
    assert found == expected
    statuses = [status for status, *_ in expected.values()]
    assert {status: statuses.count(status) > 0 for status in ("resolved", "ambiguous", "unresolved", "attachment")} \
        == dict.fromkeys(("resolved", "ambiguous", "unresolved", "attachment"), True)
    assert max(candidates for *_, candidates in expected.values()) >= 3  # a name in three folders and more
    assert {(dst_kb, dst) for _, dst_kb, dst in edges if dst_kb == OTHER_KB} == {(OTHER_KB, MISSING)}
    assert any(dst == VALVE for _, _, dst in edges)


def test_the_derivation_indexes_only_the_paths_a_link_could_name(kb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed: list[list[str]] = []

    def recording(paths: dict[str, str]) -> PathIndex:
        indexed.append(sorted(paths))
        return PathIndex(paths)

    monkeypatch.setattr(text_edges, "PathIndex", recording)
    kb_id = load_manifest(KBPaths(kb).manifest).kb.id
    with sqlite3.connect(KBPaths(kb).index_db) as conn:
        before = stored(conn)
        text_edges.derive_text_edges(conn, kb_id)
        assert stored(conn) == before
        (everything,) = conn.execute("SELECT COUNT(*) FROM documents WHERE state = 'active'").fetchone()
    (paths,) = indexed
    assert not [path for path in paths if "filler" in path or path.endswith(("hub.md", "inner.md"))]
    assert "docs/Valve.md" in paths and "docs/x/Case.md" in paths and "docs/x/case.md" in paths
    assert len(paths) < everything - 12
