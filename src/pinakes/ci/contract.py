"""What `pnk sync`, `pnk eval` and `pnk doctor` promise a script: the exit code of each outcome and
what `--json` prints on stdout for it. docs/generate.py renders this table into docs/CLI.md, and
`tests/test_ci_workflow.py` checks the rows against the commands themselves, so a CI step can act
on a code or a key without reading prose.

Every command shares one error shape: a `PinakesError` exits with its own code (the error table in
docs/architecture.md) and, under `--json`, prints `ERROR_KEYS` on stdout instead of a report.
"""

from __future__ import annotations

from dataclasses import dataclass

from pinakes.errors import EXIT_CONFIG, EXIT_DATA, EXIT_FAILURE, EXIT_IO, EXIT_LOCKED, EXIT_UNAVAILABLE

# What `--json` prints for any PinakesError (pinakes.cli.main): {"ok": false, ...}.
ERROR_KEYS = ("ok", "error", "message", "path", "remedy")
_ERROR_JSON = "`ok: false`, `error` (the class), `message`, `path`, `remedy`"


@dataclass(frozen=True)
class Outcome:
    command: str
    exit_code: int
    meaning: str
    json: str  # what --json prints on stdout, in words naming its keys
    keys: tuple[str, ...] = ()  # the top-level keys that are always present (checked by the tests)


SYNC_KEYS = ("ok", "noop", "mode", "skipped_reason", "counts", "added", "changed", "deleted", "failures",
             "warnings")
EVAL_RUN_KEYS = ("ok", "header", "scoreboard", "regressions", "tolerance", "baseline")
DOCTOR_KEYS = ("ok", "kb_root", "checks", "summary")

CONTRACT = (
    Outcome("sync", 0, "the index is up to date: every document synced, or nothing had changed",
            "the report: `ok: true`, `noop`, `counts` {indexed, unchanged, skipped, failed}, `added`, "
            "`changed`, `deleted`, `failures: []`, `warnings`", SYNC_KEYS),
    Outcome("sync", 0, "skipped: another sync on this host holds the lock (hooks and CI need not retry)",
            "the report with `skipped_reason` set", SYNC_KEYS),
    Outcome("sync", EXIT_FAILURE, "the sync ran and some documents failed; the others are indexed",
            "the report: `ok: false`, `failures` [{path, stage, error, permanent}], `exclusion`", SYNC_KEYS),
    Outcome("sync", EXIT_CONFIG, "the manifest or a flag is wrong; nothing was synced", _ERROR_JSON, ERROR_KEYS),
    Outcome("sync", EXIT_DATA, "a sidecar or the index is wrong (e.g. an ID claimed by two sidecars)",
            _ERROR_JSON, ERROR_KEYS),
    Outcome("sync", EXIT_UNAVAILABLE, "an extra or model weights are not installed", _ERROR_JSON, ERROR_KEYS),
    Outcome("sync", EXIT_IO, "the filesystem refused a write (full, read-only)", _ERROR_JSON, ERROR_KEYS),
    Outcome("sync", EXIT_LOCKED, "another host holds the sync lock (a shared checkout)", _ERROR_JSON, ERROR_KEYS),
    Outcome("eval", 0, "the golden set ran with no regression against eval/baseline.json (or there is "
            "no baseline yet)", "`ok: true`, `header`, `scoreboard`, `regressions: []`, `tolerance`, "
            "`baseline`", EVAL_RUN_KEYS),
    Outcome("eval", 0, "skipped: the KB has no golden set (eval/questions.yaml), as a new KB has none",
            "`ok: true`, `skipped` (the reason)", ("ok", "skipped")),
    Outcome("eval", EXIT_FAILURE, "a rate regressed beyond the tolerance, or the question count fell",
            "`ok: false`, `regressions` [{class, metric, before, after, why}]", EVAL_RUN_KEYS),
    Outcome("eval", EXIT_CONFIG, "the manifest or a flag is wrong", _ERROR_JSON, ERROR_KEYS),
    Outcome("eval", EXIT_DATA, "the golden set or the baseline is invalid (every problem is listed)",
            _ERROR_JSON, ERROR_KEYS),
    Outcome("eval", EXIT_UNAVAILABLE, "the KB has no index (with `--no-sync`), or an extra or model is "
            "missing", _ERROR_JSON, ERROR_KEYS),
    Outcome("doctor", 0, "no check failed (warnings allowed)",
            "`ok: true`, `kb_root`, `checks` [{name, status, detail, remedy}], `summary` {OK, WARN, FAIL}",
            DOCTOR_KEYS),
    Outcome("doctor", EXIT_FAILURE, "at least one check is FAIL", "`ok: false` and the same keys",
            DOCTOR_KEYS),
)


def outcomes(command: str) -> list[Outcome]:
    return [outcome for outcome in CONTRACT if outcome.command == command]
