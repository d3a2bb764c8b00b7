"""The entry points: a file or a text in, a validated Manifest or one InvalidManifestError out.

`[kb] requires_pinakes` is read in a pre-pass over the raw TOML (or, when the file does not even
parse, over its lines) before anything else: a manifest written by a newer Pinakes must be diagnosed
as "upgrade Pinakes", not as a spelling mistake in a key this build has never heard of.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path

from pinakes import __version__
from pinakes.manifest.problems import InvalidManifestError, ManifestProblem, Problems
from pinakes.manifest.readers import VERSION_FLOOR, read_manifest
from pinakes.manifest.sections import Manifest
from pinakes.manifest.table import TomlValue


def load_manifest(path: Path) -> Manifest:
    """Read and validate the manifest at `path`; raises InvalidManifestError (a ManifestError)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InvalidManifestError(path, [ManifestProblem(
            None, "the manifest does not exist", "run `pnk init` to create a KB, or pass -C DIR")]) from None
    except OSError as exc:
        raise InvalidManifestError(path, [ManifestProblem(
            None, f"cannot read the manifest ({exc.strerror or exc})",
            "check the file's permissions")]) from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidManifestError(path, [ManifestProblem(
            None, f"not valid UTF-8 (byte offset {exc.start})", "save the file as UTF-8")]) from None
    return parse_manifest(text, path=path)


def parse_manifest(text: str, *, path: Path) -> Manifest:
    """Validate manifest `text`; `path` is where it lives (errors name it; `root` derives from it)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # A newer Pinakes may write syntax this build cannot parse; the floor still explains it.
        _refuse_newer_floor(_floor_from_text(text), path)
        raise InvalidManifestError(path, [ManifestProblem(
            None, f"invalid TOML: {exc}", "fix the syntax at that line and column (TOML 1.0)")]) from None
    _pre_pass_requires_pinakes(data, path)
    problems = Problems()
    manifest = read_manifest(data, Path(path), problems)
    if problems:
        raise InvalidManifestError(path, problems.items)
    assert manifest is not None
    return manifest


def _pre_pass_requires_pinakes(data: Mapping[str, TomlValue], path: Path) -> None:
    kb = data.get("kb")
    floor = kb.get("requires_pinakes") if isinstance(kb, dict) else None
    if isinstance(floor, str) and VERSION_FLOOR.fullmatch(floor):
        _refuse_newer_floor(floor, path)


def _floor_from_text(text: str) -> str | None:
    """`[kb] requires_pinakes` found line by line, for a file that does not parse as TOML."""
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        header = re.fullmatch(r"\[\[?\s*([^\]]+?)\s*\]\]?(?:\s*#.*)?", stripped)
        if header:
            section = header.group(1)
            continue
        match = re.fullmatch(r"requires_pinakes\s*=\s*[\"'](\d+\.\d+\.\d+)[\"'](?:\s*#.*)?", stripped)
        if section == "kb" and match:
            return match.group(1)
    return None


def _refuse_newer_floor(floor: str | None, path: Path) -> None:
    if floor is None or _version_tuple(floor) <= _version_tuple(__version__):
        return
    from pinakes.distribution import pip_upgrade

    raise InvalidManifestError(path, [ManifestProblem(
        "kb.requires_pinakes",
        f"this KB requires Pinakes {floor} or newer; this is Pinakes {__version__}",
        f"upgrade Pinakes to {floor} or newer (e.g. `{pip_upgrade(floor)}`)")])


def _version_tuple(version: str) -> tuple[int, int, int]:
    match = VERSION_FLOOR.match(version)
    if not match:
        return (0, 0, 0)
    major, minor, patch = match.groups()
    return (int(major), int(minor), int(patch))
