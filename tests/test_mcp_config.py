"""`pnk mcp-config`: the printed entry starts a server the official MCP client can list tools from,
and `--write` changes a client's config file by that one entry, every other byte kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from pinakes.cli.cmd_mcp_config import CLIENT_NAMES
from pinakes.errors import UsageError
from pinakes.serve import mcp_config
from pinakes.serve.json_splice import JSONSpliceError, loads, set_member
from pinakes.serve.mcp_config import CLIENTS, server_entry, write_entry
from pinakes.serve.specs import TOOL_SPECS
from tests.conftest import REPO_ROOT
from tests.test_serve_helpers import make_kb, offline_env, sync_kb

SKILL = REPO_ROOT / "templates" / "skill" / "SKILL.md"

# A config a person and other tools have edited: comments, tabs, an inline object, a trailing comma,
# other servers, keys of the client's own, and unicode.
EDITED = """{
\t// servers I use every day
\t"mcpServers": {
\t\t"github": { "command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"] },
\t\t"notes-old": {
\t\t\t"command": "/opt/tools/bin/notes",   /* pinned */
\t\t\t"args": [],
\t\t\t"env": {"LANG": "fr_FR.UTF-8", "GREETING": "h\\u00e9llo \\"there\\""}
\t\t},
\t},
\t"theme": "dark",
\t"numStartups": 42
}
"""


def pnk(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pinakes", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


@pytest.fixture
def kb(tmp_path: Path) -> Path:
    root = make_kb(tmp_path / "kb", "Field Notes", {"a.md": "# Swifts\n\nSwifts sleep on the wing.\n"})
    sync_kb(root)
    return root


def inserted_only(before: str, after: str) -> str:
    """What `after` adds to `before` when the change is one insertion (else the test fails)."""
    prefix = _common(before, after)
    suffix = _common(before[prefix:][::-1], after[prefix:][::-1])
    assert prefix + suffix == len(before), "bytes of the original were changed, not only added to"
    return after[prefix:len(after) - suffix]


def _common(first: str, second: str) -> int:
    """How many leading characters the two strings share."""
    return next((index for index, (a, b) in enumerate(zip(first, second, strict=False)) if a != b),
                min(len(first), len(second)))


def test_the_cli_knows_exactly_the_clients_the_module_does() -> None:
    assert tuple(CLIENTS) == CLIENT_NAMES


def test_the_printed_entry_has_absolute_paths_and_starts_a_server_the_mcp_client_lists_tools_from(
        kb: Path, tmp_path: Path) -> None:
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    out = pnk("-C", str(kb), "mcp-config", "--client", "claude-code", cwd=tmp_path,
              env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    (name, entry), = printed["mcpServers"].items()
    assert name == "pinakes-field-notes"
    assert Path(entry["command"]).is_absolute() and entry["command"] == sys.executable
    assert entry["args"][-2:] == ["--kb", str(kb.resolve())]
    assert ".mcp.json" in out.stderr

    async def listed() -> list[str]:
        # Exactly what a client would run; the environment is the client's (here: offline, and the
        # checkout under test on PYTHONPATH when there is one).
        params = StdioServerParameters(command=entry["command"], args=entry["args"], env=offline_env(tmp_path),
                                       cwd=str(tmp_path))
        with open(tmp_path / "server.log", "w", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return [tool.name for tool in (await session.list_tools()).tools]

    assert anyio.run(listed) == [spec.name for spec in TOOL_SPECS]


@pytest.mark.parametrize("client", list(CLIENTS))
def test_each_clients_snippet_is_its_documented_shape(kb: Path, tmp_path: Path, client: str) -> None:
    out = pnk("-C", str(kb), "mcp-config", "--client", client, "--name", "kb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    printed = json.loads(out.stdout)
    key = "servers" if client == "vscode" else "mcpServers"
    assert list(printed) == [key]
    entry = printed[key]["kb"]
    assert entry.get("type") == ("stdio" if client == "vscode" else None)
    assert entry["args"] == ["-m", "pinakes", "serve", "--kb", str(kb.resolve())]


def test_client_config_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    assert CLIENTS["claude-code"].config_path(project, home) == project / ".mcp.json"
    assert CLIENTS["vscode"].config_path(project, home) == project / ".vscode" / "mcp.json"
    assert CLIENTS["cursor"].config_path(project, home) == home / ".cursor" / "mcp.json"
    assert CLIENTS["windsurf"].config_path(project, home) == home / ".codeium" / "windsurf" / "mcp_config.json"
    desktop = CLIENTS["claude-desktop"]
    monkeypatch.setattr(sys, "platform", "darwin")
    assert desktop.config_path(project, home) == \
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
    monkeypatch.setattr(sys, "platform", "win32")
    assert desktop.config_path(project, home, {"APPDATA": str(tmp_path / "Roaming")}) == \
        tmp_path / "Roaming" / "Claude" / "claude_desktop_config.json"
    monkeypatch.setattr(sys, "platform", "linux")
    assert desktop.config_path(project, home, {}) == home / ".config" / "Claude" / "claude_desktop_config.json"


def test_write_adds_one_entry_and_keeps_every_other_byte_with_a_backup(kb: Path, tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(EDITED, encoding="utf-8")
    out = pnk("-C", str(kb), "mcp-config", "--client", "claude-desktop", "--write", "--config-file", str(config))
    assert out.returncode == 0, out.stderr
    after = config.read_text(encoding="utf-8")
    added = inserted_only(EDITED, after)
    assert '"pinakes-field-notes": {' in added
    assert '\n\t\t"pinakes-field-notes": {\n\t\t\t"command"' in after  # indented as its neighbours
    document = loads(after)
    assert isinstance(document, dict)
    document = cast(dict[str, Any], document)
    assert document["mcpServers"]["pinakes-field-notes"] == server_entry(CLIENTS["claude-desktop"], kb.resolve())
    assert document["theme"] == "dark" and set(document["mcpServers"]) == {"github", "notes-old", "pinakes-field-notes"}
    backups = list(tmp_path.glob("claude_desktop_config.json.pnk-backup-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == EDITED.encode("utf-8")
    assert str(backups[0]) in out.stdout
    again = pnk("-C", str(kb), "mcp-config", "--client", "claude-desktop", "--write", "--config-file", str(config))
    assert again.returncode == 0 and "nothing changed" in again.stdout
    assert config.read_text(encoding="utf-8") == after
    assert len(list(tmp_path.glob("*.pnk-backup-*"))) == 1  # no backup of a file left as it was


def test_an_entry_of_the_same_name_is_replaced_only_with_force_and_only_its_value_changes(tmp_path: Path) -> None:
    client = CLIENTS["cursor"]
    config = tmp_path / "mcp.json"
    config.write_text(EDITED, encoding="utf-8")
    entry = server_entry(client, tmp_path / "kb", python="/venv/bin/python")
    with pytest.raises(Exception, match="already has an MCP server named 'notes-old'") as refused:
        write_entry(config, client, "notes-old", entry, force=False)
    assert "--force" in (cast(UsageError, refused.value).remedy or "")  # write_entry's UsageError
    assert config.read_text(encoding="utf-8") == EDITED
    write_entry(config, client, "notes-old", entry, force=True)
    after = config.read_text(encoding="utf-8")
    old_value = EDITED[EDITED.index('{\n\t\t\t"command": "/opt'):EDITED.index("\t\t},\n\t},") + 3]
    start = EDITED.index(old_value)
    assert after[:start] == EDITED[:start]  # everything before the replaced value
    assert after.endswith(EDITED[start + len(old_value):])  # and everything after it
    assert cast(dict[str, Any], loads(after))["mcpServers"]["notes-old"] == entry


@pytest.mark.parametrize("text", ["", "{}", "{}\n", '{"mcpServers": {}}', '{"other": 1}'])
def test_a_missing_empty_or_bare_file_gets_the_entry(tmp_path: Path, text: str) -> None:
    config = tmp_path / "sub" / "mcp.json"
    if text:
        config.parent.mkdir()
        config.write_text(text, encoding="utf-8")
    entry = server_entry(CLIENTS["windsurf"], tmp_path / "kb", python="/py")
    written = write_entry(config, CLIENTS["windsurf"], "pinakes-kb", entry, force=False)
    document = json.loads(config.read_text(encoding="utf-8"))
    assert document["mcpServers"]["pinakes-kb"] == entry
    assert (written.backup is None) == (not text)
    if text.strip() and text.strip() != "{}":
        assert {key: value for key, value in document.items() if key != "mcpServers"} == \
            {key: value for key, value in json.loads(text).items() if key != "mcpServers"}


@pytest.mark.parametrize("text", ['{"mcpServers": {"a": 1,,}}', '{"mcpServers": [1]}', "[1, 2]", '{"a": "x'])
def test_a_config_that_is_not_json_of_that_shape_is_refused_and_left_alone(tmp_path: Path, text: str) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(Exception, match=r"cannot be read as a JSON config|is not an object"):
        write_entry(config, CLIENTS["cursor"], "pinakes-kb", {"command": "/py", "args": []}, force=False)
    assert config.read_text(encoding="utf-8") == text
    assert not list(tmp_path.glob("*.pnk-backup-*"))


def test_the_splice_reads_what_editors_allow_and_names_the_line_of_what_it_cannot() -> None:
    assert loads('{\n  // c\n  "a": [1, 2,], /* x */ "b": "//not a comment",\n}') == \
        {"a": [1, 2], "b": "//not a comment"}
    assert set_member('{"a": {"b": 1}}', ("a", "c"), 2) == '{"a": {"b": 1, "c": 2}}'
    with pytest.raises(JSONSpliceError, match="line 3"):
        set_member('{\n  "a": 1\n  "b": 2\n}', ("mcpServers", "x"), 1)


# -- the skill file ----------------------------------------------------------------------------------


def test_the_skill_file_declares_itself_and_names_every_tool() -> None:
    text = SKILL.read_text(encoding="utf-8")
    front = re.match(r"---\nname: ([a-z0-9-]+)\ndescription: (.+?)\n---\n", text, re.S)
    assert front and front.group(1) == "pinakes" and len(front.group(2)) <= 1024
    for spec in TOOL_SPECS:
        assert spec.name in text, spec.name
    for subject in ("citation", "confidence", "pinakes_links", "<evidence>", "pnk sync"):
        assert subject in text


def test_install_skill_puts_the_shipped_file_where_claude_code_reads_skills(
        kb: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from pinakes.cli import main

    # The shared development venv maps `pinakes.templates` to another checkout: read this one's.
    monkeypatch.setattr(mcp_config, "skill_source", lambda: SKILL.read_text(encoding="utf-8"))
    project = tmp_path / "project"
    project.mkdir()
    argv = ["-C", str(kb), "mcp-config", "--client", "claude-code", "--write", "--project", str(project),
            "--install-skill"]
    assert main(argv) == 0
    installed = project / ".claude" / "skills" / "pinakes" / "SKILL.md"
    assert installed.read_text(encoding="utf-8") == SKILL.read_text(encoding="utf-8")
    assert json.loads((project / ".mcp.json").read_text(encoding="utf-8"))["mcpServers"]["pinakes-field-notes"]
    installed.write_text("my own edits\n", encoding="utf-8")
    assert main(argv) != 0  # an edited skill is not replaced without --force
    assert "differs from the skill" in capsys.readouterr().err
    assert installed.read_text(encoding="utf-8") == "my own edits\n"
    assert main([*argv, "--force"]) == 0
    assert installed.read_text(encoding="utf-8") == SKILL.read_text(encoding="utf-8")


def test_the_skill_has_no_folder_for_a_client_without_one(kb: Path, tmp_path: Path) -> None:
    out = pnk("-C", str(kb), "mcp-config", "--client", "cursor", "--install-skill", cwd=tmp_path)
    assert out.returncode != 0 and "--print-skill" in out.stderr
