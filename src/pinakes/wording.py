"""How a count reads in what people are shown: "1 document", "2 documents", never "1 chunks" or
"1 document(s)". The one home of plurals: English only, like every message Pinakes prints."""

from __future__ import annotations


def noun_for(count: int, noun: str, plural: str | None = None) -> str:
    """`noun` for a count of one, else its plural (`noun` + "s" unless `plural` says otherwise)."""
    return noun if count == 1 else plural or f"{noun}s"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """The count and its noun: `counted(1, "chunk")` is "1 chunk", `counted(0, "entry", "entries")`
    is "0 entries"."""
    return f"{count} {noun_for(count, noun, plural)}"
