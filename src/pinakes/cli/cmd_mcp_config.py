"""`pnk mcp-config --client NAME`: the MCP server entry for this KB, printed, or with `--write`
merged into the client's own config file (a backup beside it; every other entry kept byte for byte).
`--install-skill` also puts the agent skill file where the client reads skills."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from pinakes.cli.command import Command, CommandArgs, Subcommands

# The clients of pinakes.serve.mcp_config.CLIENTS, in its order (tests/test_mcp_config.py holds
# them equal): the parser is built on every `pnk` invocation and must not import the server.
CLIENT_NAMES = ("claude-code", "claude-desktop", "cursor", "vscode", "windsurf")


@dataclass(frozen=True, kw_only=True)
class McpConfigArgs(CommandArgs):
    client: str | None
    name: str | None
    write: bool
    config_file: Path | None
    project: Path | None
    force: bool
    install_skill: bool
    print_skill: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "mcp-config", parents=[common],
        help="the MCP server entry for this KB, for an agent's client (--write merges it into its config)",
        description="Print the MCP server entry that serves this KB (absolute paths: this installation's "
                    "Python and the KB's root) in the form the client's config file takes. With --write, set "
                    "it in that file: every other byte is kept, and the file as it was is copied beside it "
                    "first (FILE.pnk-backup-TIME). Config files: claude-code .mcp.json in the project "
                    "directory; claude-desktop Claude's claude_desktop_config.json; cursor ~/.cursor/mcp.json; "
                    "vscode .vscode/mcp.json; windsurf ~/.codeium/windsurf/mcp_config.json.",
        epilog="example: pnk -C ~/kb/notes mcp-config --client claude-code --write --install-skill",
    )
    parser.add_argument("--client", choices=CLIENT_NAMES, default=None, help="which MCP client")
    parser.add_argument("--name", metavar="NAME", default=None,
                        help="the server's name in the client (default: pinakes-<KB alias>)")
    parser.add_argument("--write", action="store_true",
                        help="set the entry in the client's config file instead of printing it")
    parser.add_argument("--config-file", metavar="PATH", type=Path, default=None,
                        help="with --write: this file instead of the client's usual one")
    parser.add_argument("--project", metavar="DIR", type=Path, default=None,
                        help="the project directory of claude-code and vscode (default: the current directory)")
    parser.add_argument("--force", action="store_true",
                        help="replace an entry of the same name that runs something else, or an edited skill file")
    parser.add_argument("--install-skill", action="store_true",
                        help="also install the agent skill file (claude-code: .claude/skills/pinakes/SKILL.md)")
    parser.add_argument("--print-skill", action="store_true",
                        help="print the agent skill file (how to search, cite, read confidence, follow links)")
    parser.set_defaults(run=Command(McpConfigArgs, run))


def run(args: McpConfigArgs) -> int:
    import sys

    from pinakes.errors import UsageError
    from pinakes.serve.config import alias_from_name, load_kb
    from pinakes.serve.mcp_config import (
        CLIENTS,
        install_skill,
        server_entry,
        skill_path,
        skill_source,
        snippet,
        write_entry,
    )

    if args.print_skill:
        print(skill_source(), end="")
        return 0
    if args.client is None:
        raise UsageError("--client is required", remedy=f"pass --client with one of: {', '.join(CLIENT_NAMES)}")
    if args.config_file is not None and not args.write:
        raise UsageError("--config-file applies to --write", remedy="add --write, or drop --config-file")
    client = CLIENTS[args.client]
    kb = load_kb(args.kb_dir or ".")
    name = args.name or f"pinakes-{alias_from_name(kb.name)}"
    entry = server_entry(client, kb.root)
    project = (args.project or Path.cwd()).absolute()
    if not args.write:
        print(json.dumps(snippet(client, name, entry), indent=2, ensure_ascii=False))
        where = client.config_path(project, Path.home())
        print(f"add it to {where} (or run this command again with --write)", file=sys.stderr)
    else:
        path = (args.config_file or client.config_path(project, Path.home())).absolute()
        written = write_entry(path, client, name, entry, force=args.force)
        if not written.changed:
            print(f"{path}: {name} is already there, as it would be written; nothing changed")
        else:
            kept = f" (the file as it was: {written.backup})" if written.backup else " (a new file)"
            print(f"{path}: set {name}{kept}")
    if args.install_skill:
        target = skill_path(client, project)
        installed = install_skill(target, skill_source(), force=args.force)
        print(f"{target}: {'installed the agent skill' if installed else 'the agent skill is already there'}")
    return 0
