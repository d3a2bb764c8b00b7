"""`pnk ci init`: write the GitHub Actions workflow that keeps an existing KB fresh in CI."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pinakes.cli.command import Command, CommandArgs, Subcommands

if TYPE_CHECKING:
    from pinakes.ci import WorkflowResult


@dataclass(frozen=True, kw_only=True)
class CiArgs(CommandArgs):
    action: Literal["init"]
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "ci", parents=[common], help="write the CI workflow that syncs the KB and gates its quality",
        description="init: write .github/workflows/pinakes.yml (pinakes-<path>.yml for a KB in a "
                    "subdirectory) at the top of the KB's git repository: install exactly this Pinakes, from "
                    "where it came (or the manifest's [ci] install; refused when a runner cannot reach it), "
                    "with the extras the manifest needs (the embedding provider's, the reranker's when search "
                    "reranks, [pdf] when the KB can hold PDFs, [formats] when it indexes HTML, EPUB, DOCX or ODT; [light,pdf,formats] by default), restore .pinakes/ and "
                    "the model cache from the Actions cache, run `pnk sync --extract=pypdfium2 --executor "
                    "local` (the free extractor, as the hooks do; in the job's own process), run `pnk eval` "
                    "as a quality gate (it prints a skip when the KB has no golden set), save the cache. "
                    "Re-running regenerates a workflow Pinakes wrote; any other file is left alone.",
    )
    parser.add_argument("action", choices=("init",), help="what to do (init: write the workflow)")
    parser.add_argument("--json", action="store_true", help="print what was written as JSON")
    parser.set_defaults(run=Command(CiArgs, run))


def run(args: CiArgs) -> int:
    from pinakes.ci import write_workflow
    from pinakes.kb import find_kb_root

    result = write_workflow(find_kb_root(args.kb_dir))
    if args.json:
        import json

        print(json.dumps(result_dict(result), indent=2))
    else:
        print_result(result)
    return 0


def result_dict(result: WorkflowResult) -> dict[str, object]:
    return {"ok": True, "workflow": str(result.path), "action": result.action, "kb_path": result.kb_relative,
            "in_git": result.in_git, "golden_set": result.has_golden_set}


def print_result(result: WorkflowResult) -> None:
    """What `pnk ci init` and `pnk init --ci` print, the free-extractor line included (spec §6.3)."""
    from pinakes.display import printable
    from pinakes.hooks import FREE_EXTRACTOR_NOTE

    print(f"{result.action} {printable(str(result.path))}")
    print(FREE_EXTRACTOR_NOTE.lstrip("# "))
    if not result.in_git:
        print("note: the KB is not in a git repository yet; the workflow assumes the KB is the repository's "
              "top (`git init` here, commit, push)")
    if not result.has_golden_set:
        print("note: the KB has no golden set yet, so the eval step prints a skip; `pnk eval --init` drafts "
              "one and `pnk eval --update-baseline` makes it a gate")
