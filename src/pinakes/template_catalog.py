"""The templates a KB can be stamped from, and the archive of every version they ever shipped
(spec §6.1).

A template is a directory of `templates/` (packaged as `pinakes.templates`) holding `template.toml`
(its name, its OWN version and a one-line description), `pinakes.toml` (the manifest it renders),
and optionally `README.md`, `gitignore` and `prompts/` (synthesis prompts for `pnk ask --deep`). A
template ships no golden set: it scaffolds an empty docs/, so any question it shipped would name a
document that does not exist (spec §7).

The archive, `templates/archive/<name>/<version>/`, freezes the manifest template (and the prompts)
of every released version, each file's SHA-256 in `templates/archive/SHA256SUMS`. It is what lets `pnk upgrade`
diff a KB's recorded version against the installed one with both sides generated: a manifest records
only a reference, and the one copy of a template a wheel would otherwise carry is the current one.
`tests/test_templates.py` fails when a template changes without a version bump and an archived copy,
or when an archived copy changes at all.

Rendering is `string.Template` over four values, all taken from the KB (never invented), so two
renderings of two versions for the same KB differ only where the template changed.
"""

from __future__ import annotations

import hashlib
import re
import sys
import tomllib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from string import Template

from pinakes.errors import UsageError

DEFAULT_TEMPLATE = "default"
TEMPLATE_META = "template.toml"
MANIFEST_TEMPLATE = "pinakes.toml"
GITIGNORE_BLOCK = "gitignore"
README = "README.md"
PROMPTS_DIR = "prompts"
GOLDEN_SET_DIR = "eval"  # what a template must never ship (spec §7)
ARCHIVE_DIR = "archive"
ARCHIVE_SUMS = "SHA256SUMS"

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_VERSION = re.compile(r"\d+(?:\.\d+)*")


@dataclass(frozen=True)
class TemplateInfo:
    name: str
    version: str
    description: str
    prompts: tuple[str, ...] = ()  # file names under prompts/
    has_readme: bool = False

    @property
    def ref(self) -> str:
        """What `[kb] template` records: NAME@VERSION."""
        return f"{self.name}@{self.version}"


@dataclass(frozen=True)
class RenderValues:
    """The KB-specific values a manifest template is rendered with."""

    name: str
    kb_id: str
    embedding_provider: str


def parse_ref(ref: str) -> tuple[str, str]:
    """("notes", "2") for "notes@2"; a UsageError for anything that is not NAME@VERSION."""
    name, at, version = ref.partition("@")
    if not at or not _NAME.fullmatch(name) or not _VERSION.fullmatch(version):
        raise UsageError(f"{ref!r} is not a template reference NAME@VERSION", remedy='write e.g. "default@1"')
    return name, version


def version_key(version: str) -> tuple[int, ...]:
    """Versions compare numerically, part by part: 1.10 is newer than 1.9."""
    return tuple(int(part) for part in version.split("."))


def toml_string(value: str) -> str:
    """`value` as a TOML basic string."""
    escaped: list[str] = []
    for char in value:
        if char in ('"', "\\"):
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def render(source: str, values: RenderValues, ref: str) -> str:
    """A manifest template's text with the KB's values (and `ref` as `[kb] template`) filled in."""
    return Template(source).substitute(
        name=toml_string(values.name),
        kb_id=values.kb_id,
        template=ref,
        embedding_provider=values.embedding_provider,
    )


class TemplateCatalog:
    """The templates under one root: the packaged `pinakes.templates`, or a directory (tests)."""

    def __init__(self, root: Traversable | Path | None = None):
        self.root: Traversable | Path = resources.files("pinakes.templates") if root is None else root

    # --- the installed templates -----------------------------------------------------------------

    def names(self) -> list[str]:
        return sorted(entry.name for entry in self.root.iterdir()
                      if entry.is_dir() and (entry / TEMPLATE_META).is_file())

    def templates(self) -> list[TemplateInfo]:
        return [self.get(name) for name in self.names()]

    def get(self, name: str) -> TemplateInfo:
        """The installed template `name`; a UsageError listing the installed ones otherwise."""
        directory = self.root / name
        if not _NAME.fullmatch(name) or not (directory / TEMPLATE_META).is_file():
            raise UsageError(f"there is no template named {name!r}",
                             remedy="choose one of: " + ", ".join(self.names())
                                    + " (`pnk init --list-templates` describes them)")
        meta = tomllib.loads((directory / TEMPLATE_META).read_text(encoding="utf-8"))
        prompts_dir = directory / PROMPTS_DIR
        prompts = (tuple(sorted(entry.name for entry in prompts_dir.iterdir() if entry.is_file()))
                   if prompts_dir.is_dir() else ())
        return TemplateInfo(name=str(meta["name"]), version=str(meta["version"]),
                            description=str(meta.get("description", "")), prompts=prompts,
                            has_readme=(directory / README).is_file())

    def manifest_source(self, name: str) -> str:
        return (self.root / name / MANIFEST_TEMPLATE).read_text(encoding="utf-8")

    def gitignore_block(self, name: str) -> str:
        """The template's .gitignore block; the default template's when it ships none."""
        own = self.root / name / GITIGNORE_BLOCK
        chosen = own if own.is_file() else self.root / DEFAULT_TEMPLATE / GITIGNORE_BLOCK
        return chosen.read_text(encoding="utf-8")

    def readme(self, name: str) -> str | None:
        """The template's README (what it tunes and why), or None when it ships none."""
        path = self.root / name / README
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def prompt(self, name: str, filename: str) -> str:
        """One of the template's synthesis prompts (`prompts/<filename>`)."""
        return (self.root / name / PROMPTS_DIR / filename).read_text(encoding="utf-8")

    # --- the archive -----------------------------------------------------------------------------

    def archived_versions(self, name: str) -> list[str]:
        directory = self.root / ARCHIVE_DIR / name
        if not directory.is_dir():
            return []
        found = [entry.name for entry in directory.iterdir()
                 if entry.is_dir() and _VERSION.fullmatch(entry.name) and (entry / MANIFEST_TEMPLATE).is_file()]
        return sorted(found, key=version_key)

    def archived_manifest_source(self, name: str, version: str) -> str | None:
        """The manifest template of `name@version` as released, or None when it was never archived."""
        if not _NAME.fullmatch(name) or not _VERSION.fullmatch(version):
            return None
        path = self.root / ARCHIVE_DIR / name / version / MANIFEST_TEMPLATE
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def archive_sums(self) -> dict[str, str]:
        """`<name>/<version>/<file>` -> the SHA-256 recorded when that version was frozen."""
        path = self.root / ARCHIVE_DIR / ARCHIVE_SUMS
        if not path.is_file():
            return {}
        sums: dict[str, str] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip() and not line.startswith("#"):
                digest, _, relpath = line.partition("  ")
                sums[relpath.strip()] = digest.strip()
        return sums


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def frozen_files(catalog: TemplateCatalog, name: str) -> dict[str, str]:
    """What a release of template `name` freezes, by path inside the template: the manifest template
    and the synthesis prompts (what changes a KB's behaviour). README and template.toml are prose."""
    files = {MANIFEST_TEMPLATE: catalog.manifest_source(name)}
    for prompt in catalog.get(name).prompts:
        files[f"{PROMPTS_DIR}/{prompt}"] = catalog.prompt(name, prompt)
    return files


