"""The walk: what it selects, what it refuses to follow, and what it re-hashes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.sources.walk import walk


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    init_kb(root, name="walk")
    docs = root / "docs"
    (docs / "sub").mkdir()
    (docs / "a.md").write_text("a", encoding="utf-8")
    (docs / "sub" / "b.txt").write_text("b", encoding="utf-8")
    (docs / "sub" / "b.txt.pnk.yaml").write_text("id: x\n", encoding="utf-8")
    (docs / "gone.md.pnk.yaml").write_text("id: y\n", encoding="utf-8")
    (docs / "image.png").write_bytes(b"\x89PNG")
    return root


def test_documents_sidecars_and_orphans_are_found(kb: Path) -> None:
    result = walk(kb, load_manifest(kb / "pinakes.toml").sources, {})
    assert set(result.docs) == {"docs/a.md", "docs/sub/b.txt"}
    assert result.source_types == {"docs/a.md": "markdown", "docs/sub/b.txt": "text"}
    assert set(result.sidecars) == {"docs/sub/b.txt"}
    assert result.orphan_sidecars == ["docs/gone.md.pnk.yaml"]


def test_symlinks_are_reported_and_never_followed(kb: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret", encoding="utf-8")
    os.symlink(outside, kb / "docs" / "link-dir")
    os.symlink(outside / "secret.md", kb / "docs" / "link.md")
    result = walk(kb, load_manifest(kb / "pinakes.toml").sources, {})
    assert not any("secret" in path or "link" in path for path in result.docs)
    assert {path for path, _ in result.skipped} >= {"docs/link-dir", "docs/link.md"}


def test_excluded_directories_are_pruned(kb: Path) -> None:
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace(
        "# exclude = [\"drafts/\"]", "exclude = [\"sub/\"]"), encoding="utf-8")
    result = walk(kb, load_manifest(manifest).sources, {})
    assert set(result.docs) == {"docs/a.md"}


def test_only_changed_files_are_hashed(kb: Path) -> None:
    sources = load_manifest(kb / "pinakes.toml").sources
    first = walk(kb, sources, {})
    assert first.hashed == 4  # two documents, two sidecars
    cache = {s.path: s for s in first.cache_updates}
    second = walk(kb, sources, cache)
    assert second.hashed == 0 and second.docs == first.docs
    (kb / "docs" / "a.md").write_text("changed", encoding="utf-8")
    third = walk(kb, sources, cache)
    assert third.hashed == 1 and third.docs["docs/a.md"].content_hash != first.docs["docs/a.md"].content_hash


def test_an_in_place_edit_that_restores_the_mtime_is_hashed_again(kb: Path) -> None:
    sources = load_manifest(kb / "pinakes.toml").sources
    first = walk(kb, sources, {})
    cache = {s.path: s for s in first.cache_updates}
    target = kb / "docs" / "a.md"
    before = target.stat()
    with open(target, "r+b") as handle:  # same size, same inode
        data = handle.read()
        handle.seek(0)
        handle.write(b"Z" * len(data) if data != b"Z" * len(data) else b"Y" * len(data))
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # as rsync --inplace leaves it
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    again = walk(kb, sources, cache)
    assert again.hashed == 1
    assert again.docs["docs/a.md"].content_hash != first.docs["docs/a.md"].content_hash


def test_a_file_stamped_close_to_the_last_walk_is_hashed_again(kb: Path) -> None:
    sources = load_manifest(kb / "pinakes.toml").sources
    first = walk(kb, sources, {})
    cache = {s.path: s for s in first.cache_updates}
    newest = max(max(s.mtime_ns, s.ctime_ns) for s in first.cache_updates)
    # The last walk started just after these files were written: they may have changed within the
    # same timestamp tick as they were read, so they are racily clean and read again.
    assert walk(kb, sources, cache, racy_after=newest).hashed >= 1
    assert walk(kb, sources, cache, racy_after=newest + 1).hashed == 0


def test_the_cache_round_trips_through_the_index_and_reports_what_is_gone(kb: Path, tmp_path: Path) -> None:
    """What `save_walk_cache` writes, `load_walk_cache` reads back as the walk's own states: an
    unchanged file comes back as exactly its cached state, and a file no longer on disk is listed
    for removal."""
    from pinakes.index.schema import create_index, transaction
    from pinakes.sources.walk import load_walk_cache, save_walk_cache

    sources = load_manifest(kb / "pinakes.toml").sources
    conn = create_index(tmp_path / "index.db")
    first = walk(kb, sources, {})
    with transaction(conn):
        save_walk_cache(conn, first, started_ns=0)
    cache = load_walk_cache(conn)
    assert cache == {state.path: state for state in first.cache_updates}

    (kb / "docs" / "sub" / "b.txt").unlink()
    second = walk(kb, sources, cache)
    assert second.hashed == 0 and second.docs == {"docs/a.md": first.docs["docs/a.md"]}
    assert second.cache_removals == ["docs/sub/b.txt"]


def test_the_walk_leaves_the_cyclic_collector_as_it_found_it(kb: Path, tmp_path: Path) -> None:
    """The walk holds the collector while it builds its states; it must hand it back on every exit,
    a refused root included, and leave it off for a caller that had turned it off."""
    import gc

    from pinakes.sources.walk import SourceRootError

    sources = load_manifest(kb / "pinakes.toml").sources
    assert gc.isenabled()
    walk(kb, sources, {})
    assert gc.isenabled()
    (kb / "docs").rename(kb / "real-docs")
    os.symlink(kb / "real-docs", kb / "docs")
    with pytest.raises(SourceRootError):
        walk(kb, sources, {})
    assert gc.isenabled()
    gc.disable()
    try:
        (kb / "docs").unlink()
        (kb / "real-docs").rename(kb / "docs")
        walk(kb, sources, {})
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_settled_walk_loads_no_cache_when_the_digest_holds_and_else_walks_as_a_plain_walk(kb: Path) -> None:
    """`walk_settled`: the files' stat digest equal to the cache's, nothing racy -> the cache is never
    loaded; any difference (an edit, a file gone, one new, a racy stamp) -> the result and the cache
    are exactly those of a plain walk against that cache."""
    from pinakes.sources.walk import FileState, states_digest, walk_settled

    sources = load_manifest(kb / "pinakes.toml").sources
    first = walk(kb, sources, {})
    cache = {s.path: s for s in first.cache_updates}
    digest = states_digest(cache.values())
    loads: list[int] = []

    def load() -> dict[str, FileState]:
        loads.append(1)
        return dict(cache)

    found, loaded = walk_settled(kb, sources, digest, load)
    assert loaded is None and loads == [] and set(found.docs) == set(first.docs) and not found.cache_updates
    assert found.orphan_sidecars == first.orphan_sidecars and set(found.sidecars) == set(first.sidecars)

    found, loaded = walk_settled(kb, sources, digest, load, racy_after=0)  # every stamp is racy
    assert loaded == cache and found.hashed == 4

    (kb / "docs" / "a.md").write_text("A", encoding="utf-8")
    (kb / "docs" / "sub" / "b.txt.pnk.yaml").unlink()
    (kb / "docs" / "new.md").write_text("new", encoding="utf-8")
    plain = walk(kb, sources, dict(cache))
    found, loaded = walk_settled(kb, sources, digest, load)
    assert loaded == cache
    assert (found.docs, found.source_types, found.sidecars, found.orphan_sidecars, found.skipped,
            found.unreadable, found.hashed, found.cache_removals) == \
           (plain.docs, plain.source_types, plain.sidecars, plain.orphan_sidecars, plain.skipped,
            plain.unreadable, plain.hashed, plain.cache_removals)
    assert sorted(found.cache_updates) == sorted(plain.cache_updates)
    assert found.cache_updates and found.cache_removals == ["docs/sub/b.txt.pnk.yaml"]
