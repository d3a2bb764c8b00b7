"""The build key: what makes a document's stored chunks and vectors current.

A document's key folds its content hash with everything else that shapes its chunks and vectors:
the fingerprint of the extractor its source type uses (a paid one's with the model `[extraction]
model` names), the chunker's version and settings, the document context's version and what the
context reads besides the content (the sidecar's title and the file name's words:
`context_naming`), the embedding model the manifest names, and for Markdown the version of what
its front matter adds (`FRONT_MATTER_VERSION`), and for a type whose text is parsed for links the parser's
version (`TEXT_LINKS_VERSION`). The index stores the key beside the chunks it describes,
committed in the same transaction, so "up to date" means exactly "what is stored was built from
these inputs" — and a change to any input (an edit, an extractor bump, `CHUNKER_VERSION`, a model
switch, a retitle, a rename that changes the file name's words) re-processes exactly the documents
it touches.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass

import xxhash

from pinakes.chunking import CHUNKER_VERSION
from pinakes.embed.base import manifest_model_spec
from pinakes.extract import ocr_models
from pinakes.extract.front_matter import FRONT_MATTER_VERSION
from pinakes.links.text_links import TEXT_LINKS_VERSION, parses
from pinakes.manifest import Manifest
from pinakes.pipeline.context import CONTEXT_VERSION

# Which extractor reads each source type; PDFs follow `[extraction] backend` or `--extract`.
TEXT_EXTRACTOR = "text"
OCR_EXTRACTOR = "rapidocr"  # images (the [ocr] extra)


@dataclass(frozen=True)
class BuildKeys:
    """The inputs besides a document's bytes, fixed for one sync run."""

    extractor_fingerprints: dict[str, str]  # source type -> fingerprint of the extractor used
    extractor_backends: dict[str, str]  # source type -> extractor name
    chunking: str
    model: str

    def key(self, content_hash: str, source_type: str, naming: str) -> str:
        """`naming` is `context_naming(sidecar title, path)`: a retitle or a rename that changes the
        file name's words changes every chunk's context, so its chunks and vectors are rebuilt."""
        parts = [content_hash, self.extractor_fingerprints.get(source_type, "?"), self.chunking, self.model,
                 f"naming/{naming}"]
        if source_type == "markdown":  # what its front matter adds to the index (extract/front_matter.py)
            parts.append(f"front-matter/{FRONT_MATTER_VERSION}")
        if parses(source_type):  # the links its text makes (links/text_links.py)
            parts.append(f"text-links/{TEXT_LINKS_VERSION}")
        return xxhash.xxh3_64_hexdigest("|".join(parts).encode())


def build_keys(manifest: Manifest, extract_backend: str | None = None) -> BuildKeys:
    from pinakes.extract.registry import EXTRACTORS

    pdf_backend = extract_backend or manifest.extraction.backend
    backends = {"markdown": TEXT_EXTRACTOR, "text": TEXT_EXTRACTOR, "code": TEXT_EXTRACTOR,
                "pdf": pdf_backend, "image": OCR_EXTRACTOR}
    # Every other source type has one free extractor (the document formats: html, epub, docx, odt).
    backends.update({source_type: spec.name for spec in EXTRACTORS.values() if not spec.paid
                     for source_type in spec.source_types if source_type not in backends})
    fingerprints = {kind: EXTRACTORS[name].fingerprint(manifest.extraction.model) for kind, name in backends.items()
                    if name in EXTRACTORS}
    # With OCR installed a free PDF's scanned pages are read too (extract/ocr_pdf.py): installing it,
    # or an OCR change, makes every PDF due, and all but the scanned come back from the cache unread.
    ocr_fingerprint = EXTRACTORS[pdf_backend].ocr_fingerprint() if pdf_backend in EXTRACTORS else None
    if ocr_fingerprint is not None and ocr_models.ocr_installed():
        fingerprints["pdf"] = ocr_fingerprint
    chunking = manifest.chunking
    # The context each chunk is stored and embedded with (pipeline/context.py) and the room the
    # chunker leaves it: a new CONTEXT_VERSION re-embeds every document once.
    chunk_fp = json.dumps({"v": CHUNKER_VERSION, "max_tokens": chunking.max_tokens,
                           "overlap": chunking.overlap, "headings": chunking.headings,
                           "context": CONTEXT_VERSION}, sort_keys=True)
    return BuildKeys(fingerprints, backends, chunk_fp, manifest_model_spec(manifest.embedding))


def key_is_current(conn: sqlite3.Connection | None, doc_id: str, path: str, key: str) -> bool:
    """Whether the index already holds this document, at this path, built from `key`."""
    if conn is None:
        return False
    row = conn.execute(
        "SELECT build_key FROM documents WHERE id = ? AND state = 'active' AND path = ?",
        (doc_id, path),
    ).fetchone()
    return row is not None and row[0] == key