def archive_problems(catalog: TemplateCatalog) -> list[str]:
    """Every way the archive fails to freeze what the templates ship: a template that differs from
    its version's archived copy (changed without a bump), a version never archived, an archived file
    whose digest moved (a released version edited), a digest with no file, a file with no digest."""
    problems: list[str] = []
    sums = catalog.archive_sums()
    archived: dict[str, str] = {}
    for name in catalog.names():
        info = catalog.get(name)
        if info.version not in catalog.archived_versions(name):
            problems.append(f"{info.ref} has no archived copy: freeze it (templates/README.md)")
        for version in catalog.archived_versions(name):
            directory = catalog.root / ARCHIVE_DIR / name / version
            for relpath in _files_under(directory):
                archived[f"{name}/{version}/{relpath}"] = (directory / relpath).read_text(encoding="utf-8")
        if info.version in catalog.archived_versions(name):
            shipped = frozen_files(catalog, name)
            frozen = {path.split("/", 2)[2]: text for path, text in archived.items()
                      if path.startswith(f"{name}/{info.version}/")}
            for relpath in sorted(shipped.keys() | frozen.keys()):
                if shipped.get(relpath) != frozen.get(relpath):
                    problems.append(f"{info.ref}: {relpath} differs from its archived copy: a released "
                                    "version is frozen, so bump the version and freeze it")
    for relpath in sorted(archived.keys() | sums.keys()):
        if relpath not in sums:
            problems.append(f"archive/{relpath} has no digest in {ARCHIVE_SUMS}")
        elif relpath not in archived:
            problems.append(f"{ARCHIVE_SUMS} lists archive/{relpath}, which does not exist")
        elif sha256_text(archived[relpath]) != sums[relpath]:
            problems.append(f"archive/{relpath} no longer matches its digest: an archived version was edited")
    return problems


def _files_under(directory: Traversable | Path, prefix: str = "") -> list[str]:
    found: list[str] = []
    for entry in directory.iterdir():
        if entry.is_dir():
            found += _files_under(entry, f"{prefix}{entry.name}/")
        elif entry.is_file():
            found.append(prefix + entry.name)
    return found


def freeze(root: Path, name: str) -> Path:
    """Release the current version of template `name` under `root`: copy what it freezes into the
    archive and record each file's digest. Refuses to change a frozen version (bump it instead)."""
    catalog = TemplateCatalog(root)
    info = catalog.get(name)
    target = root / ARCHIVE_DIR / name / info.version
    files = frozen_files(catalog, name)
    if target.exists():
        archived = {p.relative_to(target).as_posix(): p.read_text(encoding="utf-8")
                    for p in target.rglob("*") if p.is_file()}
        if archived == files:
            return target
        raise UsageError(f"{info.ref} is already archived with other content; a released version is frozen",
                         remedy=f"bump `version` in {root / name / TEMPLATE_META}, then freeze again",
                         path=target)
    lines: list[str] = []
    for relpath, text in files.items():
        (target / relpath).parent.mkdir(parents=True, exist_ok=True)
        (target / relpath).write_text(text, encoding="utf-8")
        lines.append(f"{sha256_text(text)}  {name}/{info.version}/{relpath}\n")
    with (root / ARCHIVE_DIR / ARCHIVE_SUMS).open("a", encoding="utf-8") as sums:
        sums.writelines(lines)
    return target


if __name__ == "__main__":  # python -m pinakes.template_catalog freeze NAME  (run from the checkout)
    if len(sys.argv) != 3 or sys.argv[1] != "freeze":
        sys.exit("usage: python -m pinakes.template_catalog freeze NAME")
    checkout_templates = Path(__file__).resolve().parents[2] / "templates"
    print(f"archived {freeze(checkout_templates, sys.argv[2])}")
