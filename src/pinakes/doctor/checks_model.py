"""Model checks: is the configured embedding model usable here, and does the index agree with it.

Nothing here loads a model. Which checks apply, and what they look for, is read from the registry
(embed/registry.py): each provider's, reranker's and executor's extra, the module that extra
installs, where its weights are kept, and whether its model runs here, behind an endpoint or on a
cluster. Provider packages are located with `find_spec`; the packaged offline
model's files are located and checked against their pinned sha256 (a stat per file once the
digest record knows them); a hub model is looked up in the Hugging Face cache by directory. The
token limit is read from the model's config files and tokenizer.json (the Rust tokenizer, no torch).

Lines: `model.provider` (the configured provider's extra), `model.weights` (present locally, and
where), `model.tokens` ([chunking] max_tokens against the model's input limit: more is a FAIL),
`model.rerank` (when search reranks: the reranker's extra and whether its weights are local; for
a reranker behind an HTTP endpoint, its key, its price, whether anything answers at its address (one
TCP connection, no request: nothing is spent) and the identity its first search recorded),
`model.executor` (when the sync embeds on a Ray cluster: the [ray] extra, and whether anything
answers at the cluster's address), `model.index` (the index was built with the model the manifest
names, spec §4.4) and `chunking.headings` (the share of chunks with a heading path per source
type: a markdown or text corpus at 0% is a WARN, spec §4.6).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, cast

from pinakes.doctor import Check, DoctorContext
from pinakes.doctor.index_reading import readable_index
from pinakes.embed.hub import local_copy
from pinakes.embed.loader import packaged_for
from pinakes.embed.packaged import PackagedModel, locate, package_dir, verified_files
from pinakes.embed.registry import EXECUTORS, PROVIDERS, RERANKERS, ExecutorSpec, ProviderSpec
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths
from pinakes.wording import counted

if TYPE_CHECKING:
    from pinakes.manifest import Manifest
    from pinakes.manifest.sections import EmbeddingSection, RerankSection

MANIFEST_CACHE_KEY = "manifest"  # left there by checks_manifest
RAY_PROBE_TIMEOUT_S = 2.0
RERANK_PROBE_TIMEOUT_S = 2.0


def checks(ctx: DoctorContext) -> Iterator[Check]:
    manifest = _manifest(ctx)
    if manifest is None:
        return
    embedding, chunking = manifest.embedding, manifest.chunking
    provider_ok = yield from check_provider(embedding.provider)
    provider = PROVIDERS.get(embedding.provider)
    if embedding.remote is not None:
        yield from check_remote(embedding, chunking.max_tokens)
    elif provider is not None:
        model_dir = yield from check_weights(embedding, provider, provider_ok)
        yield check_token_limit(embedding, chunking.max_tokens, model_dir)
    if manifest.retrieval.rerank and RERANKERS[manifest.rerank.provider].runs == "endpoint":
        yield check_http_rerank(manifest.rerank, ctx.kb_root)
    elif manifest.retrieval.rerank:
        yield from check_rerank(manifest.rerank)
    executor = EXECUTORS.get(embedding.executor)
    if executor is not None and executor.runs == "cluster":
        yield from check_ray(embedding, executor)
    paths = KBPaths(ctx.kb_root) if ctx.kb_root is not None else None
    if paths is not None and paths.index_db.exists():
        yield from check_index(paths, embedding, chunking.headings)


def _manifest(ctx: DoctorContext) -> Manifest | None:
    cached = ctx.cache.get(MANIFEST_CACHE_KEY)
    if cached is not None or ctx.kb_root is None:
        return cast("Manifest | None", cached)  # what checks_manifest loaded
    try:
        from pinakes.manifest import load_manifest

        return load_manifest(KBPaths(ctx.kb_root).manifest)
    except PinakesError:
        return None  # checks_manifest reports why


def check_provider(provider: str) -> Generator[Check, None, bool]:
    spec = PROVIDERS.get(provider)
    if spec is None:
        yield Check("model.provider", "FAIL", f"unknown [embedding] provider {provider!r}",
                    remedy=f"use one of: {', '.join(PROVIDERS)}")
        return False
    missing = _missing_extra(spec.requires, spec.extra)
    if missing is not None:
        yield Check("model.provider", "FAIL", f"{provider} is not installed ({spec.requires} is not importable): "
                    "this KB cannot sync or search", remedy=missing)
        return False
    yield Check("model.provider", "OK", f"{provider} installed (the [{spec.extra}] extra)" if spec.extra
                else f"{provider} needs no extra")
    return True


def _missing_extra(requires: str | None, extra: str | None) -> str | None:
    """The install command, when the module an extra installs is not importable here; else None."""
    if requires is None or package_dir(requires) is not None:
        return None
    from pinakes.distribution import pip_install

    return pip_install((extra,) if extra else ())


def check_rerank(rerank: RerankSection) -> Iterator[Check]:
    """Search reranks ([retrieval] rerank = true): is the cross-encoder's provider installed, and
    are its weights local? Without them a search downloads them, or refuses offline."""
    spec = RERANKERS[rerank.provider]
    missing = _missing_extra(spec.requires, spec.extra)
    if missing is not None:
        yield Check("model.rerank", "FAIL", f"search reranks with {rerank.provider}, which is not installed "
                    f"({spec.requires} is not importable): every search refuses", remedy=missing)
        return
    if spec.cache is None:
        yield Check("model.rerank", "OK", f"search reranks with {rerank.model} ({rerank.provider})")
        return
    found, where = local_copy(spec.cache, rerank.model, rerank.revision)
    if found is None:
        yield Check("model.rerank", "WARN", f"search reranks with {rerank.model}, which is not in {where}: "
                    "the first search downloads it, and --offline / PNK_OFFLINE searches refuse until then",
                    remedy="run one `pnk search` with network access, or set [retrieval] rerank = false")
        return
    yield Check("model.rerank", "OK", f"search reranks with {rerank.model} ({rerank.provider}), found in "
                f"{where}: {found}")


def check_http_rerank(rerank: RerankSection, kb_root: Path | None) -> Check:
    """Search reranks through an HTTP endpoint: its key's variable set, its price, something
    listening at its address, and the identity recorded. No request is sent (a request may be
    priced, and the probe's scores are the search's to take): one TCP connection, closed at once."""
    import os
    import socket
    from urllib.parse import urlsplit

    from pinakes.search.rerank_remote import IDENTITY_FILE, RecordedIdentity

    endpoint = rerank.http
    assert endpoint is not None
    where = f"search reranks with {rerank.model} at {endpoint.base_url} (api {endpoint.api})"
    if endpoint.api_key_env and not os.environ.get(endpoint.api_key_env, "").strip():
        return Check("model.rerank", "WARN", f"{where}, but ${endpoint.api_key_env} is not set here: searches "
                     "answer without rerank, with a note", remedy=f"export {endpoint.api_key_env}=<your key>")
    parts = urlsplit(endpoint.base_url)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=RERANK_PROBE_TIMEOUT_S).close()
    except OSError as exc:
        return Check("model.rerank", "WARN", f"{where}, where nothing answers ({host}:{port}: "
                     f"{exc.strerror or type(exc).__name__}): searches answer without rerank, with a note, "
                     "until it does", remedy=f"start the reranker at {endpoint.base_url}, or set [retrieval] "
                                             "rerank = false")
    if endpoint.usd_per_1k_search_units is not None:
        price = f"priced at ${endpoint.usd_per_1k_search_units} per 1,000 search units, through [budget]"
    elif endpoint.input_usd_per_mtok is not None:
        price = f"priced at ${endpoint.input_usd_per_mtok} per million input tokens, through [budget]"
    else:
        price = "unpriced (free, as the manifest asserts)"
    record = KBPaths(kb_root).state_dir / IDENTITY_FILE if kb_root is not None else None
    recorded = RecordedIdentity.read(record) if record is not None else None
    identity = (f"the identity of {rerank.model} recorded on {recorded.recorded} is checked by every "
                "search process's first rerank" if recorded is not None and recorded.identity.model == rerank.model
                else "the first search records the identity of the model that answers")
    return Check("model.rerank", "OK", f"{where}, {price}: something listens at {host}:{port}; {identity}")


def check_ray(embedding: EmbeddingSection, executor: ExecutorSpec) -> Iterator[Check]:
    """The sync embeds on a Ray cluster ([embedding] executor = "ray"): is Ray installed, and does
    anything answer at the address a sync would use? Only a HOST:PORT is probed (one TCP
    connection); nothing joins the cluster or starts one."""
    from pinakes.embed.executor_ray import START_CLUSTER, cluster_address, probed, unreachable_reason

    missing = _missing_extra(executor.requires, executor.extra)
    if missing is not None:
        yield Check("model.executor", "FAIL", f'[embedding] executor = "{executor.name}", but {executor.requires} '
                    "is not importable: every sync refuses",
                    remedy=f"{missing}, or `pnk sync --executor local` to embed here")
        return
    address = cluster_address(None, embedding.ray_address)
    source = "[embedding] ray_address" if embedding.ray_address else (
        "RAY_ADDRESS" if address != "auto" else "Ray's default")
    if not probed(address):
        yield Check("model.executor", "OK", f"syncs embed on the Ray cluster at {address} ({source}); "
                    "not probed: Ray resolves this address itself when a sync connects")
        return
    why = unreachable_reason(address, RAY_PROBE_TIMEOUT_S)
    if why is not None:
        yield Check("model.executor", "WARN", f"syncs embed on the Ray cluster at {address} ({source}), where "
                    f"nothing answers ({why}): a sync refuses until a cluster runs there",
                    remedy=f"{START_CLUSTER}; or `pnk sync --executor local` to embed here")
        return
    yield Check("model.executor", "OK", f"syncs embed on the Ray cluster at {address} ({source}): something "
                "answers there; a sync checks that every worker runs the same model")


def check_remote(embedding: EmbeddingSection, max_tokens: int) -> Iterator[Check]:
    """A remote model's weights live on its server, which doctor does not call (it spends nothing and
    needs no network): every sync and a searcher's first query check the endpoint and its model."""
    remote = embedding.remote
    assert remote is not None
    price = (f"priced at ${remote.input_usd_per_mtok} per million input tokens, through [budget]"
             if remote.input_usd_per_mtok is not None else "unpriced (free, as the manifest asserts)")
    yield Check("model.weights", "OK", f"{embedding.model} is served at {remote.base_url}, {price}; sync and "
                "search check the endpoint and the model's fingerprint when they run")
    if max_tokens > remote.max_input_tokens:
        yield Check("model.tokens", "FAIL", f"[chunking] max_tokens = {max_tokens}, but [embedding] "
                    f"max_input_tokens = {remote.max_input_tokens}: sync refuses",
                    remedy=f"set [chunking] max_tokens to {remote.max_input_tokens} or less")
    else:
        counted_by = f"the tokenizer {remote.tokenizer}" if remote.tokenizer else "UTF-8 bytes (no tokenizer named)"
        yield Check("model.tokens", "OK", f"[chunking] max_tokens = {max_tokens} fits the "
                    f"{remote.max_input_tokens}-token input, counted by {counted_by}")


