"""The sidecar, `<file>.pnk.yaml`: a document's permanent id and its metadata (spec §2.2).

Read as YAML 1.2 through ruamel.yaml's round-trip mode, because a file a person edits needs a
parser that can put it back: under YAML 1.1 `country: NO` would come back as `false`. Pinakes owns
five keys (id, title, tags, links, provenance) and preserves everything else as `extra`.

Reading is strict and every refusal names the line and column: a sidecar holds a permanent ULID,
so a typo must be reported where it is rather than guessed around. Writing is rare and narrow:
`write_new_sidecar` mints (never over an existing file) and `update_sidecar` reconciles only the
owned keys it is given into the document that was read, so comments, quoting, key order, blank
lines and the author's own keys survive, and an update that changes nothing writes nothing.

Decisions this package makes (docs/SIDECAR.md explains each):
- Values must be JSON-encodable (the index stores them as JSON): only str/int/float/bool/null,
  lists and string-keyed mappings. Non-finite floats and tags such as !!binary, !!set or
  !!python/... are refused. A YAML timestamp (`created: 2024-05-01`) is kept as the text written.
- Anchors and aliases are refused outright, which is what makes an alias bomb fail in linear time.
- A `%YAML` directive other than 1.2 is refused, since it would switch the file back to 1.1 rules.

The package is split so each part can be read on its own: `model` (the parsed values and where a
sidecar lives), `dialect` (how ruamel is configured), `tree` (ruamel's composed tree as this
package's own typed nodes), `nodes` and `reading` (the strict reader), `writing` (minting and
updating), `reconcile`, `comments`, `layout` and `splice` (what keeps a rewrite faithful to the
author's file: only the changed keys' lines are written back). Import from `pinakes.sidecar`, not
from the parts.
"""

from pinakes.sidecar.model import (
    EXTRACTION_FIELDS,
    LINK_FIELDS,
    MAX_NESTING,
    MAX_SIDECAR_BYTES,
    OWNED_KEYS,
    JSONValue,
    Link,
    Sidecar,
    document_path_for,
    is_sidecar_path,
    sidecar_path_for,
)
from pinakes.sidecar.reading import parse_sidecar_bytes, read_sidecar
from pinakes.sidecar.writing import update_sidecar, write_new_sidecar

__all__ = [
    "EXTRACTION_FIELDS",
    "LINK_FIELDS",
    "MAX_NESTING",
    "MAX_SIDECAR_BYTES",
    "OWNED_KEYS",
    "JSONValue",
    "Link",
    "Sidecar",
    "document_path_for",
    "is_sidecar_path",
    "parse_sidecar_bytes",
    "read_sidecar",
    "sidecar_path_for",
    "update_sidecar",
    "write_new_sidecar",
]
