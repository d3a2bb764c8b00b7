"""`pnk serve`: the MCP server for agents (stdio by default, `--http` for 127.0.0.1 only).

It serves only the KBs named here — `--kb DIR` (repeatable; `ALIAS=DIR` names one), `--config
FILE`, or by default the KB containing the current directory (or -C DIR) — and every one must load
before the server answers anything. Tools are read-only and never spend money.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from pinakes.cli.command import Command, CommandArgs, Subcommands


@dataclass(frozen=True, kw_only=True)
class ServeArgs(CommandArgs):
    kbs: list[str]
    config: str | None
    http: bool
    port: int | None


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "serve", parents=[common],
        # every tool of pinakes.serve.specs.TOOL_SPECS, in its order (tests/test_tool_listings.py): the
        # specs are not imported here, since every `pnk` invocation builds this parser
        help="MCP server for agents: pinakes_search, pinakes_get, pinakes_links, pinakes_status, pinakes_list_kbs",
        description="Serve KBs to an agent over MCP (stdio by default). Tools are read-only, take no "
                    "filesystem paths, and follow syncs and rebuilds as they happen.",
        epilog="examples:\n  pnk serve --kb ~/kb/notes\n  pnk serve --kb notes=~/kb/notes --kb work=~/kb/work\n"
               "  claude mcp add pinakes -- pnk serve --kb /path/to/kb",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kb", dest="kbs", action="append", metavar="[ALIAS=]DIR", default=[],
                        help="serve the KB containing DIR (repeatable; the first is the default KB)")
    parser.add_argument("--config", metavar="FILE",
                        help="serve the KBs listed in a TOML file ([[kb]] path = ..., alias = ...)")
    parser.add_argument("--http", action="store_true",
                        help="serve streamable HTTP on 127.0.0.1 instead of stdio")
    parser.add_argument("--port", type=int, metavar="PORT", default=None,
                        help="port for --http (default 8765)")
    parser.set_defaults(run=Command(ServeArgs, run))


def run(args: ServeArgs) -> int:
    from pinakes.search.threads import prefer_one_blas_thread

    prefer_one_blas_thread()  # before anything imports NumPy
    from pinakes.errors import UsageError
    from pinakes.serve.config import resolve_served_kbs

    if args.port is not None and not args.http:
        raise UsageError("--port applies to --http", remedy="add --http, or drop --port")
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, got {args.port}", remedy="pass --port 8765")
    served = resolve_served_kbs(args.kbs, args.config, args.kb_dir)

    from pinakes.serve.server import DEFAULT_HTTP_PORT, LOOPBACK, announce, run_http, run_stdio
    from pinakes.serve.tools import PinakesTools

    tools = PinakesTools(served)
    try:
        if args.http:
            port = args.port or DEFAULT_HTTP_PORT
            announce(tools, f"streamable HTTP at http://{LOOPBACK}:{port}/mcp")
            run_http(tools, port)
        else:
            announce(tools, "stdio")
            run_stdio(tools)
    finally:
        tools.close()
    return 0