def check_weights(embedding: EmbeddingSection, provider: ProviderSpec,
                  provider_ok: bool) -> Generator[Check, None, Path | None]:
    """Where the configured model's weights are; returns a directory holding its tokenizer files."""
    packaged = packaged_for(provider, embedding)
    if packaged is not None:
        return (yield from _check_packaged(packaged))
    if not provider_ok:
        return None
    if provider.cache is None:
        yield Check("model.weights", "OK", f"{embedding.model} is found by {provider.name} when it loads: "
                    "there is no model cache to look in")
        return None
    model_dir, where = local_copy(provider.cache, embedding.model, embedding.revision)
    if model_dir is None:
        yield Check("model.weights", "WARN", f"{embedding.model} is not in {where}: the first sync downloads "
                    "it, and --offline / PNK_OFFLINE runs refuse until then",
                    remedy="run `pnk sync` once with network access")
        return None
    yield Check("model.weights", "OK", f"{embedding.model} found in {where}: {model_dir}")
    return model_dir


def _check_packaged(packaged: PackagedModel) -> Generator[Check, None, Path | None]:
    try:
        files = verified_files(packaged)
    except PinakesError as exc:
        yield Check("model.weights", "FAIL", exc.message, exc.remedy)
        return None
    weights = files[packaged.weights]
    yield Check("model.weights", "OK", f"{packaged.model} is packaged ({packaged.revision}), sha256 verified: "
                f"{weights}")
    return locate(packaged, packaged.support_files[0]).parent  # the tokenizer's directory


