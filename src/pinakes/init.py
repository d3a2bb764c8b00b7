"""`pnk init`: stamp a new KB out of a template (spec §2, §6.1; the templates: `template_catalog`).

A KB is `pinakes.toml` + `docs/` + a `.gitignore` covering `.pinakes/` and the manifest backups
(`pinakes.toml.*.bak`) + the template's README, which says what the template tunes. The manifest records the
template it was stamped from as `NAME@VERSION` (`[kb] template`), which is what `pnk upgrade` later
compares against the installed version. Init refuses to touch a
directory that already is a KB, or one inside another KB: a KB's identity is its permanent ULID,
and overwriting or nesting one silently would orphan every link that addresses it.

The manifest is written last, atomically and only if absent at that instant, so an interrupted
init leaves a directory that a re-run completes, and two concurrent inits cannot both win.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Generator
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Literal

from ulid import ULID

from pinakes.atomic import atomic_write_bytes
from pinakes.errors import FilesystemError, PinakesError, UsageError
from pinakes.kb import MANIFEST_NAME
from pinakes.manifest import parse_manifest
from pinakes.manifest.rewrite import GitignoreAction, ensure_gitignore
from pinakes.template_catalog import DEFAULT_TEMPLATE, RenderValues, TemplateCatalog, render

TEMPLATE_NAME = DEFAULT_TEMPLATE
DOCS_DIR_NAME = "docs"
README_NAME = "README.md"

ReadmeAction = Literal["created", "kept", "none"]  # kept: the directory had a README.md of its own


@dataclass(frozen=True)
class InitResult:
    root: Path
    kb_id: str
    name: str
    template: str  # NAME@VERSION, as the manifest records it
    embedding_provider: str
    embedding_provider_installed: bool
    gitignore: GitignoreAction = "created"
    readme: ReadmeAction = "none"


def default_embedding_provider() -> tuple[str, bool]:
    """The provider a new KB names, and whether it is installed. Located, never imported: importing
    sentence-transformers pulls torch, which `pnk init` has no use for.

    fastembed is preferred when present. Measured on this project's machines (docs/PERFORMANCE.md):
    it starts in 0.8 s against 4.3 s for torch + sentence-transformers, which every cold `pnk search`
    and hook-driven sync pays, and its int8 model embedded the demo KB ~5x faster on a CPU with VNNI
    at the same retrieval quality. On an AVX2-only CPU int8 embeds slower than fp32; a KB that syncs
    large corpora there can name sentence-transformers instead (embed/registry.py NEW_KB_PROVIDERS)."""
    from pinakes.embed.registry import NEW_KB_PROVIDERS

    for name in NEW_KB_PROVIDERS:
        if provider_installed(name):
            return name, True
    return NEW_KB_PROVIDERS[0], False  # named for the remedy: the lighter extra, [light]


def provider_installed(name: str) -> bool:
    """Whether the module provider `name`'s extra installs is importable (located, never imported)."""
    from pinakes.embed.registry import PROVIDERS

    requires = PROVIDERS[name].requires
    return requires is None or find_spec(requires) is not None


def render_manifest(name: str, kb_id: str, embedding_provider: str, template: str = TEMPLATE_NAME,
                    catalog: TemplateCatalog | None = None) -> str:
    """Template `template`'s pinakes.toml (its installed version) for a KB called `name` with ULID `kb_id`."""
    catalog = catalog or TemplateCatalog()
    info = catalog.get(template)
    return render(catalog.manifest_source(template), RenderValues(name, kb_id, embedding_provider), info.ref)


@dataclass(frozen=True)
class RemoteEmbeddingChoice:
    """`pnk init --embedding openai-compatible`: the endpoint the new KB embeds through."""

    base_url: str
    model: str
    dim: int
    api_key_env: str | None = None
    provider: str = "openai-compatible"  # a provider of the registry whose model runs behind an endpoint


def remote_embedding_block(choice: RemoteEmbeddingChoice) -> str:
    """The [embedding] section for a remote endpoint (docs/GUIDE.md explains each key)."""
    key = (f'api_key_env = "{choice.api_key_env}"       # the variable holding the key (never the key)'
           if choice.api_key_env else '# api_key_env = "OPENAI_API_KEY"  # the variable holding a key, if the server wants one')
    return "\n".join([
        "[embedding]",
        "# A remote OpenAI-compatible /v1/embeddings endpoint. The index is only as good as this",
        "# server: sync and every vector search need it reachable (a search falls back to keywords).",
        f"provider = {json.dumps(choice.provider)}",
        f"base_url = {json.dumps(choice.base_url)}",
        f"model = {json.dumps(choice.model)}",
        f"dim = {choice.dim}",
        key,
        "# batch_size = 32",
        "# concurrency = 4                   # requests in flight during a sync",
        "# timeout_s = 60                    # one whole request, connect to last byte",
        "# search_timeout_s = 10             # all a search waits on the server before keyword results",
        "# max_input_tokens = 512            # the model's input limit, counted by `tokenizer`",
        '# tokenizer = "tokenizer.json"      # the model\'s tokenizer file; without it UTF-8 bytes bound tokens',
        '# input_usd_per_mtok = "0.02"       # a price: every request then goes through [budget]',
        "",
    ]) + "\n"


