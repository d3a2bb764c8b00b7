"""What a failed request to the remote embedding endpoint tells the user: what happened, and the
remedy that failure needs. A refused connection, one that never opened in time, an answer that
never finished, a connection cut mid-answer, a 400, a 413, a 429 and a missing key are different
faults with different fixes; "start the embedding server" fits only the first.

A search shows the message's first line in its keyword-fallback note, so the message says what
happened in one line; the remedy is what a sync (or `pnk status`) prints beneath it. The remedies
every endpoint shares (a key, a busy server, nothing listening, nothing answering, a cut) are the
shared transport's (pinakes/http_json.py `remedy`), worded once for this and the HTTP reranker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from pinakes.errors import EmbeddingEndpointError
from pinakes.http_json import CUT, NO_ANSWER, REFUSED, Endpoint, quoted, remedy, transient

if TYPE_CHECKING:
    from pinakes.embed.settings import RemoteEmbedding
    from pinakes.embed.untyped import OpenAIModule
    from pinakes.paid import CallFailure


def failure_error(settings: RemoteEmbedding, model: str, exc: BaseException, failure: CallFailure | None,
                  sdk: OpenAIModule, *, attempt: int, deadline: float | None, wait: float | None) -> EmbeddingEndpointError:
    """The error for a request that failed and will not be tried again. `deadline`: the search's
    (None for a sync's requests); `wait`: the wait the next attempt needed when it was the
    deadline, not the attempts, that stopped the retries."""
    what = failure.happened if failure is not None else f"failed ({type(exc).__name__})"
    tries = f" ({attempt} attempts)" if attempt > 1 else ""
    status = getattr(exc, "status_code", None)
    message = f"the embedding endpoint {settings.base_url} (model {model}) failed: the request {what}{tries}"
    if wait is not None and deadline is not None:
        message += (f"; the next attempt would wait {wait:g} s more (the server's Retry-After or the backoff), "
                    f"past the search's {settings.search_timeout_s:g} s (search_timeout_s)")
    return EmbeddingEndpointError(message, remedy=_remedy(settings, model, exc, failure, sdk, status, deadline))


def deadline_error(settings: RemoteEmbedding, model: str) -> EmbeddingEndpointError:
    """A search that spent its whole `search_timeout_s` before this request could start."""
    return EmbeddingEndpointError(
        f"the embedding endpoint {settings.base_url} (model {model}) used up the search's "
        f"{settings.search_timeout_s:g} s (search_timeout_s) before it answered",
        remedy=_slow_remedy(settings, searching=True))


def answered_error(settings: RemoteEmbedding, model: str, what: str) -> EmbeddingEndpointError:
    """The server answered, with something that cannot be indexed (not a network fault)."""
    return EmbeddingEndpointError(
        f"the embedding endpoint {settings.base_url} (model {model}) failed: {what}",
        remedy=(f"the server answered, but not with vectors of {model} that can be indexed: check its logs "
                "and the model it serves; nothing of this batch was written; run the command again"))


def _remedy(settings: RemoteEmbedding, model: str, exc: BaseException, failure: CallFailure | None,
            sdk: OpenAIModule, status: object, deadline: float | None) -> str:
    """This endpoint's own remedies first (its path, its batch size, its model's input limit, its
    deadlines); then those every endpoint shares (pinakes/http_json.py `remedy`)."""
    url = settings.base_url
    status = status if isinstance(status, int) else None
    if status == 404:
        return (f"check [embedding] base_url (it should end where /embeddings is served, often /v1) "
                f"and that the server has model {model!r}")
    if status == 413:
        return ("the server refused a request this large: lower [embedding] batch_size (texts per request), "
                "or raise the server's own request size limit; then run the command again")
    if status is not None and status not in (401, 403) and not transient(status):
        detail = _detail(exc)  # 400, 422 and the other refusals: the request itself was refused
        return (f"the server refused the request (HTTP {status}{': ' + detail if detail else ''}): check that "
                f"it serves {model!r} as an embedding model, and that its input limit is at least "
                f"[embedding] max_input_tokens = {settings.max_input_tokens}; its logs say more")
    if failure is not None and failure.unsendable:
        key = f" and that ${settings.api_key_env} holds the key alone on one line" if settings.api_key_env else ""
        return f"the request could not be written: check [embedding] base_url{key}"
    never_connected = failure is not None and failure.status is None and failure.outcome == "void"
    if isinstance(exc, sdk.APITimeoutError) and not never_connected:
        return _slow_remedy(settings, searching=deadline is not None)
    if never_connected:
        kind = NO_ANSWER if failure is not None and failure.happened.endswith("(timed out)") else REFUSED
    else:
        kind = CUT if isinstance(exc, sdk.APIConnectionError) else ""
    endpoint = Endpoint("the embedding server", "embedding", url, settings.api_key_env, "then run the command again")
    return remedy(endpoint, kind, status) or f"check the server at {url} and its logs; then run the command again"


def _slow_remedy(settings: RemoteEmbedding, *, searching: bool) -> str:
    if searching:
        return (f"the server did not answer within the search's {settings.search_timeout_s:g} s: check whether "
                "it is overloaded or still loading the model; raise [embedding] search_timeout_s if it is "
                "only slow")
    return (f"the server did not finish answering within [embedding] timeout_s = {settings.timeout_s:g} s (the "
            "whole request): check whether it is overloaded (its logs); raise timeout_s, or lower batch_size "
            "so each request is smaller; then run the command again")


def _detail(exc: BaseException) -> str:
    """The message the server gave with its refusal, shortened (it is the server's text: one line)."""
    body: object = getattr(exc, "body", None)
    detail = cast("dict[str, object]", body).get("message") if isinstance(body, dict) else body
    return quoted(detail) if isinstance(detail, str) else ""
