"""`pnk mcp-config`: the MCP server entry that serves this KB, for one client, and its config file.

The entry runs this installation's interpreter with absolute paths (`/venv/bin/python -m pinakes
serve --kb /abs/kb`): a client starts servers without the user's shell, so neither a relative path
nor a `pnk` found on PATH can be counted on. Where each client keeps its servers, and under which
key, is what its own documentation says (checked when this was written, 2026-12):

    claude-code     .mcp.json in the project directory (Claude Code's project scope)  mcpServers
    claude-desktop  macOS ~/Library/Application Support/Claude/claude_desktop_config.json,
                    Windows %APPDATA%\\Claude\\claude_desktop_config.json,
                    elsewhere ~/.config/Claude/claude_desktop_config.json            mcpServers
    cursor          ~/.cursor/mcp.json (every project; .cursor/mcp.json for one)      mcpServers
    vscode          .vscode/mcp.json in the workspace, each entry "type": "stdio"     servers
    windsurf        ~/.codeium/windsurf/mcp_config.json                               mcpServers

`write_entry` changes that file by one member (json_splice.py): every other byte, other servers'
entries and the file's formatting and comments included, is kept; the file as it was is copied
beside it first. An entry of the same name that differs is replaced only when asked (`force`).

The agent skill file (`templates/skill/SKILL.md`: how to search, cite, read confidence and follow
links with these tools) is installed where a client reads skills: Claude Code's
`.claude/skills/pinakes/SKILL.md` in the project directory.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from pinakes.errors import PinakesError, UsageError, filesystem_error
from pinakes.serve.json_splice import JSONSpliceError, loads, set_member

SKILL_NAME = "pinakes"


@dataclass(frozen=True)
class Client:
    name: str
    key: str  # the config's object of servers
    stdio_type: bool  # each entry says "type": "stdio"
    scope: str  # where the file is, in words (for --help and the docs)

    def config_path(self, project: Path, home: Path, environ: dict[str, str] | None = None) -> Path:
        environ = dict(os.environ) if environ is None else environ
        if self.name == "claude-code":
            return project / ".mcp.json"
        if self.name == "vscode":
            return project / ".vscode" / "mcp.json"
        if self.name == "cursor":
            return home / ".cursor" / "mcp.json"
        if self.name == "windsurf":
            return home / ".codeium" / "windsurf" / "mcp_config.json"
        if sys.platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if sys.platform == "win32":
            return Path(environ.get("APPDATA", home / "AppData" / "Roaming")) / "Claude" / "claude_desktop_config.json"
        return Path(environ.get("XDG_CONFIG_HOME", home / ".config")) / "Claude" / "claude_desktop_config.json"


CLIENTS: dict[str, Client] = {client.name: client for client in (
    Client("claude-code", "mcpServers", False, ".mcp.json in the project directory"),
    Client("claude-desktop", "mcpServers", False, "claude_desktop_config.json in Claude's app folder"),
    Client("cursor", "mcpServers", False, "~/.cursor/mcp.json"),
    Client("vscode", "servers", True, ".vscode/mcp.json in the workspace"),
    Client("windsurf", "mcpServers", False, "~/.codeium/windsurf/mcp_config.json"),
)}


def server_entry(client: Client, kb_root: Path, python: str | None = None) -> dict[str, object]:
    """The entry that starts `pnk serve` for the KB at `kb_root` from this installation."""
    entry: dict[str, object] = {}
    if client.stdio_type:
        entry["type"] = "stdio"
    # sys.executable as it is: resolving a virtualenv's interpreter link would leave the virtualenv.
    entry["command"] = python or sys.executable
    entry["args"] = ["-m", "pinakes", "serve", "--kb", str(kb_root)]
    return entry


def snippet(client: Client, name: str, entry: dict[str, object]) -> dict[str, object]:
    """What to paste into the client's config file: its object of servers holding the entry."""
    return {client.key: {name: entry}}


@dataclass(frozen=True)
class Written:
    path: Path
    backup: Path | None  # the file as it was, None when it did not exist
    changed: bool  # False: the same entry was there already


