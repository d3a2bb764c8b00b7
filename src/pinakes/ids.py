"""Document and KB identity: ULIDs and the `pnk://<kb-ulid>/<doc-ulid>` URIs that join them.

A URI addresses ULIDs, never names (spec §2.2): an alias from the manifest's [[links.kb]] is
accepted as command-line input and resolved here, before anything is written, so a link never
depends on a name that only exists on one machine. `pnk://self/<doc>` is the one shorthand a
sidecar may carry; it always means the KB that owns the sidecar being read.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Mapping
from types import MappingProxyType

from pinakes.errors import UsageError

PNK_SCHEME = "pnk://"
SELF_KB = "self"
ULID_LENGTH = 26
_CANONICAL = re.compile(r"[0-7][0-9A-HJKMNP-TV-Z]{25}")

_URI_FORM = "pnk://<kb-ulid>/<doc-ulid>, or pnk://self/<doc-ulid> for a document in this KB"
_ULID_FORM = "26 characters of upper-case Crockford base32, e.g. 01J9ZX7K3M4N5P6Q7R8S9T0VWX"
_NO_ALIASES: Mapping[str, str] = MappingProxyType({})


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = tuple(high + low for high in _CROCKFORD for low in _CROCKFORD)  # 10 bits -> their two characters
_RANDOM_BITS = 80


def _base32(value: int, pairs: int) -> str:
    """`value` as 2 x `pairs` characters of Crockford base32, most significant first."""
    table = _PAIRS
    return "".join([table[(value >> shift) & 1023] for shift in range(10 * (pairs - 1), -1, -10)])


class _MonotonicMint:
    """ULIDs as the spec's monotonic generator makes them: 48 bits of Unix milliseconds, then 80 bits
    drawn from the OS at the first ID of each millisecond and incremented by one for each further ID
    of that millisecond (or of an earlier one, should the clock step back). So IDs minted by one
    process are distinct and strictly increasing, and two processes minting in the same millisecond
    start 80 random bits apart. ~1 us an ID where python-ulid's `str(ULID())` takes ~10 us: the
    first sync of a 700k-document tree mints 700k."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self._millis = -1
        self._random = 0
        self._prefix = ""  # the time and the random part's first 60 bits, as text
        self._prefix_of = -1  # which `_random >> 20` the prefix was written for

    def __call__(self) -> str:
        with self._lock:
            millis = time.time_ns() // 1_000_000
            if millis > self._millis:
                self._millis = millis
                self._random = int.from_bytes(os.urandom(_RANDOM_BITS // 8), "big")
                self._prefix_of = -1
            else:
                self._random += 1
                if self._random >> _RANDOM_BITS:  # 2^80 IDs in one millisecond: borrow the next one
                    self._millis += 1
                    self._random = int.from_bytes(os.urandom(_RANDOM_BITS // 8), "big")
                    self._prefix_of = -1
            value = self._random
            if value >> 20 != self._prefix_of:
                self._prefix_of = value >> 20
                # 50 bits of time (48 behind two zero bits), then the random part's first 60.
                self._prefix = _base32(self._millis, 5) + _base32(value >> 20, 6)
            return self._prefix + _PAIRS[value >> 10 & 1023] + _PAIRS[value & 1023]


_mint = _MonotonicMint()
# A forked child must not continue its parent's sequence (both would mint the same next IDs).
os.register_at_fork(after_in_child=_mint._reset)  # pyright: ignore[reportPrivateUsage]


def new_ulid() -> str:
    """A fresh ULID in its canonical text form (`_MonotonicMint`)."""
    return _mint()


def is_ulid(value: object) -> bool:
    """True for a ULID in canonical form: 26 upper-case Crockford base32 characters.

    Lower case decodes to the same ULID but is refused: ids are compared as strings in the index,
    so a second spelling of one id would be a second id.
    """
    # A regex rather than a python-ulid round trip: the manifest is validated on every command,
    # and this keeps the ULID library off the path of a no-op sync. The first character is at most
    # 7 because 26 base32 digits hold 130 bits and a ULID is 128.
    return isinstance(value, str) and _CANONICAL.fullmatch(value) is not None


def format_pnk_uri(kb_id: str, doc_id: str) -> str:
    """`pnk://<kb-ulid>/<doc-ulid>`; both ids must already be canonical ULIDs."""
    for what, value in (("KB id", kb_id), ("document id", doc_id)):
        if not is_ulid(value):
            raise UsageError(f"{what} {value!r} is not a ULID", remedy=f"a ULID is {_ULID_FORM}")
    return f"{PNK_SCHEME}{kb_id}/{doc_id}"


def parse_pnk_uri(uri: object, *, self_kb_id: str, aliases: Mapping[str, str] = _NO_ALIASES) -> tuple[str, str]:
    """`(kb_id, doc_id)` for a `pnk://` URI.

    `self` expands to `self_kb_id`. `aliases` (alias -> KB ULID, from [[links.kb]]) is for
    command-line input only: a sidecar is read without aliases, so an alias written into one is
    refused rather than resolved on whichever machine happens to know it.
    """
    if not isinstance(uri, str):
        raise UsageError(f"link target {uri!r} is not a string", remedy=f"write it as {_URI_FORM}")
    if not uri.startswith(PNK_SCHEME):
        raise UsageError(
            f"link target {uri!r} is not a pnk:// URI (links address documents by id, never by path)",
            remedy=f"write it as {_URI_FORM}",
        )
    parts = uri[len(PNK_SCHEME) :].split("/")
    if len(parts) != 2 or not all(parts):
        raise UsageError(
            f"link target {uri!r} must have exactly two parts, a KB and a document",
            remedy=f"write it as {_URI_FORM}",
        )
    kb_part, doc_part = parts
    kb_id = _resolve_kb(uri, kb_part, self_kb_id=self_kb_id, aliases=aliases)
    if not is_ulid(doc_part):
        raise UsageError(
            f"link target {uri!r}: document id {doc_part!r} is not a ULID",
            remedy=f"a document id is {_ULID_FORM}; `pnk links` or the document's sidecar shows it",
        )
    return kb_id, doc_part


def _resolve_kb(uri: str, kb_part: str, *, self_kb_id: str, aliases: Mapping[str, str]) -> str:
    if kb_part == SELF_KB:
        return self_kb_id
    if is_ulid(kb_part):
        return kb_part
    if kb_part in aliases:
        resolved = aliases[kb_part]
        if not is_ulid(resolved):
            raise UsageError(
                f"alias {kb_part!r} maps to {resolved!r}, which is not a ULID",
                remedy="fix the id of that [[links.kb]] entry in pinakes.toml",
            )
        return resolved
    if aliases:
        known = ", ".join(sorted(aliases))
        remedy = f"use a KB ULID, `self`, or one of the aliases in [[links.kb]]: {known}"
    else:
        remedy = (
            "use the KB's ULID (its pinakes.toml [kb] id) or `self`; "
            "aliases are resolved on the command line and never stored in a URI"
        )
    raise UsageError(f"link target {uri!r}: {kb_part!r} is neither a KB ULID nor `self`", remedy=remedy)
