"""What a `pnk serve` process actually did during a session, observed from inside it.

A `sitecustomize` placed on the server's PYTHONPATH (by these tests only) installs a PEP 578 audit
hook that logs every file open, directory listing, SQLite connection, subprocess and socket
connection, and records `sys.modules` at exit. One session then exercises every tool, including
every hostile argument and a source swapped for a symlink to a file outside the KB, and the log
must show the server touched nothing outside its KB's manifest, `.pinakes/` and source roots
(plus the Python installation it runs from), spawned nothing, connected nowhere, and never
loaded a paid client (spec §1) or the paid `pnk ask --deep` module (spec §4.3). A planted import
is the negative control: "this set lacks the name" is also true of a harness that saw nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

import pinakes
from pinakes.manifest import load_manifest
from tests.conftest import REPO_ROOT
from tests.paid_gate_harness import ALLOWLIST_NAME, PAID_CLIENTS, paid_clients_in, read_allowlist
from tests.test_serve_helpers import (
    PATH_CHECKED_ARGUMENTS,
    PATH_LIKE_VALUES,
    ToolReply,
    add_indexed_pdf,
    doc_ids,
    hostile_call,
    live_server,
    make_kb,
    offline_env,
    sync_kb,
)

SITECUSTOMIZE = textwrap.dedent('''
    """Test-only instrumentation for a spawned `pnk serve` (tests/test_serve_audit.py)."""
    import atexit
    import os
    import sys

    _audit_log = os.environ.get("PNK_TEST_AUDIT_LOG")
    _modules_report = os.environ.get("PNK_TEST_MODULES_REPORT")

    if os.environ.get("PNK_TEST_PLANT_PAID_IMPORT") == "1":
        import pinakes.search.core as _core

        _original_search = _core.Searcher.search

        def _planted_search(self, *args, **kwargs):
            import anthropic  # the planted leak: a paid client loaded while serving a search
            if os.environ.get("PNK_TEST_PLANT_DEEP_IMPORT") == "1":
                import pinakes.deep.loop  # the planted leak: the CLI-only --deep loop loaded by the server
            return _original_search(self, *args, **kwargs)

        _core.Searcher.search = _planted_search

    if _modules_report:
        def _report_modules():
            with open(_modules_report, "w", encoding="utf-8") as handle:
                handle.write("\\n".join(sorted(sys.modules)))
        atexit.register(_report_modules)

    if _audit_log:
        _log = open(_audit_log, "a", buffering=1, encoding="utf-8")
        _PROCESS_EVENTS = ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                           "os.fork", "os.forkpty", "socket.connect", "socket.bind", "urllib.Request")

        def _path(value):
            return os.path.abspath(os.fsdecode(value))

        def _hook(event, args):
            if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
                _log.write("open\\t" + _path(args[0]) + "\\n")
            elif event in ("os.listdir", "os.scandir") and not isinstance(args[0], int):
                _log.write("list\\t" + _path(args[0] if args[0] is not None else ".") + "\\n")
            elif event == "sqlite3.connect":
                _log.write("sqlite\\t" + str(args[0]) + "\\n")
            elif event in _PROCESS_EVENTS:
                _log.write("process\\t" + event + " " + repr(args)[:200] + "\\n")

        sys.addaudithook(_hook)
''')

OUTSIDE_SECRET = "TOPSECRET-the-server-must-never-read-this\n"


@dataclass
class ObservedSession:
    kb: Path
    cwd: Path
    site: Path
    report: Path  # written by the instrumentation itself, at exit
    events: list[tuple[str, str]]
    modules: frozenset[str]
    replies: list[ToolReply]


def write_site(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    return directory


def read_events(log: Path) -> list[tuple[str, str]]:
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return cast("list[tuple[str, str]]", [tuple(line.split("\t", 1)) for line in lines])


def read_modules(report: Path) -> frozenset[str]:
    assert report.exists(), "the server wrote no sys.modules report (did it exit cleanly?)"
    return frozenset(report.read_text(encoding="utf-8").split())


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> ObservedSession:
    scratch = tmp_path_factory.mktemp("audit")
    kb = make_kb(scratch / "kb", "audited", {
        "alpha.md": "# Alpha\n\nWings generate lift.\n",
        "linked.md": "# Linked\n\nThis file will become a symlink.\n",
    })
    sync_kb(kb)
    add_indexed_pdf(kb, "docs/report.pdf", ["Revenue grew.", "Costs rose."])
    ids = doc_ids(kb)
    outside = scratch / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(OUTSIDE_SECRET, encoding="utf-8")
    (kb / "docs" / "linked.md").unlink()
    os.symlink(outside / "secret.md", kb / "docs" / "linked.md")

    cwd = scratch / "cwd"
    cwd.mkdir()
    site = write_site(scratch / "site")
    log, report = scratch / "audit.log", scratch / "modules.txt"
    env = offline_env(scratch, PYTHONPATH=str(site), PNK_TEST_AUDIT_LOG=str(log),
                      PNK_TEST_MODULES_REPORT=str(report))
    replies = []
    with live_server(["--kb", str(kb)], env, cwd=cwd) as server:
        calls: list[tuple[str, dict[str, Any]]] = [
            ("pinakes_list_kbs", {}),
            ("pinakes_search", {"query": "wings lift", "mode": "bm25"}),
            ("pinakes_search", {"query": "wings", "mode": "bm25", "path_prefix": "docs/", "tags": ["x"],
                                "since": "2000-01-01", "until": "2999-12-31", "source_type": "markdown"}),
            ("pinakes_search", {"query": "../../etc/passwd file:///etc/shadow ~/.ssh", "mode": "bm25"}),
            ("pinakes_get", {"doc_id": ids["docs/alpha.md"], "char_start": 0, "char_end": 10}),
            ("pinakes_get", {"doc_id": ids["docs/report.pdf"], "page_start": 1, "page_end": 2}),
            ("pinakes_links", {"doc_id": ids["docs/alpha.md"], "depth": 3}),
            ("pinakes_get", {"doc_id": ids["docs/linked.md"]}),
        ]
        calls += [(tool, hostile_call(tool, argument, value)) for tool, argument in PATH_CHECKED_ARGUMENTS
                  for value in PATH_LIKE_VALUES.values()]
        replies = [server.call(tool, arguments) for tool, arguments in calls]
    return ObservedSession(kb, cwd, site, report, read_events(log), read_modules(report), replies)


def allowed_prefixes(session: ObservedSession) -> list[str]:
    kb = session.kb
    roots = [kb / "pinakes.toml", kb / ".pinakes"]
    roots += [kb / root for root in load_manifest(kb / "pinakes.toml").sources.roots]
    installation = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    package_sources = [Path(pinakes.__file__).parent, REPO_ROOT / "rules"]  # an editable install
    return [str(p) for p in (*roots, *map(Path, installation), *package_sources, Path("/dev/null"))]


def outside(path: str, prefixes: list[str]) -> bool:
    return not any(path == prefix or path.startswith(prefix.rstrip("/") + "/") for prefix in prefixes)


def test_the_session_really_ran_every_call(observed: ObservedSession) -> None:
    assert observed.events, "the audit hook logged nothing"
    ok = [reply for reply in observed.replies[:7] if not reply.is_error]
    assert len(ok) == 7, [reply.payload for reply in observed.replies[:7]]
    symlinked = observed.replies[7]
    assert symlinked.is_error and "resolves outside the KB" in symlinked.payload["message"]
    hostile = observed.replies[8:]
    assert hostile and all(reply.is_error for reply in hostile)
    assert not any(OUTSIDE_SECRET.strip() in json.dumps(reply.payload) for reply in observed.replies)


def test_the_server_opened_nothing_outside_its_kb_and_its_installation(observed: ObservedSession) -> None:
    prefixes = allowed_prefixes(observed)
    opened = sorted({path for kind, path in observed.events if kind == "open"})
    assert str(observed.kb / "docs" / "alpha.md") in opened  # the log does see the reads it should
    assert [path for path in opened if outside(path, [*prefixes, str(observed.report)])] == []
    listed = {path for kind, path in observed.events if kind == "list"}
    # Directory listings are the import system scanning sys.path (the cwd, for `python -m`).
    assert [p for p in listed if outside(p, [*prefixes, str(observed.cwd), str(observed.site)])] == []


def test_the_server_opened_only_its_own_index_read_only(observed: ObservedSession) -> None:
    databases = {path for kind, path in observed.events if kind == "sqlite"}
    index_uri = f"{(observed.kb / '.pinakes' / 'index.db').resolve().as_uri()}?mode=ro"
    assert databases <= {index_uri, ":memory:"}, databases
    assert index_uri in databases


def test_the_server_spawned_nothing_and_connected_nowhere(observed: ObservedSession) -> None:
    assert [path for kind, path in observed.events if kind == "process"] == []


def test_serving_loads_no_paid_client_and_not_the_deep_module(observed: ObservedSession) -> None:
    assert "pinakes.serve.server" in observed.modules and "pinakes.search.core" in observed.modules
    allowlisted = set(read_allowlist(REPO_ROOT / ALLOWLIST_NAME))
    assert sorted(allowlisted & observed.modules) == []
    assert deep_modules(observed.modules) == []
    missing = [client for client in PAID_CLIENTS if importlib.util.find_spec(client) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} is not installed here, so its absence from sys.modules would pass "
                    "vacuously; this check runs for real where the [claude] extra is installed")
    assert paid_clients_in(observed.modules) == []


@pytest.fixture
def planted_modules(tmp_path: Path) -> Iterator[frozenset[str]]:
    kb = make_kb(tmp_path / "kb", "planted", {"alpha.md": "# Alpha\n\nWings generate lift.\n"})
    sync_kb(kb)
    site = write_site(tmp_path / "site")
    (site / "anthropic").mkdir()
    (site / "anthropic" / "__init__.py").write_text("# a stand-in: the control must run without the SDK\n")
    report = tmp_path / "modules.txt"
    env = offline_env(tmp_path, PYTHONPATH=str(site), PNK_TEST_MODULES_REPORT=str(report),
                      PNK_TEST_PLANT_PAID_IMPORT="1", PNK_TEST_PLANT_DEEP_IMPORT="1")
    with live_server(["--kb", str(kb)], env) as server:
        assert not server.call("pinakes_list_kbs").is_error
        assert "anthropic" not in read_modules_if_any(report)  # nothing planted fires before a search
        reply = server.call("pinakes_search", {"query": "wings", "mode": "bm25"})
        assert not reply.is_error, reply.payload
    yield read_modules(report)


def deep_modules(modules: frozenset[str]) -> list[str]:
    """The `pnk ask --deep` package's modules among `modules`: a CLI surface only (spec §4.3)."""
    return sorted(name for name in modules if name == "pinakes.deep" or name.startswith("pinakes.deep."))


def read_modules_if_any(report: Path) -> frozenset[str]:
    return read_modules(report) if report.exists() else frozenset()


def test_the_module_report_catches_a_paid_import_planted_in_search(planted_modules: frozenset[str]) -> None:
    """Negative control for test_serving_loads_no_paid_client_and_not_the_deep_module."""
    assert paid_clients_in(planted_modules) == ["anthropic"]


def test_the_module_report_catches_the_deep_loop_planted_in_search(planted_modules: frozenset[str]) -> None:
    """Negative control for the serve-never-imports gate (spec §4.3): the same predicate that must
    find nothing in a real session finds the planted import, so its silence there is evidence."""
    assert "pinakes.deep.loop" in deep_modules(planted_modules)
