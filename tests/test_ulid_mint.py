"""The ULID mint (`pinakes.ids.new_ulid`): python-ulid reads every ID it makes as the time it was made,
IDs of one process are distinct and strictly increasing whatever the clock does, and a forked child
does not continue its parent's sequence."""

from __future__ import annotations

import os
import time
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ulid import ULID

from pinakes import ids
from pinakes.ids import is_ulid, new_ulid


@given(st.integers(min_value=0, max_value=(1 << 128) - 1))
def test_the_text_form_is_python_ulids(value: int) -> None:
    assert ids._base32(value, 13) == str(ULID.from_int(value))  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose


def test_ids_carry_the_millisecond_they_were_minted_in_and_increase_strictly() -> None:
    before = time.time_ns() // 1_000_000
    minted = [new_ulid() for _ in range(100_000)]
    after = time.time_ns() // 1_000_000
    assert all(is_ulid(value) for value in minted)
    assert len(set(minted)) == len(minted)
    assert all(earlier < later for earlier, later in pairwise(minted))
    stamps = [ULID.from_str(value).milliseconds for value in minted]
    assert before <= stamps[0] and stamps[-1] <= after
    assert stamps == sorted(stamps)
    # Within one millisecond the random part counts up by one (the spec's monotonic generator).
    same = [ULID.from_str(value) for value in minted[:2]]
    if same[0].milliseconds == same[1].milliseconds:
        assert int(same[1]) == int(same[0]) + 1


def test_a_clock_stepping_back_or_a_full_millisecond_never_reorders(monkeypatch: pytest.MonkeyPatch) -> None:
    mint = ids._MonotonicMint()  # pyright: ignore[reportPrivateUsage]  # the test reads it on purpose
    now = [1_800_000_000_000 * 1_000_000]
    monkeypatch.setattr(ids.time, "time_ns", lambda: now[0])
    first = mint()
    now[0] -= 5_000 * 1_000_000  # the clock steps back five seconds (NTP)
    second = mint()
    assert second > first and ULID.from_str(second).milliseconds == 1_800_000_000_000
    # The random part runs out within the millisecond: the next ID borrows the next millisecond.

    def urandom(size: int) -> bytes:
        return b"\xff" * size

    monkeypatch.setattr(ids.os, "urandom", urandom)
    now[0] = 1_900_000_000_000 * 1_000_000
    last_of_its_millisecond = mint()
    borrowed = mint()
    assert borrowed > last_of_its_millisecond
    assert ULID.from_str(borrowed).milliseconds == 1_900_000_000_001
    assert [is_ulid(value) for value in (first, second, last_of_its_millisecond, borrowed)] == [True] * 4


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_does_not_mint_its_parents_next_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    frozen = time.time_ns()
    monkeypatch.setattr(ids.time, "time_ns", lambda: frozen)  # one millisecond, in both processes
    new_ulid()  # the parent is inside that millisecond's sequence
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's side
        os.write(write, ",".join(new_ulid() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    parent_ids = {new_ulid() for _ in range(50)}
    with os.fdopen(read, "rb") as pipe:
        child_ids = set(pipe.read().decode().split(","))
    os.waitpid(child, 0)
    assert len(child_ids) == 50 and not parent_ids & child_ids
