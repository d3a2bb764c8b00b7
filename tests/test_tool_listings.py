"""Every place that lists the MCP server's tools lists all of them, in the server's order: `pnk --help`
(its `serve` line, written by hand so `pnk` does not import the server to print help) and every
paragraph of the docs that names more than two tools. The tool table in GUIDE.md is generated from
the same specs (docs/generate.py)."""

from __future__ import annotations

import re

import pytest

from pinakes.cli import build_parser
from pinakes.serve.specs import TOOL_SPECS
from tests.conftest import REPO_ROOT

TOOLS = [spec.name for spec in TOOL_SPECS]
# Pages a person reads for what the server offers.
PAGES = ["README.md", "STATUS.md", "docs/CLI.md", "docs/GUIDE.md", "docs/architecture.md"]
TOOL_NAME = re.compile(r"\bpinakes_[a-z_]+\b")


def named_tools(text: str) -> list[str]:
    return list(dict.fromkeys(name for name in TOOL_NAME.findall(text) if name in TOOLS))


def test_pnk_help_lists_every_tool_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    serve_line = help_text[help_text.index("MCP server for agents:"):]
    assert named_tools(serve_line)[:len(TOOLS)] == TOOLS, serve_line


def listings(text: str) -> list[str]:
    """A page cut where a list of tools would sit: each table row alone, each other paragraph whole."""
    units: list[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        rows = [line for line in paragraph.splitlines() if line.lstrip().startswith("|")]
        units += rows if rows else [paragraph]
    return units


@pytest.mark.parametrize("page", PAGES)
def test_a_paragraph_that_lists_the_tools_lists_them_all(page: str) -> None:
    for listing in listings((REPO_ROOT / page).read_text(encoding="utf-8")):
        named = named_tools(listing)
        if len(named) > 2:
            assert set(named) == set(TOOLS), f"{page}: names {named}, not {TOOLS}:\n{listing}"


def test_the_check_catches_a_listing_that_misses_a_tool() -> None:
    stale = "| MCP server | `pinakes_search`, `pinakes_get`, `pinakes_list_kbs`; read-only |"
    assert [len(named_tools(unit)) for unit in listings(f"intro\n\n{stale}\n| other | row |")] == [0, 3, 0]
