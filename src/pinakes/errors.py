"""User-facing errors.

Every error a person can cause or fix is a `PinakesError`: the CLI prints its message and remedy
and exits with its code, never a traceback. Anything else escaping to the CLI is a Pinakes bug.
The classes live here, except the few docs/architecture.md lists beside the records they carry.
"""

from __future__ import annotations

import errno
from pathlib import Path

# Exit codes (sysexits-style where one fits, so scripts can tell failures apart).
EXIT_FAILURE = 1  # the command ran and reports failures (e.g. documents that failed to sync)
EXIT_CONFIG = 2  # a manifest or argument is wrong
EXIT_DATA = 65  # a source file or sidecar is wrong
EXIT_UNAVAILABLE = 69  # something the command needs is not installed or not present
EXIT_IO = 74  # the filesystem refused
EXIT_LOCKED = 75  # another process holds the KB


class PinakesError(Exception):
    """An error meant for the user: what went wrong, where, and what to do about it."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, remedy: str | None = None, path: Path | str | None = None):
        super().__init__(message)
        self.message = message
        self.remedy = remedy
        self.path = Path(path) if path is not None else None
        # What was already done or had failed when this error stopped a command (e.g. documents a
        # sync had failed before the disk filled): printed before the error, never lost with it.
        self.details: list[str] = []

    def render(self) -> str:
        where = f"{self.path}: " if self.path is not None else ""
        text = f"{where}{self.message}"
        if self.remedy:
            text += f"\n  remedy: {self.remedy}"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "error": type(self).__name__,
            "message": self.message,
            "path": str(self.path) if self.path is not None else None,
            "remedy": self.remedy,
        }


class UsageError(PinakesError):
    """A command-line argument is wrong."""

    exit_code = EXIT_CONFIG


class KBNotFoundError(PinakesError):
    """No pinakes.toml in this directory or any parent."""

    exit_code = EXIT_CONFIG


class ManifestError(PinakesError):
    """pinakes.toml is invalid."""

    exit_code = EXIT_CONFIG


class SidecarError(PinakesError):
    """A sidecar (<file>.pnk.yaml) is invalid."""

    exit_code = EXIT_DATA


class SourceError(PinakesError):
    """A source document cannot be read or decoded."""

    exit_code = EXIT_DATA


class IsolationError(SourceError):
    """A parser run in its own process (`pinakes.extract.isolation`) crashed, hit a resource limit or
    timed out on this document. `kind` says which (`isolation.KINDS`)."""

    def __init__(self, message: str, *, kind: str, remedy: str | None = None, path: Path | str | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.kind = kind


class IndexSchemaError(PinakesError):
    """The index was written under another schema_version; there are no migrations."""

    exit_code = EXIT_DATA


class IndexMissingError(PinakesError):
    """The KB has no index yet."""

    exit_code = EXIT_UNAVAILABLE


class ModelMismatchError(PinakesError):
    """The index was built with another embedding model than the manifest names."""

    exit_code = EXIT_DATA


class StaleExtractionError(PinakesError):
    """A free extractor changed since these documents were indexed."""

    exit_code = EXIT_DATA


class PaidExtractionFailedError(PinakesError):
    """A document's paid extraction produced no text (refused, cut off, malformed, or the call
    failed); the document is not indexed and nothing of it is cached."""

    exit_code = EXIT_FAILURE


class PaidExtractionUnavailableError(PinakesError):
    """A PDF's sidecar records a paid extraction of exactly this file, but its text is on no local
    store (extraction cache, index): typically the first sync of a fresh clone. Not "changed"."""

    exit_code = EXIT_UNAVAILABLE


class ApiKeyError(PinakesError):
    """A paid entry point has no usable API key: `PINAKES_ANTHROPIC_API_KEY` is unset (the generic
    `ANTHROPIC_API_KEY` is never read) or the key file named is unreadable or empty."""

    exit_code = EXIT_CONFIG


class PaidCallError(PinakesError):
    """A paid API call failed (`pinakes.paid.paid_call`). `outcome` says whether it billed: "void"
    (the API answered with an error status, or the request never left) or "unknown" (no answer came
    back: the reservation counts until `pnk budget --resolve`). `retry_after_s` is set when the same
    request may be sent again (a busy or rate-limited API, never billed). `happened` and `billed` are
    the message's two halves, for a caller that names the request itself."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, outcome: str, call_id: str, status: int | None = None,
                 retry_after_s: float | None = None, happened: str = "", billed: str = "",
                 remedy: str | None = None, path: Path | str | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.happened = happened
        self.billed = billed
        self.outcome = outcome
        self.call_id = call_id
        self.status = status
        self.retry_after_s = retry_after_s
        # Set by `paid_call_retrying`: every attempt's reservation, and how many were made.
        self.call_ids: tuple[str, ...] = (call_id,)
        self.attempts = 1