def _with_embedding_block(manifest_text: str, block: str) -> str:
    """`manifest_text` with its [embedding] section (up to the next section) replaced by `block`."""
    start = manifest_text.index("\n[embedding]\n") + 1
    end = manifest_text.index("\n[", start) + 1
    return manifest_text[:start] + block + manifest_text[end:]


def init_kb(directory: Path, name: str | None = None, template: str = TEMPLATE_NAME,
            catalog: TemplateCatalog | None = None, remote: RemoteEmbeddingChoice | None = None) -> InitResult:
    """Create a KB in `directory` (created if needed) from `template`. Refuses an existing or nested
    KB. `remote`: embed through that endpoint instead of the local default model."""
    catalog = catalog or TemplateCatalog()
    info = catalog.get(template)  # an unknown name is refused before anything is touched
    root = Path(directory).expanduser().resolve()
    _refuse_unsuitable(root)
    kb_name = _kb_name(root, name)
    kb_id = str(ULID())
    provider, installed = default_embedding_provider()  # [rerank] stays local whatever embeds
    manifest_text = render_manifest(kb_name, kb_id, provider, template, catalog)
    if remote is not None:
        manifest_text = _with_embedding_block(manifest_text, remote_embedding_block(remote))
        provider, installed = remote.provider, provider_installed(remote.provider)
    manifest_path = root / MANIFEST_NAME
    parse_manifest(manifest_text, path=manifest_path)  # a template that does not load is a bug here

    with _filesystem_errors(root):
        root.mkdir(parents=True, exist_ok=True)
        (root / DOCS_DIR_NAME).mkdir(exist_ok=True)
    with _filesystem_errors(root / ".gitignore"):
        gitignore = ensure_gitignore(root / ".gitignore", catalog.gitignore_block(template))
    readme = _copy_readme(root / README_NAME, catalog.readme(template))
    try:
        atomic_write_bytes(manifest_path, manifest_text.encode("utf-8"), exclusive=True)
    except FileExistsError:  # another init won the race since the check above
        raise _already_a_kb(root) from None
    return InitResult(root=root, kb_id=kb_id, name=kb_name, embedding_provider=provider,
                      embedding_provider_installed=installed, gitignore=gitignore, readme=readme,
                      template=info.ref)


def _refuse_unsuitable(root: Path) -> None:
    if root.exists() and not root.is_dir():
        raise UsageError(f"{root} exists and is not a directory", remedy="choose a directory",
                         path=root)
    if (root / MANIFEST_NAME).exists():
        raise _already_a_kb(root)
    for parent in root.parents:
        if (parent / MANIFEST_NAME).is_file():
            raise UsageError(
                f"{root} is inside this KB; a KB cannot be created inside another KB",
                remedy=f"choose a directory outside {parent}, or put the documents under that "
                       "KB's [sources] roots",
                path=parent / MANIFEST_NAME,
            )


def _already_a_kb(root: Path) -> UsageError:
    return UsageError(
        f"{root} is already a Pinakes KB; nothing was changed",
        remedy="use it as it is (`pnk sync`), or choose another directory",
        path=root / MANIFEST_NAME,
    )


def _kb_name(root: Path, name: str | None) -> str:
    chosen = root.name if name is None else name
    if not chosen.strip():
        raise UsageError("the KB name is empty", remedy="pass --name NAME")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in chosen):
        raise UsageError(f"the KB name {chosen!r} contains control characters",
                         remedy="pass --name with printable characters only")
    return chosen


def _copy_readme(path: Path, text: str | None) -> ReadmeAction:
    """The template's README (what it tunes and why) beside the manifest, unless the directory has
    a README.md of its own."""
    if text is None:
        return "none"
    with _filesystem_errors(path):
        try:
            atomic_write_bytes(path, text.encode("utf-8"), exclusive=True)
        except FileExistsError:
            return "kept"
    return "created"


@contextlib.contextmanager
def _filesystem_errors(path: Path) -> Generator[None]:
    """Turn an OSError from a step that `atomic` does not cover (mkdir, read) into a FilesystemError."""
    try:
        yield
    except PinakesError:
        raise
    except OSError as exc:
        raise FilesystemError(
            f"cannot create {exc.filename or path}: {exc.strerror or exc}",
            remedy="check the directory's permissions and free space",
            path=path,
        ) from exc
