"""The sidecar a sync mints, in its one exact form, written and read without the YAML library.

A first sync of a large tree mints a sidecar for every document and reads each back; with
ruamel.yaml that was ~1.5 ms a file each way (dump, the check parse, the read back), minutes at
100k documents before the first chunk (docs/perf/writer.md). A freshly minted sidecar is always
the same three lines, so its bytes are made here, and a file whose bytes are exactly those lines is
read here; anything else (a title, a tag, a comment, CRLF, a BOM, another spacing) goes through
the strict reader as before. Both give the same `Sidecar` (tests/test_sidecar_minted.py compares
them with ruamel's dump and parse).
"""

from __future__ import annotations

import re
from pathlib import Path

import xxhash

from pinakes.ids import is_ulid
from pinakes.sidecar.model import Sidecar

_MINTED = re.compile(rb"id: ([0-9A-HJKMNP-TV-Z]{26})\ntags: \[\]\nlinks: \[\]\n")
# Under YAML 1.2 a plain scalar of digits (with at most one exponent E) is a number, never the
# string a ULID is: such an id is left to the strict reader, which refuses it with its line.
_NUMBER_LIKE = re.compile(r"[0-9]*(?:E[0-9]*)?")


def minted_bytes(doc_id: str) -> bytes | None:
    """The bytes of a minted sidecar holding only `doc_id` (what ruamel's canonical dump writes);
    None for an id this form cannot carry."""
    data = f"id: {doc_id}\ntags: []\nlinks: []\n".encode()
    return data if is_ulid(doc_id) and not _NUMBER_LIKE.fullmatch(doc_id) else None


def parse_minted(data: bytes, path: Path) -> Sidecar | None:
    """The sidecar these bytes hold when they are exactly a minted one's; None otherwise."""
    match = _MINTED.fullmatch(data)
    if match is None:
        return None
    doc_id = match.group(1).decode()
    if _NUMBER_LIKE.fullmatch(doc_id) or not is_ulid(doc_id):
        return None
    return Sidecar(path=path, id=doc_id, title=None, tags=(), links=(), provenance={}, extra={},
                   raw_hash=xxhash.xxh3_128_hexdigest(data))
