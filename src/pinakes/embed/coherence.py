"""Coherence checks run before a query (spec §4.4): is the index still readable as it stands?

Model coherence: embeddings are meaningless across models, so an index built with another model
than the manifest names refuses every query and names `pnk sync --rebuild`. The cheap check
compares the manifest's [embedding] section with the index meta before any weights are loaded;
the full check compares the loaded model's identity, weights digest included.

A remote model (embed/remote_identity.py) is the manifest's model by name and the index's by its
probe vectors: `fingerprint_change` compares them with the recorded ones (within the tolerance),
adopting the index's fingerprint when they agree. A model swapped behind the same name makes the
next sync rebuild; a search meets it as `remote_model_swap`'s reason and answers with keyword
results and that note (as when the endpoint is down), never with another model's neighbours.

Extraction coherence (decision 13): each distinct recorded (extraction_backend,
extraction_fingerprint) pair is re-derived from the registry's declared constants, never by
importing a backend. A free backend that drifted refuses the query, naming the stale paths (the
text may be wrong and re-extracting is free); a paid backend that drifted only marks its passages
`stale_extraction` (the text is paid for and still right, merely older); an unknown backend name is
skipped (it can be neither computed nor compared).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

from pinakes.budget.errors import BudgetError
from pinakes.embed.base import META_KEYS, ModelIdentity, identity_meta
from pinakes.embed.remote_identity import MIN_PROBE_COSINE, PROBE_META_KEY, decode_probe, probed
from pinakes.errors import EmbeddingEndpointError, ModelMismatchError, StaleExtractionError
from pinakes.extract import registry
from pinakes.wording import counted

_FIELD_NAMES: dict[str, str] = dict(zip(META_KEYS, ("provider", "model", "revision", "weights sha256", "dim"), strict=True))
# Paths named in a refusal before it says "and N more".
MAX_NAMED_PATHS = 10


def check_model_coherence(meta: Mapping[str, str], identity: ModelIdentity) -> None:
    """Refuse when the index meta records another model than the loaded one.

    An index with no embedding identity yet (nothing embedded) has nothing to disagree with.
    """
    _compare(meta, identity_meta(identity))


def fingerprint_change(meta: Mapping[str, str], embedder: object) -> str | None:
    """Why a remote model is no longer the one the index was built with, or None: same endpoint
    and model name, but its probe vectors are not the recorded ones (a swapped model). When they
    agree, the model takes the index's fingerprint as its identity (noise never renames it)."""
    model = probed(embedder)
    recorded_fingerprint = meta.get("embedding_sha256")
    if model is None or not recorded_fingerprint:
        return None
    identity = model.identity
    recorded_as = (meta.get("embedding_provider"), meta.get("embedding_model"), meta.get("embedding_dim"))
    if recorded_as != (identity.provider, identity.model, str(identity.dim)):
        return None  # another model by name or width: the manifest check says so
    value = meta.get(PROBE_META_KEY)
    recorded = decode_probe(value, identity.dim)
    if recorded is None or value is None:  # recorded before the probe vectors were: the fingerprint alone
        if recorded_fingerprint == identity.weights_sha256:
            return None
        return (f"the embedding endpoint now answers differently for {identity.model} (its probe fingerprint "
                f"{recorded_fingerprint.removeprefix('probe:')[:12]} is now "
                f"{identity.weights_sha256.removeprefix('probe:')[:12]}): the model behind the same name was swapped")
    if model.agreed_with == value and identity.weights_sha256 == recorded_fingerprint:
        return None
    agreement = model.adopt(recorded_fingerprint, recorded, value)
    if agreement >= MIN_PROBE_COSINE:
        return None
    return (f"the embedding endpoint now answers differently for {identity.model} (its probe vectors' least "
            f"cosine with the ones the index recorded is {agreement:.2f}, below {MIN_PROBE_COSINE}): the model "
            "behind the same name was swapped")


