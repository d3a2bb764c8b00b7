"""What one round hands the next (spec §4.3): re-folded to a fixed budget, never appended to.

Two of the three properties the loop takes from the published systems live here. The cursor: every
query ever asked is remembered, and a query is never asked twice (compared case- and
space-insensitively). The fold: after a round, the memory is replaced by that round's answer (if
its citations resolved) and at most `MEMORY_PASSAGES` of the passages it cited — not extended by
them — so a round's request has the same size in round 5 as in round 1, which is what makes the
run's price a constant times max_rounds. An answer whose citations resolved to nothing establishes
nothing: the memory keeps what the last grounded round found.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pinakes.deep import prompts
from pinakes.deep.grounding import MARKER
from pinakes.deep.shapes import MAX_QUERIES_PER_ROUND, MEMORY_PASSAGES

if TYPE_CHECKING:
    from pinakes.search.results import Passage


@dataclass(frozen=True)
class Carried:
    """A passage the memory carries: as it was shown, and the indexed passage it cites."""

    shown: prompts.Shown
    passage: Passage


@dataclass
class Memory:
    asked: list[str] = field(default_factory=list[str])  # the cursor: every query, in the order asked
    finding: str | None = None  # the latest grounded answer, clipped, its markers removed
    carried: list[Carried] = field(default_factory=list["Carried"])

    def new_queries(self, proposed: Sequence[object]) -> list[str]:
        """The proposed queries not asked before (nor twice in this list), clipped, at most
        MAX_QUERIES_PER_ROUND; anything that is not a non-empty string is dropped."""
        seen = {_key(query) for query in self.asked}
        fresh: list[str] = []
        for item in proposed:
            if not isinstance(item, str):
                continue
            query, _ = prompts.clip(" ".join(item.split()), prompts.QUERY_MAX_BYTES, "")
            key = _key(query)
            if not key or key in seen:
                continue
            seen.add(key)
            fresh.append(query)
            if len(fresh) == MAX_QUERIES_PER_ROUND:
                break
        return fresh

    def ask(self, queries: Sequence[str]) -> None:
        self.asked.extend(queries)

    def fold(self, answer: str, cited: Sequence[Carried]) -> None:
        """Replace what is carried with this round's grounded answer and its evidence."""
        if not cited:
            return
        plain = " ".join(MARKER.sub(" ", answer).split())
        self.finding, _ = prompts.clip(plain, prompts.FINDING_MAX_BYTES)
        self.carried = list(cited[:MEMORY_PASSAGES])


def _key(query: str) -> str:
    return " ".join(query.casefold().split())