class DeepAskFailedError(PinakesError):
    """A `pnk ask --deep` call failed at the API (not a refusal or a truncation, which end the loop
    with a best-effort answer): the run stops. `call_ids` are its attempts' reservations."""

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, call_ids: tuple[str, ...] = (), remedy: str | None = None,
                 path: Path | str | None = None):
        super().__init__(message, remedy=remedy, path=path)
        self.call_ids = call_ids


class MissingExtraError(PinakesError):
    """An optional dependency group (extra) is not installed."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, extra: str, purpose: str, *, missing_module: str | None = None):
        from pinakes.distribution import pip_install

        detail = f" ({missing_module} is not importable)" if missing_module else ""
        super().__init__(
            f"{purpose} needs the [{extra}] extra{detail}",
            remedy=pip_install((extra,)),
        )
        self.extra = extra


class ModelUnavailableError(PinakesError):
    """Model weights are not present locally and may not be downloaded."""

    exit_code = EXIT_UNAVAILABLE


class EmbeddingEndpointError(PinakesError):
    """A remote embedding endpoint failed: unreachable, still refusing after the bounded retries, or
    answering with vectors that cannot be used (wrong count, dimension, NaN, a truncated input); or
    any model gave a query a vector that ranks nothing (all zeros: search/vectors.py).
    Search answers with keyword results instead; a sync stops with nothing of the batch written."""

    exit_code = EXIT_UNAVAILABLE


class RerankEndpointError(PinakesError):
    """A reranker behind an HTTP endpoint failed: unreachable, past its deadline, still refusing after
    the bounded retries, answering with scores that cannot be used, or another model answering under
    the configured name. Search answers without rerank and says so in a note."""

    exit_code = EXIT_UNAVAILABLE


class FloorsMissingError(PinakesError):
    """The fitted PDF floors (package data `extract/floors.toml`) are missing or damaged."""

    exit_code = EXIT_UNAVAILABLE


class LockHeldError(PinakesError):
    """Another sync holds the KB's lock."""

    exit_code = EXIT_LOCKED


class FilesystemError(PinakesError):
    """The filesystem refused a write (disk full, read-only, permission)."""

    exit_code = EXIT_IO


class IndexUnreadableError(PinakesError):
    """SQLite refused a read (locked past the busy timeout, or a damaged file)."""

    exit_code = EXIT_DATA


class OutcomesError(PinakesError):
    """An eval outcomes or baseline file cannot be read or is not one."""

    exit_code = EXIT_DATA


class ToolArgumentError(UsageError):
    """An MCP tool argument was refused at the server boundary (`pinakes.serve.boundary`)."""


class NotServedError(PinakesError):
    """The MCP caller named a KB, document or tool this server does not serve."""


class TemplateNotArchivedError(PinakesError):
    """`pnk upgrade --apply` cannot compare: the recorded template version was never archived, is newer
    than the installed one, or names a template that is not installed."""

    exit_code = EXIT_UNAVAILABLE


class UpgradeRefusedError(PinakesError):
    """`pnk upgrade --apply` refused: a template change does not apply to the user's manifest, a budget
    cap move was not confirmed, or the file changed since the report. The file is left byte-identical."""

    exit_code = EXIT_FAILURE


# What to do about each way the filesystem refuses: one vocabulary for every writer and reader.
_FILESYSTEM_REMEDIES = {
    errno.ENOSPC: "free some disk space and run the command again",
    getattr(errno, "EDQUOT", errno.ENOSPC): "free some space (or quota) and run the command again",
    errno.EROFS: "the filesystem is mounted read-only; remount it read-write or work on a writable copy",
    errno.EACCES: "check the permissions of the file and its directory",
    errno.EPERM: "check the permissions of the file and its directory",
    errno.EIO: "the disk reported an I/O error; check the device before retrying",
}


def filesystem_error(path: Path | str, exc: OSError, doing: str, consequence: str = "") -> FilesystemError:
    """The FilesystemError for an OSError met while `doing` something to `path`."""
    reason = exc.strerror or str(exc)
    remedy = _FILESYSTEM_REMEDIES.get(exc.errno or 0, "check the filesystem and run the command again")
    message = f"could not {doing} ({reason})" + (f"; {consequence}" if consequence else "")
    return FilesystemError(message, remedy=remedy, path=path)