def check_token_limit(embedding: EmbeddingSection, max_tokens: int, model_dir: Path | None) -> Check:
    if model_dir is None:
        return Check("model.tokens", "WARN", f"cannot check [chunking] max_tokens = {max_tokens} against "
                     f"{embedding.model}'s input limit until the model is present locally",
                     remedy="run `pnk sync` once (it refuses a max_tokens the model cannot embed whole)")
    from pinakes.embed.tokens import max_input_tokens_from_dir

    limit = max_input_tokens_from_dir(model_dir)
    if limit is None:
        return Check("model.tokens", "WARN", f"{embedding.model} declares no input limit in {model_dir}")
    if max_tokens > limit:
        return Check("model.tokens", "FAIL", f"[chunking] max_tokens = {max_tokens}, but {embedding.model} "
                     f"embeds at most {limit} tokens (max_seq_length minus special tokens): sync refuses",
                     remedy=f"set [chunking] max_tokens to {limit} or less")
    return Check("model.tokens", "OK", f"[chunking] max_tokens = {max_tokens} fits {embedding.model}'s "
                 f"{limit}-token input")


def check_index(paths: KBPaths, embedding: EmbeddingSection, headings_mode: str) -> Iterator[Check]:
    from pinakes.embed.coherence import check_manifest_coherence
    from pinakes.index.schema import read_meta

    with readable_index(paths.index_db) as conn:
        if conn is None:
            return
        try:
            meta = read_meta(conn)
            try:
                check_manifest_coherence(meta, embedding)
            except PinakesError as exc:
                yield Check("model.index", "FAIL", exc.message, exc.remedy)
            else:
                built = meta.get("embedding_model")
                (vectors,) = conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()
                if built:
                    yield Check("model.index", "OK", f"the index was built with {built} "
                                f"({meta.get('embedding_provider')}): {counted(vectors, 'vector')}")
                elif vectors:
                    yield Check("model.index", "WARN", f"the index holds {counted(vectors, 'vector')} but does "
                                "not record the model that made them", "pnk sync --rebuild")
                else:
                    yield Check("model.index", "OK", "the index holds no embeddings yet")
            yield heading_coverage(conn, headings_mode)
        except sqlite3.DatabaseError as exc:
            yield Check("model.index", "FAIL", f"the index cannot be read: {exc}", remedy="pnk sync --rebuild")


