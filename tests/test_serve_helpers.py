"""Shared builders for the `pnk serve` tests (this module holds no tests).

KBs are made with `pnk init`'s own code and indexed by a real sync with the deterministic fake
embedder; a PDF is a real one, extracted by the sync (the free extractor, or claude-vision against
the local Messages API), so its row, chunks and extraction cache entry are what a sync writes.
`LiveServer` drives a real `python -m pinakes serve` subprocess through the official MCP client,
from synchronous test code, via an anyio blocking portal.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import Generator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pinakes.extract.cache import ExtractCache
from pinakes.extract.registry import current_fingerprint
from pinakes.init import init_kb
from pinakes.manifest import load_manifest
from pinakes.serve.tools import PinakesTools
from pinakes.sync import SyncOptions
from pinakes.sync.engine import run_sync
from tests.fakes import FakeEmbedder
from tests.kb_helpers import older_extractor, text_pdf

SERVER_START_TIMEOUT_S = 60.0


# A two-section document both the MCP tools' tests and `pnk get`'s read.
ALPHA = "# Alpha\n\nThe alpha document talks about aeroplanes.\n\n## Wings\n\nWings generate lift.\n"

def make_kb(root: Path, name: str, documents: Mapping[str, str]) -> Path:
    init_kb(root, name=name)
    for relative, text in documents.items():
        path = root / "docs" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def manifest_fake_embedder(root: Path) -> FakeEmbedder:
    """The fake embedder under the identity the KB's manifest names, so the index it builds is
    coherent with the manifest (as a real sync's would be) and searches do not refuse it."""
    embedding = load_manifest(root / "pinakes.toml").embedding
    return FakeEmbedder(dim=embedding.dim, model=embedding.model, provider=embedding.provider)


def sync_kb(root: Path, *, rebuild: bool = False, **options: Any) -> None:
    report = run_sync(root, SyncOptions(rebuild=rebuild, **options), embedder=manifest_fake_embedder(root))
    assert report.ok, report


def call_tool(tools: PinakesTools, name: str, arguments: object) -> dict[str, Any]:
    """`tools.call`, its answer typed as the parsed JSON it is, so a test can index nested values
    (the server declares `dict[str, object]`, which is right for it and opaque to a reader)."""
    return tools.call(name, arguments)


def doc_ids(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(root / ".pinakes" / "index.db")
    try:
        return dict(conn.execute("SELECT path, id FROM documents WHERE state = 'active'").fetchall())
    finally:
        conn.close()


def add_indexed_pdf(root: Path, relative: str, pages: Sequence[str], *, backend: str = "pypdfium2",
                    fingerprint: str | None = None, cached: bool = True, doc_id: str | None = None) -> str:
    """Add a PDF of `pages` (one line each) at `relative` and sync it; returns its doc_id.

    `backend` "claude-vision" scans the pages as images and extracts them through the paid path,
    against a local Messages API that answers with `pages`. A `fingerprint` other than the
    backend's current one means "extracted by an older version of the backend": the sync runs
    under `older_extractor`, so the index records a fingerprint this Pinakes no longer computes.
    `cached=False` then sweeps the free extraction cache, as `pnk sync --clear-cache` does. The
    extractor joins the pages with a blank line, so the indexed text is `"\\n\\n".join(pages)`; a
    free PDF declares its file stem as its title. The chunker packs short pages into one chunk.
    """
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if doc_id is not None:
        Path(f"{path}.pnk.yaml").write_text(f"id: {doc_id}\n", encoding="utf-8")
    older = fingerprint is not None and fingerprint != current_fingerprint(backend)
    with ExitStack() as stack:
        if older:
            stack.enter_context(older_extractor(backend))
        if backend == "claude-vision":
            from tests.fake_anthropic import FakeAnthropic, scanned_pdf

            server = stack.enter_context(FakeAnthropic())
            server.page_texts = dict(enumerate(pages, start=1))
            stack.enter_context(_environment(PINAKES_ANTHROPIC_API_KEY="sk-ant-test-not-a-key",
                                             ANTHROPIC_BASE_URL=server.url))
            path.write_bytes(scanned_pdf(len(pages)))
            sync_kb(root, extract_backend="claude-vision")
        else:
            path.write_bytes(text_pdf([page.split("\n") for page in pages], title=path.stem))  # its declared title
            sync_kb(root)
    if not cached:
        ExtractCache(root / ".pinakes" / "cache" / "extract").clear(include_paid=False)
    return doc_ids(root)[relative]


@contextmanager
def _environment(**values: str) -> Generator[None, None, None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def offline_env(scratch: Path, **extra: str) -> dict[str, str]:
    """What a spawned server needs: the venv on PATH, no hub access, a private HF cache."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(scratch), "HF_HOME": str(scratch / "hf"),
           "XDG_CACHE_HOME": str(scratch / "cache"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PNK_OFFLINE": "1"}
    if os.environ.get("PYTHONPATH"):  # a checkout run through PYTHONPATH: the server runs the same code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    env.update(extra)
    return env


@dataclass(frozen=True)
class ToolReply:
    is_error: bool
    payload: dict[str, Any]

    @property
    def error(self) -> str:
        return str(self.payload.get("error"))


class LiveServer:
    """A running `python -m pinakes serve`, called synchronously through the official MCP client."""

    def __init__(self, portal: Any, session: Any, errlog: Path):
        self._portal = portal
        self._session = session
        self.errlog = errlog

    def list_tools(self) -> list[Any]:
        return self._portal.call(self._session.list_tools).tools

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> ToolReply:
        result = self._portal.call(self._session.call_tool, tool, dict(arguments or {}))
        payload = result.structured_content
        if payload is None:
            payload = json.loads(result.content[0].text)
        text_payload = json.loads(result.content[0].text)
        assert text_payload == payload, "the text content and the structured content disagree"
        return ToolReply(bool(result.is_error), payload)

    def stderr(self) -> str:
        return self.errlog.read_text(encoding="utf-8", errors="replace")


@contextmanager
def live_server(args: Sequence[str], env: Mapping[str, str], *, cwd: Path | None = None,
                python_args: Sequence[str] = ()) -> Generator[LiveServer, None, None]:
    import anyio.from_thread
    from mcp import ClientSession, StdioServerParameters, stdio_client

    errlog = Path(env.get("HOME", "/tmp")) / f"serve-stderr-{os.getpid()}-{id(args)}.log"
    params = StdioServerParameters(command=sys.executable, args=[*python_args, "-m", "pinakes", "serve", *args],
                                   env=dict(env), cwd=str(cwd) if cwd else None)
    with ExitStack() as stack:
        handle = stack.enter_context(open(errlog, "w", encoding="utf-8"))
        portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
        read, write = stack.enter_context(portal.wrap_async_context_manager(stdio_client(params, errlog=handle)))
        session = stack.enter_context(portal.wrap_async_context_manager(
            ClientSession(read, write, read_timeout_seconds=SERVER_START_TIMEOUT_S)))
        portal.call(session.initialize)
        yield LiveServer(portal, session, errlog)


# A well-formed ULID that no served KB contains, for arguments that need one to reach their check.
ABSENT_ULID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"

# Path-, URI- and glob-shaped values of every kind, and the look-alikes that try to get them past
# an ASCII check. Each must be refused wherever a tool takes an identifier or a filter value.
PATH_LIKE_VALUES: dict[str, str] = {
    "parent segment": "../secrets",
    "nested parent segment": "docs/../../etc",
    "dot segment": "./docs",
    "absolute path": "/etc/passwd",
    "home path": "~/.ssh/id_rsa",
    "file uri": "file:///etc/passwd",
    "http uri": "http://example.com/x",
    "pnk uri": "pnk://self/01ARZ3NDEKTSV4RRFFQ69G5FAV",
    "windows drive": "C:\\Windows\\win.ini",
    "unc path": "\\\\server\\share",
    "backslash parent": "..\\..\\etc",
    "star glob": "docs/*.md",
    "question glob": "docs/?.md",
    "class glob": "docs/[ab].md",
    "brace glob": "docs/{a,b}.md",
    "percent-encoded parent": "%2e%2e/etc",
    "percent-encoded slash": "docs%2fsecret",
    "nul byte": "docs\x00.md",
    "newline": "docs\n/etc",
    "fullwidth solidus": "docs\uff0fapi",
    "fullwidth dots": "\uff0e\uff0e/etc",
    "division slash": "docs\u2215api",
    "fraction slash": "\u2044etc",
    "one dot leaders": "\u2024\u2024/etc",
    "right-to-left override": "docs/\u202etxt.exe",
    "zero-width space": "do\u200bcs",
    "doubled slash": "docs//api",
    "overlong": "d" * 5_000,
}

# (tool, argument) pairs that take an identifier or filter value.
PATH_CHECKED_ARGUMENTS: tuple[tuple[str, str], ...] = (
    ("pinakes_search", "path_prefix"),
    ("pinakes_search", "kb"),
    ("pinakes_search", "tags"),
    ("pinakes_search", "since"),
    ("pinakes_search", "until"),
    ("pinakes_search", "source_type"),
    ("pinakes_get", "doc_id"),
    ("pinakes_get", "kb"),
    ("pinakes_links", "doc_id"),
    ("pinakes_links", "kb"),
)


def hostile_call(tool: str, argument: str, value: str) -> dict[str, Any]:
    """The arguments of a call whose only bad value is `argument` = `value`."""
    arguments: dict[str, Any] = {"query": "wings"} if tool == "pinakes_search" else {"doc_id": ABSENT_ULID}
    arguments[argument] = [value] if argument == "tags" else value
    return arguments
