"""Which KBs a server serves: its own configuration, validated before the first request.

The server serves only the KBs named when it starts (`--kb DIR`, repeatable, `ALIAS=DIR` to name
one; or `--config FILE`; or by default the KB containing the working directory). Tool arguments
choose among those by alias or ULID and can never add one (spec §4.7). Every KB's manifest must
load at startup, so a typo fails the launch with the manifest's own error rather than the first
tool call an agent makes an hour later.

`--config FILE` is TOML:

    [[kb]]
    path = "../notes"   # relative to the config file
    alias = "notes"     # optional; default: the KB's [kb] name
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from pinakes.errors import KBNotFoundError, UsageError
from pinakes.kb import KBPaths, find_kb_root
from pinakes.manifest import Manifest, load_manifest
from pinakes.wording import noun_for

_ALIAS = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_-]|\.(?!\.)){0,62}")
_CONFIG_KB_KEYS = ("path", "alias")


@dataclass(frozen=True)
class ServedKB:
    alias: str
    manifest: Manifest
    paths: KBPaths  # root is the resolved real path: every served file must lie under it

    @property
    def kb_id(self) -> str:
        return self.manifest.kb.id

    @property
    def name(self) -> str:
        return self.manifest.kb.name

    @property
    def root(self) -> Path:
        return self.paths.root


def is_valid_alias(alias: str) -> bool:
    return bool(_ALIAS.fullmatch(alias))


def alias_from_name(name: str) -> str:
    """A KB name made usable as a tool argument: `My Notes` -> `my-notes`."""
    if is_valid_alias(name):
        return name
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")[:63]
    return slug or "kb"


def load_kb(directory: Path | str, alias: str | None = None) -> ServedKB:
    """The KB containing `directory`, with its manifest loaded (errors are the manifest's own)."""
    try:
        root = Path(os.path.realpath(find_kb_root(directory)))
    except KBNotFoundError as exc:
        # The generic remedy names -C; a served KB is named by --kb or the configuration file.
        exc.remedy = "name a KB directory (one holding pinakes.toml, or inside one) with --kb DIR or in --config"
        raise
    except (OSError, RuntimeError) as exc:  # unreadable, or a symbolic-link loop (pathlib's RuntimeError)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UsageError(f"cannot read the KB directory {directory} ({reason})",
                         remedy="check its permissions (and any symbolic link on the way), or leave it out of "
                                "--kb / --config") from None
    paths = KBPaths(root)
    manifest = load_manifest(paths.manifest)
    if alias is not None and not is_valid_alias(alias):
        raise UsageError(
            f"KB alias {alias!r} is not usable as a tool argument",
            remedy="use letters, digits, '-', '_' and single dots (at most 63 characters), e.g. notes=DIR",
        )
    return ServedKB(alias or alias_from_name(manifest.kb.name), manifest, paths)


def parse_kb_argument(value: str) -> tuple[str | None, str]:
    """`ALIAS=DIR` or `DIR`. A directory whose name merely contains `=` stays a directory."""
    alias, separator, directory = value.partition("=")
    if separator and directory and is_valid_alias(alias):
        return alias, directory
    return None, value


def load_config_file(path: Path | str) -> list[ServedKB]:
    config = Path(path)
    try:
        data: dict[str, object] = tomllib.loads(config.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError("the serve configuration file does not exist", remedy="check --config",
                         path=config) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"cannot read the serve configuration: {exc}", remedy="fix the TOML",
                         path=config) from exc
    unknown = sorted(set(data) - {"kb"})
    if unknown:
        raise UsageError(f"unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}", remedy="the file holds only [[kb]] tables",
                         path=config)
    entries = data.get("kb")
    if not isinstance(entries, list) or not entries:
        raise UsageError("no [[kb]] entries", remedy='add one: [[kb]] path = "/path/to/kb"', path=config)
    return [_config_entry(config, number, entry) for number, entry in enumerate(cast("list[object]", entries))]


def _config_entry(config: Path, number: int, entry: object) -> ServedKB:
    where = f"kb[{number}]"
    if not isinstance(entry, dict):
        raise UsageError(f"{where} must be a table", remedy='write it as [[kb]] path = "..."', path=config)
    table = cast("dict[str, object]", entry)  # a TOML table: its keys are strings
    unknown = sorted(set(table) - set(_CONFIG_KB_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown {noun_for(len(unknown), 'key')} {', '.join(unknown)}",
                         remedy=f"a [[kb]] table takes {', '.join(_CONFIG_KB_KEYS)}", path=config)
    directory, alias = table.get("path"), table.get("alias")
    if not isinstance(directory, str) or not directory:
        raise UsageError(f"{where}.path is required and must be a string", remedy='path = "/path/to/kb"',
                         path=config)
    if alias is not None and not isinstance(alias, str):
        raise UsageError(f"{where}.alias must be a string", remedy='alias = "notes"', path=config)
    return load_kb(config.parent / Path(directory).expanduser(), alias)


def resolve_served_kbs(
    kb_arguments: Sequence[str] = (), config_file: Path | str | None = None, default_dir: Path | str | None = None
) -> list[ServedKB]:
    """Every KB this server will serve, in order (the first is the default), each validated."""
    if kb_arguments and config_file is not None:
        raise UsageError("pass --kb or --config, not both", remedy="list every KB in one place")
    if config_file is not None:
        served = load_config_file(config_file)
    elif kb_arguments:
        served = [load_kb(directory, alias) for alias, directory in map(parse_kb_argument, kb_arguments)]
    else:
        served = [load_kb(default_dir if default_dir is not None else Path.cwd())]
    _refuse_duplicates(served)
    return served


def _refuse_duplicates(served: Sequence[ServedKB]) -> None:
    seen: dict[str, ServedKB] = {}
    for kb in served:
        for key in (kb.alias, kb.kb_id):
            other = seen.get(key)
            if other is not None:
                what = "the same KB" if other.kb_id == kb.kb_id else "two KBs"
                raise UsageError(
                    f"{key!r} names {what} twice ({other.root} and {kb.root})",
                    remedy="serve each KB once, and give KBs that share a name distinct aliases (ALIAS=DIR)",
                )
            seen[key] = kb