def heading_coverage(conn: sqlite3.Connection, headings_mode: str) -> Check:
    rows = conn.execute(
        "SELECT d.source_type, COUNT(*), SUM(c.heading_path IS NOT NULL) FROM chunks c "
        "JOIN documents d ON d.id = c.doc_id WHERE d.state = 'active' GROUP BY d.source_type "
        "ORDER BY d.source_type"
    ).fetchall()
    if not rows:
        return Check("chunking.headings", "OK", "no chunks indexed yet")
    shares = {source_type: (with_heading or 0) / total for source_type, total, with_heading in rows}
    summary = ", ".join(
        f"{source_type} {share:.0%} of {total}" for (source_type, total, _), share in zip(rows, shares.values(),
                                                                                       strict=True)
    )
    silent = [source_type for source_type in ("markdown", "text") if shares.get(source_type) == 0]
    if not silent:
        return Check("chunking.headings", "OK", f"chunks with a heading path: {summary}")
    remedies: list[str] = []
    if "markdown" in silent:
        remedies.append("markdown headings must be ATX lines (`# Title`); setext (underlined) ones are not read")
    if "text" in silent:
        remedies.append('set [chunking] headings = "numbered" if the text documents are numbered outlines'
                        if headings_mode != "numbered" else
                        "no text document formed a valid numbered outline walk (1., 1.1, 1.2, 2. ...)")
    return Check("chunking.headings", "WARN", f"no {' or '.join(silent)} chunk carries a heading path "
                 f"({summary}): citations and section structure are missing", remedy="; ".join(remedies))
