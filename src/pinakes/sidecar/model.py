"""A parsed sidecar as plain, immutable values, and where a sidecar lives beside its document.

Everything downstream (sync, the index, search) works from these values alone: no ruamel type
crosses this boundary, so nothing can come to depend on how the author spelled the file.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pinakes.ids import format_pnk_uri
from pinakes.jsontypes import JSONValue
from pinakes.kb import SIDECAR_SUFFIX

# The keys Pinakes owns, in the order a minted sidecar writes them.
OWNED_KEYS = ("id", "title", "tags", "links", "provenance")
EXTRACTION_FIELDS = ("backend", "fingerprint", "extracted", "content_hash")
LINK_FIELDS = ("target", "rel")

# A sidecar is a few hundred bytes; the cap bounds the work a hostile or mistaken file can cause.
MAX_SIDECAR_BYTES = 1 << 20
MAX_NESTING = 64



@dataclass(frozen=True)
class Link:
    """An authored link: this document -> (kb_id, doc_id), with a relation such as `cites`."""

    kb_id: str
    doc_id: str
    rel: str

    @property
    def uri(self) -> str:
        return format_pnk_uri(self.kb_id, self.doc_id)


@dataclass(frozen=True)
class Sidecar:
    """One parsed sidecar. `provenance` and `extra` are plain JSON values; treat them as read-only."""

    path: Path
    id: str
    title: str | None
    tags: tuple[str, ...]
    links: tuple[Link, ...]
    provenance: dict[str, JSONValue]
    extra: dict[str, JSONValue]
    raw_hash: str  # xxh3-128 of the file's bytes: documents.sidecar_hash

    @property
    def extraction(self) -> dict[str, JSONValue] | None:
        """`provenance.extraction`, present only after a paid extraction (spec §2.2)."""
        # only `writing._checked_extraction` puts it there, and the reader holds it to a mapping of strings
        extraction = self.provenance.get("extraction")
        return extraction if isinstance(extraction, dict) else None

    def metadata_json(self, front_matter_tags: tuple[str, ...] = ()) -> str:
        """The JSON the index stores in documents.metadata: this sidecar's keys, and the tags the
        document's own front matter declares, kept apart so that they never flow back into a
        sidecar (readers take the union: `pinakes.lexical.filters.document_tags`)."""
        metadata: dict[str, JSONValue] = {
            "title": self.title,
            "tags": list(self.tags),
            "links": [{"target": link.uri, "rel": link.rel} for link in self.links],
            "provenance": self.provenance,
            "extra": self.extra,
        }
        if front_matter_tags:
            metadata["front_matter_tags"] = list(front_matter_tags)
        return json.dumps(
            metadata,
            ensure_ascii=False,
            allow_nan=False,
            separators=(",", ":"),
        )


def sidecar_path_for(doc_path: Path) -> Path:
    """`<file>.pnk.yaml` beside the document."""
    return doc_path.with_name(doc_path.name + SIDECAR_SUFFIX)


def is_sidecar_path(path: Path | str) -> bool:
    name = Path(path).name
    return name.endswith(SIDECAR_SUFFIX) and len(name) > len(SIDECAR_SUFFIX)


def document_path_for(sidecar_path: Path) -> Path:
    """The document a sidecar belongs to (the inverse of `sidecar_path_for`)."""
    if not is_sidecar_path(sidecar_path):
        raise ValueError(f"not a sidecar path: {sidecar_path}")
    return sidecar_path.with_name(sidecar_path.name[: -len(SIDECAR_SUFFIX)])
