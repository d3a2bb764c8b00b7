"""`pnk init [DIR] [--name NAME] [--template NAME] [--ci]`: create a new KB; `--list-templates`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pinakes.cli.command import Command, CommandArgs, Registered, Subcommands

if TYPE_CHECKING:
    from pinakes.init import RemoteEmbeddingChoice


# --embedding's default: the local model init_kb picks (fastembed or sentence-transformers, as installed).
LOCAL = "local"


@dataclass(frozen=True, kw_only=True)
class InitArgs(CommandArgs):
    dir: str
    name: str | None
    template: str
    list_templates: bool
    ci: bool
    embedding: str  # LOCAL, or a provider of the registry whose model runs behind an endpoint
    base_url: str | None
    model: str | None
    dim: int | None
    api_key_env: str | None
    json: bool


def register(subparsers: Subcommands, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "init", help="create a new KB in DIR (default: the current directory)",
        description="Create a new KB from a template: mint its ULID, write pinakes.toml (recording "
                    "[kb] template = NAME@VERSION), docs/ and a .gitignore covering .pinakes/. Refuses to "
                    "touch an existing KB or to nest one in another.",
    )
    parser.add_argument("dir", nargs="?", default=".", help="directory to create the KB in")
    parser.add_argument("--name", help="the KB's name (default: the directory's name)")
    parser.add_argument("--template", default="default",
                        help="the template to stamp the KB from (see --list-templates)")
    parser.add_argument("--list-templates", action="store_true",
                        help="list the installed templates with their versions, and create nothing")
    parser.add_argument("--ci", action="store_true",
                        help="also write the GitHub Actions workflow (as `pnk ci init` does)")
    parser.add_argument("--embedding", metavar="WHERE", choices=Registered(_embedding_choices), default=LOCAL,
                        help="where the KB's embedding model runs, one of %(choices)s: local is in process (the "
                             "default model), openai-compatible behind an OpenAI-compatible /v1/embeddings "
                             "endpoint (Ollama, vLLM, TEI, OpenAI...)")
    parser.add_argument("--base-url", help="with --embedding openai-compatible: the endpoint's root, e.g. "
                                           "http://127.0.0.1:11434/v1")
    parser.add_argument("--model", help="with --embedding openai-compatible: the model name the server knows")
    parser.add_argument("--dim", type=int, help="with --embedding openai-compatible: the vectors' dimension "
                                               "(default: read from one request to the endpoint)")
    parser.add_argument("--api-key-env", help="with --embedding openai-compatible: the NAME of the environment "
                                              "variable holding the key (the key itself is never written)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(run=Command(InitArgs, run))


def _embedding_choices() -> tuple[str, ...]:
    from pinakes.embed.registry import endpoint_providers

    return (LOCAL, *endpoint_providers())


def run(args: InitArgs) -> int:
    from pinakes.init import init_kb

    if args.list_templates:
        return _list_templates(args.json)
    if args.ci:  # refused before anything is created when a CI runner could not install this Pinakes
        from pinakes.ci import install_requirement
        from pinakes.ci.steps import PDF_EXTRAS

        install_requirement(None, PDF_EXTRAS)
    created = init_kb(Path(args.dir), name=args.name, template=args.template, remote=_remote_choice(args))
    workflow = None
    if args.ci:
        from pinakes.ci import write_workflow

        workflow = write_workflow(created.root)
    from pinakes.embed.registry import PROVIDERS

    extra = PROVIDERS[created.embedding_provider].extra
    if args.json:
        import json

        from pinakes.cli.cmd_ci import result_dict

        print(json.dumps({
            "ok": True, "root": str(created.root), "id": created.kb_id, "name": created.name,
            "template": created.template,
            "embedding_provider": created.embedding_provider,
            "embedding_provider_installed": created.embedding_provider_installed,
            "gitignore": created.gitignore,
            "readme": created.readme,
            "ci": result_dict(workflow) if workflow is not None else None,
        }, indent=2))
        return 0
    print(f"created KB {created.name!r} ({created.kb_id}) in {created.root}")
    print(f"  pinakes.toml  template {created.template}, embedding provider: {created.embedding_provider}")
    print("  docs/         put your documents here")
    print(f"  .gitignore    {created.gitignore} (.pinakes/ is derived state and stays out of git)")
    if created.readme != "none":
        print(f"  README.md     {created.readme} (what template {created.template} tunes, and why)")
    if not created.embedding_provider_installed:
        from pinakes.distribution import pip_install

        print(f"note: {created.embedding_provider} is not installed; `pnk sync` will need "
              f"`{pip_install((extra,) if extra else ())}`")
    if workflow is not None:
        from pinakes.cli.cmd_ci import print_result

        print_result(workflow)
    print("next: put documents under docs/ and run `pnk sync`")
    return 0


def _remote_choice(args: InitArgs) -> RemoteEmbeddingChoice | None:
    """The endpoint --embedding openai-compatible names; the dimension asked of it when not given."""
    from pinakes.errors import UsageError
    from pinakes.init import RemoteEmbeddingChoice

    if args.embedding == LOCAL:
        remote_flags = {"--base-url": args.base_url, "--model": args.model, "--dim": args.dim,
                        "--api-key-env": args.api_key_env}
        given = [flag for flag, value in remote_flags.items() if value is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only {'applies' if len(given) == 1 else 'apply'} with "
                             "--embedding openai-compatible",
                             remedy="pnk init --embedding openai-compatible --base-url URL --model NAME")
        return None
    if not args.base_url or not args.model:
        raise UsageError("--embedding openai-compatible needs --base-url and --model",
                         remedy="pnk init --embedding openai-compatible --base-url http://127.0.0.1:11434/v1 "
                                "--model nomic-embed-text")
    dim = args.dim
    if dim is None:
        from pinakes.embed.provider_openai import read_dimension

        dim = read_dimension(args.base_url, args.model, args.api_key_env)
    elif dim < 1:
        raise UsageError(f"--dim must be a positive integer, got {dim}", remedy="--dim 768")
    return RemoteEmbeddingChoice(args.base_url, args.model, dim, args.api_key_env, provider=args.embedding)


def _list_templates(as_json: bool) -> int:
    from pinakes.template_catalog import TemplateCatalog

    templates = TemplateCatalog().templates()
    if as_json:
        import json

        print(json.dumps([{"name": t.name, "version": t.version, "ref": t.ref, "description": t.description,
                           "prompts": list(t.prompts)} for t in templates], indent=2))
        return 0
    width = max(len(t.ref) for t in templates)
    for template in templates:
        print(f"{template.ref:<{width}}  {template.description}")
    return 0
