"""ULIDs and pnk:// URIs: the canonical forms, `self` expansion, alias resolution, refusals."""

from __future__ import annotations

import pytest

from pinakes.errors import PinakesError, UsageError
from pinakes.ids import format_pnk_uri, is_ulid, new_ulid, parse_pnk_uri

KB = "01J9ZX7K3M4N5P6Q7R8S9T0VWX"
OTHER_KB = "01J9ZX7K3M4N5P6Q7R8S9T0VWY"
DOC = "01J9ZX7K3M4N5P6Q7R8S9T0VWZ"


def test_new_ulids_are_canonical_and_distinct() -> None:
    minted = [new_ulid() for _ in range(200)]
    assert all(is_ulid(value) for value in minted)
    assert len(set(minted)) == len(minted)


@pytest.mark.parametrize(
    "candidate",
    [
        KB.lower(),  # decodes to the same ULID, but a second spelling would be a second id
        KB[:-1],
        KB + "0",
        "01J9ZX7K3M4N5P6Q7R8S9T0VWI",  # I is not Crockford base32
        "01J9ZX7K3M4N5P6Q7R8S9T0VWU",  # nor is U
        "81J9ZX7K3M4N5P6Q7R8S9T0VWX",  # overflows 128 bits
        "",
        None,
        12345,
    ],
)
def test_is_ulid_refuses_non_canonical_forms(candidate: object) -> None:
    assert not is_ulid(candidate)


def test_format_and_parse_round_trip() -> None:
    uri = format_pnk_uri(KB, DOC)
    assert uri == f"pnk://{KB}/{DOC}"
    assert parse_pnk_uri(uri, self_kb_id=OTHER_KB) == (KB, DOC)


def test_format_refuses_an_id_that_is_not_a_ulid() -> None:
    with pytest.raises(UsageError, match="not a ULID"):
        format_pnk_uri("research", DOC)


def test_self_expands_to_the_owning_kb() -> None:
    assert parse_pnk_uri(f"pnk://self/{DOC}", self_kb_id=KB) == (KB, DOC)
    assert parse_pnk_uri(f"pnk://self/{DOC}", self_kb_id=OTHER_KB) == (OTHER_KB, DOC)


def test_an_alias_resolves_to_its_kb_ulid() -> None:
    aliases = {"research": OTHER_KB}
    assert parse_pnk_uri(f"pnk://research/{DOC}", self_kb_id=KB, aliases=aliases) == (OTHER_KB, DOC)


def test_an_alias_without_the_alias_table_is_refused_naming_the_rule() -> None:
    with pytest.raises(UsageError) as caught:
        parse_pnk_uri(f"pnk://research/{DOC}", self_kb_id=KB)
    assert "research" in caught.value.message
    assert caught.value.remedy is not None and "never stored in a URI" in caught.value.remedy


def test_an_unknown_alias_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        parse_pnk_uri(f"pnk://archive/{DOC}", self_kb_id=KB, aliases={"research": OTHER_KB, "notes": KB})
    assert caught.value.remedy is not None and "notes, research" in caught.value.remedy


def test_an_alias_mapped_to_a_non_ulid_is_refused() -> None:
    with pytest.raises(UsageError, match="not a ULID"):
        parse_pnk_uri(f"pnk://research/{DOC}", self_kb_id=KB, aliases={"research": "elsewhere"})


@pytest.mark.parametrize(
    "uri",
    [
        "docs/notes/a.md",
        "../../etc/passwd",
        "/etc/passwd",
        "file:///etc/passwd",
        f"PNK://{KB}/{DOC}",
        f"pnk://{KB}",
        f"pnk://{KB}/",
        f"pnk:///{DOC}",
        f"pnk://{KB}/{DOC}/",
        f"pnk://{KB}/../{DOC}",
        "pnk://self/..",
        "pnk://self/%2e%2e",
        f"pnk://self/{DOC.lower()}",
        f"pnk://self/{DOC}\x00",
        f"pnk://self/{DOC}?x=1",
        f"pnk://self/{DOC}#frag",
        f" pnk://self/{DOC}",
        DOC,
    ],
)
def test_anything_but_a_pnk_uri_of_two_ulids_is_refused_with_a_remedy(uri: str) -> None:
    with pytest.raises(PinakesError) as caught:
        parse_pnk_uri(uri, self_kb_id=KB, aliases={"research": OTHER_KB})
    assert caught.value.remedy
    assert repr(uri) in caught.value.message