def remote_model_swap(meta: Mapping[str, str], embedder: object) -> str | None:
    """For a search: why a remote model's vectors cannot be searched against this index now (the
    model behind the name was swapped, or asking the endpoint for its probe failed), or None. The
    search then answers with keyword results and this note; `pnk sync` rebuilds for a swap.

    Starts the search's deadline and asks for the probe when it is due (embed/provider_openai.py
    `RECHECK_INTERVAL_S`, and after a failed request). An index whose recording this process has
    not yet found different is worth one fresh probe before it is called swapped: a long-running
    server may hold the probe of the model the index was built with before a rebuild."""
    model = probed(embedder)
    if model is None:
        return None
    try:
        asked = model.begin_search()
        change = fingerprint_change(meta, model)
        value = meta.get(PROBE_META_KEY)
        if change and not asked and model.disagreed_with != value:
            model.reprobe()
            change = fingerprint_change(meta, model)
    except (EmbeddingEndpointError, BudgetError) as exc:
        return exc.message.splitlines()[0]
    model.disagreed_with = value if change else None
    return f"{change}; `pnk sync` rebuilds the index with it" if change else None


def check_manifest_coherence(meta: Mapping[str, str], section: object) -> None:
    """The cheap check, before loading weights: provider, model and dim from the manifest's
    [embedding] section, and revision when the manifest pins one."""
    expected = {
        "embedding_provider": str(getattr(section, "provider")),  # noqa: B009 (duck-typed section)
        "embedding_model": str(getattr(section, "model")),  # noqa: B009
        "embedding_dim": str(getattr(section, "dim")),  # noqa: B009
    }
    revision = getattr(section, "revision", None)
    if revision:
        expected["embedding_revision"] = str(revision)
    _compare(meta, expected)


def _compare(meta: Mapping[str, str], expected: Mapping[str, str]) -> None:
    if not any(key in meta for key in META_KEYS):
        return
    differences = [
        f"{_FIELD_NAMES[key]}: index built with {meta.get(key, '(none)')}, manifest names {value}"
        for key, value in expected.items()
        if meta.get(key) != value
    ]
    if differences:
        raise ModelMismatchError(
            "the index was built with another embedding model than the manifest names, and vectors "
            "from two models cannot be compared (" + "; ".join(differences) + ")",
            remedy="pnk sync --rebuild",
        )


def check_extraction_coherence(conn: sqlite3.Connection) -> dict[str, str]:
    """Check every active document's recorded extraction against the registry as it is today.

    Returns {doc_id: backend} for documents whose paid extraction is stale (mark their passages
    `stale_extraction`); raises StaleExtractionError when a free extraction is stale.
    """
    # Every document's pairs, deleted ones too: the partial index answers this alone, where a filter
    # on state read every active document's row (1.2 s cold at 700k documents). A pair only deleted
    # documents hold finds no active rows below, so the answer is the same.
    pairs = conn.execute(
        "SELECT DISTINCT extraction_backend, extraction_fingerprint FROM documents "
        "WHERE extraction_backend IS NOT NULL"
    ).fetchall()
    stale_free: list[tuple[str, str]] = []
    stale_paid: dict[str, str] = {}
    for backend, fingerprint in pairs:
        spec = registry.EXTRACTORS.get(backend)
        if spec is None or spec.is_current(fingerprint):
            continue
        rows = conn.execute(
            "SELECT id, path FROM documents WHERE state = 'active' AND extraction_backend = ? "
            "AND extraction_fingerprint IS ? ORDER BY path",
            (backend, fingerprint),
        ).fetchall()
        if spec.paid:
            stale_paid.update((doc_id, backend) for doc_id, _ in rows)
        else:
            stale_free.extend((path, backend) for _, path in rows)
    if stale_free:
        stale_free.sort()
        named = ", ".join(f"{path} ({backend})" for path, backend in stale_free[:MAX_NAMED_PATHS])
        more = len(stale_free) - MAX_NAMED_PATHS
        raise StaleExtractionError(
            f"{counted(len(stale_free), 'document')} {'was' if len(stale_free) == 1 else 'were'} extracted by "
            "an older version of a free extractor "
            f"and their indexed text may be wrong: {named}" + (f" and {more} more" if more > 0 else ""),
            remedy="pnk sync",
        )
    return stale_paid
