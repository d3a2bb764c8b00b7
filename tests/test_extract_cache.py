import json
from collections.abc import Callable
from pathlib import Path

import pytest

from pinakes.extract.cache import SCHEMA, ExtractCache
from pinakes.extract.types import ExtractedText

HASH_A = "0123456789abcdef0123456789abcdef"
HASH_B = "fedcba9876543210fedcba9876543210"
HASH_C = "00000000000000000000000000000000"


def extraction(text: str = "page one\n\npage two", backend: str = "pypdfium2", fingerprint: str = "abc123",
               pages: tuple[tuple[int, int], ...] | None = ((0, 8), (10, 18))) -> ExtractedText:
    return ExtractedText(text=text, pages=pages, backend=backend, fingerprint=fingerprint)


@pytest.fixture
def cache(tmp_path: Path) -> ExtractCache:
    return ExtractCache(tmp_path / ".pinakes" / "cache" / "extract")


def test_miss_then_hit_round_trips_everything(cache: ExtractCache) -> None:
    assert cache.get(HASH_A, "abc123") is None  # the directory does not even exist yet
    stored = extraction()
    path = cache.put(HASH_A, stored, paid=True, operation_id="op-1", call_ids=["c1", "c2"])
    assert path.name == f"{HASH_A}-abc123.json"
    hit = cache.get(HASH_A, "abc123")
    assert hit is not None
    assert hit.extracted == stored
    assert (hit.paid, hit.operation_id, hit.call_ids, hit.content_hash) == (True, "op-1", ("c1", "c2"), HASH_A)


def test_free_entries_have_null_ledger_keys(cache: ExtractCache) -> None:
    path = cache.put(HASH_A, extraction(backend="text", pages=None), paid=False)
    payload = json.loads(path.read_text(encoding="utf-8"))
    assert payload["schema"] == SCHEMA
    assert payload["operation_id"] is None and payload["call_ids"] is None and payload["paid"] is False
    hit = cache.get(HASH_A, "abc123")
    assert hit is not None and hit.extracted.pages is None


def test_a_different_fingerprint_or_hash_is_a_miss(cache: ExtractCache) -> None:
    cache.put(HASH_A, extraction(), paid=False)
    assert cache.get(HASH_A, "other") is None
    assert cache.get(HASH_B, "abc123") is None


CORRUPTIONS: list[Callable[[bytes], bytes]] = [
    lambda data: data[: len(data) // 2],  # truncated mid-write
    lambda data: b"",
    lambda data: b"\xff\xfe not utf-8",
    lambda data: data.replace(SCHEMA.encode(), b"pinakes.extract-cache/999"),  # another schema
    lambda data: json.dumps({"schema": SCHEMA}).encode(),  # missing fields
    lambda data: data.replace(b'"paid":false', b'"paid":"no"'),  # wrong type
    lambda data: data.replace(b"[0,8]", b"[8,0]"),  # impossible page span
    lambda data: b"[1, 2, 3]",
]


@pytest.mark.parametrize("corrupt", CORRUPTIONS)
def test_unreadable_entries_are_misses_never_errors(cache: ExtractCache, corrupt: Callable[[bytes], bytes]) -> None:
    path = cache.put(HASH_A, extraction(), paid=False)
    path.write_bytes(corrupt(path.read_bytes()))
    assert cache.get(HASH_A, "abc123") is None


def test_an_entry_whose_content_disagrees_with_its_name_is_a_miss(cache: ExtractCache) -> None:
    source = cache.put(HASH_A, extraction(), paid=False)
    source.rename(cache.path_for(HASH_B, "abc123"))
    assert cache.get(HASH_B, "abc123") is None


def test_put_is_atomic_and_leaves_no_temporary_files(cache: ExtractCache) -> None:
    cache.put(HASH_A, extraction(), paid=False)
    cache.put(HASH_A, extraction(text="replaced", pages=None), paid=False)
    assert sorted(p.name for p in cache.directory.iterdir()) == [f"{HASH_A}-abc123.json"]
    hit = cache.get(HASH_A, "abc123")
    assert hit is not None and hit.extracted.text == "replaced"


def test_keys_that_are_not_plain_names_are_refused(cache: ExtractCache) -> None:
    with pytest.raises(ValueError, match="content_hash"):
        cache.get("../escape", "abc123")
    with pytest.raises(ValueError, match="fingerprint"):
        cache.put(HASH_A, extraction(fingerprint="a/b"), paid=False)


def test_sweep_deletes_free_orphans_and_keeps_paid_and_unreadable_ones(cache: ExtractCache) -> None:
    cache.put(HASH_A, extraction(backend="text", pages=None), paid=False)  # active
    free_orphan = cache.put(HASH_B, extraction(backend="pypdfium2"), paid=False)
    paid_orphan = cache.put(HASH_C, extraction(backend="claude-vision"), paid=True, operation_id="op")
    unreadable = cache.path_for("1111", "abc123")
    unreadable.write_text("{truncated", encoding="utf-8")
    leftover = cache.directory / ".tmp-crashed-write"
    leftover.write_text("partial", encoding="utf-8")

    before = cache.stats({HASH_A})
    assert (before.entries, before.orphans, before.paid_orphans) == (4, 3, 1)

    result = cache.sweep({HASH_A})
    assert result.deleted == 1 and result.deleted_bytes > 0
    assert result.paid_orphans == (paid_orphan,)
    assert result.unreadable_orphans == (unreadable,)
    assert not free_orphan.exists() and not leftover.exists()
    assert paid_orphan.exists() and unreadable.exists()
    assert cache.get(HASH_A, "abc123") is not None

    after = cache.stats({HASH_A})
    assert (after.entries, after.orphans, after.paid_orphans) == (3, 2, 1)
    assert after.bytes == sum(p.stat().st_size for p in cache.directory.glob("*.json"))
    assert cache.stats().orphans is None


def test_clear_keeps_paid_entries_unless_told(cache: ExtractCache) -> None:
    cache.put(HASH_A, extraction(), paid=False)
    cache.put(HASH_B, extraction(), paid=True)
    assert cache.clear(include_paid=False) == 1
    assert cache.get(HASH_B, "abc123") is not None
    assert cache.clear(include_paid=True) == 1
    assert cache.stats().entries == 0


def test_sweep_and_stats_of_a_missing_directory_are_empty(tmp_path: Path) -> None:
    cache = ExtractCache(tmp_path / "nowhere")
    assert cache.sweep(set()).deleted == 0
    assert cache.stats(set()).entries == 0