def write_entry(path: Path, client: Client, name: str, entry: dict[str, object], *, force: bool) -> Written:
    """Set the entry `name` in the config file at `path` (created when missing), keeping every other
    byte; the file as it was is copied to `<file>.pnk-backup-<UTC time>` first."""
    from pinakes.atomic import atomic_write_text

    try:
        original = path.read_text(encoding="utf-8") if path.exists() else None
    except (OSError, UnicodeDecodeError) as exc:
        raise _unreadable(path, exc) from exc
    if original is None or not original.strip():
        text = set_member("{}", (client.key, name), entry) + "\n"
    else:
        current = _servers(path, original, client)
        if current.get(name) == entry:
            return Written(path, None, changed=False)
        if name in current and not force:
            raise UsageError(f"{path} already has an MCP server named {name!r}, with another command: "
                             f"{current[name]}", remedy="pass --name to add this KB under another name, or "
                                                       "--force to replace that entry", path=path)
        text = set_member(original, (client.key, name), entry)
        _check_kept(path, original, text, client, name, entry)
    backup = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if original is not None:
            backup = path.with_name(f"{path.name}.pnk-backup-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}")
            shutil.copy2(path, backup)
        atomic_write_text(path, text)
    except OSError as exc:
        raise filesystem_error(path, exc, "write the MCP client's config", "nothing was changed in it") from exc
    return Written(path, backup, changed=True)


def _servers(path: Path, text: str, client: Client) -> dict[str, object]:
    try:
        document = loads(text)
    except ValueError as exc:
        raise _unreadable(path, exc) from exc
    if not isinstance(document, dict):
        raise _unreadable(path, ValueError("its top level is not an object"))
    servers: object = cast("dict[str, object]", document).get(client.key, {})  # a JSON object: str keys
    if not isinstance(servers, dict):
        raise _unreadable(path, ValueError(f"`{client.key}` is not an object"))
    return {str(key): value for key, value in cast("dict[str, object]", servers).items()}


def _check_kept(path: Path, before: str, after: str, client: Client, name: str, entry: dict[str, object]) -> None:
    """The spliced file reads back as the old one with exactly this entry set (a Pinakes bug otherwise)."""
    try:
        old, new = loads(before), loads(after)
    except ValueError as exc:
        raise _unreadable(path, exc) from exc
    assert isinstance(old, dict) and isinstance(new, dict)
    expected = dict(cast("dict[str, object]", old))
    servers = dict(cast("dict[str, object]", expected.get(client.key) or {}))
    servers[name] = entry
    expected[client.key] = servers
    if new != expected:
        raise PinakesError(f"the edit of {path} did not read back as intended; the file was left as it was",
                           remedy="report this as a Pinakes bug, and add the entry by hand (pnk mcp-config prints it)",
                           path=path)


def _unreadable(path: Path, exc: Exception) -> UsageError:
    detail = str(exc) if isinstance(exc, JSONSpliceError | ValueError) else (getattr(exc, "strerror", None) or str(exc))
    return UsageError(f"{path} cannot be read as a JSON config ({detail}); it was left as it is",
                      remedy="fix or move the file, then run the command again; or paste the entry "
                             "`pnk mcp-config` prints by hand", path=path)


# -- the skill file ----------------------------------------------------------------------------------


def skill_source() -> str:
    """The skill file this installation ships (`templates/skill/SKILL.md`)."""
    from importlib import resources

    return (resources.files("pinakes.templates") / "skill" / "SKILL.md").read_text(encoding="utf-8")


def skill_path(client: Client, project: Path) -> Path:
    if client.name != "claude-code":
        raise UsageError(f"{client.name} has no skills folder Pinakes knows of",
                         remedy="print the skill with `pnk mcp-config --print-skill` and put it where the "
                                "client reads instructions (Claude Code reads .claude/skills/)")
    return project / ".claude" / "skills" / SKILL_NAME / "SKILL.md"


def install_skill(path: Path, text: str, *, force: bool) -> bool:
    """Write the skill file at `path`; False when it was already there as shipped. An edited copy is
    replaced only with `force`."""
    from pinakes.atomic import atomic_write_text

    if path.exists():
        try:
            if path.read_text(encoding="utf-8") == text:
                return False
        except (OSError, UnicodeDecodeError):
            pass
        if not force:
            raise UsageError(f"{path} exists and differs from the skill this Pinakes ships",
                             remedy="pass --force to replace it (yours is not kept), or move it away", path=path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
    except OSError as exc:
        raise filesystem_error(path, exc, "write the skill file", "nothing was installed") from exc
    return True
