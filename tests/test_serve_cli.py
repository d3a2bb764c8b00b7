"""`pnk serve` startup: which KBs it serves, failing fast on a bad one, and the HTTP transport."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pinakes.errors import KBNotFoundError, ManifestError, UsageError
from pinakes.serve.config import alias_from_name, parse_kb_argument, resolve_served_kbs
from tests.test_serve_helpers import make_kb, offline_env, sync_kb


def run_serve(args: list[str], env: dict[str, str], *, stdin: str = "",
              timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pinakes", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    return make_kb(tmp_path / "kb", "notes", {"a.md": "# A\n\nAlpha.\n"})


# -- which KBs ------------------------------------------------------------------------------------


def test_kb_arguments_name_kbs_by_manifest_name_or_alias(kb: Path, tmp_path: Path) -> None:
    other = make_kb(tmp_path / "other", "Team Notes (2026)", {})
    served = resolve_served_kbs([str(kb), f"work={other}"])
    assert [(s.alias, s.name) for s in served] == [("notes", "notes"), ("work", "Team Notes (2026)")]
    assert resolve_served_kbs([str(other)])[0].alias == "team-notes-2026"
    assert served[0].root == kb.resolve()


def test_a_kb_argument_may_be_any_directory_inside_the_kb(kb: Path) -> None:
    assert resolve_served_kbs([str(kb / "docs")])[0].root == kb.resolve()


def test_the_default_kb_is_the_one_containing_the_given_directory(kb: Path) -> None:
    assert resolve_served_kbs([], None, kb / "docs")[0].alias == "notes"


def test_serving_the_same_kb_twice_or_two_kbs_under_one_alias_is_refused(kb: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="twice"):
        resolve_served_kbs([str(kb), str(kb / "docs")])
    same_name = make_kb(tmp_path / "again", "notes", {})
    with pytest.raises(UsageError, match="'notes' names two KBs") as refused:
        resolve_served_kbs([str(kb), str(same_name)])
    assert "ALIAS=DIR" in (refused.value.remedy or "")
    assert len(resolve_served_kbs([str(kb), f"again={same_name}"])) == 2


def test_a_config_file_lists_kbs_relative_to_itself(kb: Path, tmp_path: Path) -> None:
    other = make_kb(tmp_path / "other", "other", {})
    config = tmp_path / "serve.toml"
    config.write_text('[[kb]]\npath = "kb"\n\n[[kb]]\npath = "other"\nalias = "second"\n', encoding="utf-8")
    served = resolve_served_kbs([], config)
    assert [(s.alias, s.root) for s in served] == [("notes", kb.resolve()), ("second", other.resolve())]


@pytest.mark.parametrize(("text", "says"), [
    ('[[kb]]\npath = "kb"\nwritable = true\n', "unknown key"),
    ('[server]\nport = 1\n', "unknown key"),
    ("", "no [[kb]] entries"),
    ('[[kb]]\nalias = "x"\n', "path is required"),
    ('[[kb]]\npath = "kb"\nalias = "../x"\n', "not usable as a tool argument"),
    ("[[kb]\n", "cannot read"),
])
def test_a_bad_config_file_is_refused_naming_the_problem(kb: Path, tmp_path: Path, text: str, says: str) -> None:
    config = tmp_path / "serve.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError, match=says.replace("[", r"\[").replace("]", r"\]")):
        resolve_served_kbs([], config)


def test_kb_and_config_together_are_refused(kb: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not both"):
        resolve_served_kbs([str(kb)], tmp_path / "serve.toml")


def test_startup_validates_every_manifest(kb: Path, tmp_path: Path) -> None:
    broken = make_kb(tmp_path / "broken", "broken", {})
    manifest = broken / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8") + "\n[surprise]\nkey = 1\n", encoding="utf-8")
    with pytest.raises(ManifestError):
        resolve_served_kbs([str(kb), str(broken)])
    with pytest.raises(KBNotFoundError) as missing:
        resolve_served_kbs([str(tmp_path / "nowhere")])
    # A served KB is named by --kb, not -C: the remedy says so.
    assert "--kb" in (missing.value.remedy or "") and "-C" not in (missing.value.remedy or "")


def test_alias_parsing_keeps_a_directory_that_merely_contains_an_equals_sign() -> None:
    assert parse_kb_argument("work=/srv/kb") == ("work", "/srv/kb")
    assert parse_kb_argument("/srv/a=b") == (None, "/srv/a=b")
    assert alias_from_name("Ünïcode ★ name") == "n-code-name"
    assert alias_from_name("★") == "kb"


# -- the process ----------------------------------------------------------------------------------


def test_serve_fails_fast_with_a_clear_error_and_no_traceback(kb: Path, tmp_path: Path) -> None:
    env = offline_env(tmp_path)
    manifest = kb / "pinakes.toml"
    manifest.write_text(manifest.read_text(encoding="utf-8").replace("[kb]", "[kb]\nbogus = 1", 1), encoding="utf-8")
    for args, says in ((["serve", "--kb", str(kb)], "pinakes.toml"),
                       (["serve", "--kb", str(tmp_path / "missing")], "does not exist"),
                       (["-C", str(tmp_path), "serve"], "not inside a Pinakes KB"),
                       (["serve", "--kb", str(kb), "--port", "9"], "--port applies to --http")):
        completed = run_serve(args, env)
        assert completed.returncode == 2, (args, completed.stderr)
        assert says in completed.stderr
        assert "Traceback" not in completed.stderr
        assert completed.stdout == ""  # stdout belongs to the protocol


def test_serve_over_stdio_exits_when_stdin_closes(kb: Path, tmp_path: Path) -> None:
    sync_kb(kb)
    started = time.monotonic()
    completed = run_serve(["-C", str(kb / "docs"), "serve"], offline_env(tmp_path))
    assert completed.returncode == 0, completed.stderr
    assert "serving notes (" in completed.stderr and "over stdio" in completed.stderr
    assert time.monotonic() - started < 30


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_http_transport_serves_the_tools_on_loopback_only(kb: Path, tmp_path: Path) -> None:
    import anyio
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    sync_kb(kb)
    port = free_port()
    errlog = tmp_path / "stderr.log"
    with open(errlog, "w", encoding="utf-8") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "pinakes", "serve", "--kb", str(kb), "--http",
                                    "--port", str(port)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=stderr, env=offline_env(tmp_path))
    try:
        wait_for_port(port, process, errlog)
        url = f"http://127.0.0.1:{port}/mcp"

        async def session() -> tuple[list[str], dict[str, Any]]:
            async with streamable_http_client(url) as (read, write), ClientSession(read, write) as client:
                await client.initialize()
                names = [tool.name for tool in (await client.list_tools()).tools]
                reply = await client.call_tool("pinakes_search", {"query": "alpha", "mode": "bm25"})
                return names, reply.structured_content or {}

        names, payload = anyio.run(session)
        assert names == ["pinakes_search", "pinakes_get", "pinakes_links", "pinakes_status", "pinakes_list_kbs"]
        assert payload["passages"][0]["path"] == "docs/a.md"
        # DNS rebinding: a page on another origin reaching the loopback port is refused.
        forged = httpx.post(url, headers={"Host": "attacker.example", "Content-Type": "application/json",
                                          "Accept": "application/json, text/event-stream"},
                            content=b'{"jsonrpc":"2.0","id":1,"method":"ping"}', timeout=10)
        assert forged.status_code in (400, 403, 421), forged.status_code
        assert bound_addresses(port) in ({"127.0.0.1"}, None)
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert "serving notes" in errlog.read_text(encoding="utf-8")


def bound_addresses(port: int) -> set[str] | None:
    """The IPv4 addresses listening on `port` (Linux /proc); None where /proc is not available."""
    table = Path("/proc/net/tcp")
    if not table.exists():
        return None
    addresses: set[str] = set()
    for line in table.read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        host, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            addresses.add(socket.inet_ntoa(bytes.fromhex(host)[::-1]))
    return addresses


def wait_for_port(port: int, process: subprocess.Popen[bytes], errlog: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited early:\n{errlog.read_text(encoding='utf-8')}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port}:\n{errlog.read_text(encoding='utf-8')}")

