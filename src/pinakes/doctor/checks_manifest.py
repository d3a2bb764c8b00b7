"""Manifest checks: is pinakes.toml valid, and what does it leave unsaid or machine-local.

What `load_manifest` refuses is a FAIL here. What it accepts but deserves a word is a WARN: no
confidence thresholds fitted on the KB's golden set (confidence then comes from its
self-calibration or the shipped prior, weaker calibrations: search/calibrated.py), and an absolute
`[[links.kb]] path`, which works only on this machine (spec §4.7). Roots that do not exist are a
FAIL: the loader cannot know the filesystem, and a sync over a missing root finds nothing.

The loaded manifest is left in `ctx.cache["manifest"]` for the areas that run after this one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath

from pinakes.doctor import Check, DoctorContext
from pinakes.errors import ManifestError
from pinakes.kb import MANIFEST_NAME
from pinakes.manifest import InvalidManifestError, Manifest, load_manifest
from pinakes.manifest.sections import NONE_SIGNAL

CACHE_KEY = "manifest"


def checks(ctx: DoctorContext) -> Iterator[Check]:
    if ctx.kb_root is None:
        return
    try:
        manifest = load_manifest(ctx.kb_root / MANIFEST_NAME)
    except InvalidManifestError as exc:
        for problem in exc.problems:  # one line each: doctor's report is one line per finding
            yield Check("manifest", "FAIL", problem.render(), problem.remedy)
        return
    except ManifestError as exc:
        yield Check("manifest", "FAIL", exc.message, exc.remedy)
        return
    ctx.cache[CACHE_KEY] = manifest
    yield Check("manifest", "OK", f"{MANIFEST_NAME} is valid (KB {manifest.kb.name!r}, {manifest.kb.id})")
    yield check_confidence(manifest)
    yield from check_link_paths(manifest)
    yield from check_roots(manifest)


def check_confidence(manifest: Manifest) -> Check:
    confidence = manifest.retrieval.confidence
    if confidence is None:
        return Check(
            "manifest.confidence", "WARN",
            "no [retrieval.confidence] fitted on this KB's golden set: search takes its confidence from the KB's "
            "self-calibration or the shipped prior, which are weaker (docs/QUALITY.md)",
            remedy="fit thresholds on this KB's golden set and write them: `pnk eval --fit-confidence --write`",
        )
    if confidence.signal == NONE_SIGNAL:
        return Check("manifest.confidence", "OK", 'confidence turned off ([retrieval.confidence] signal = "none")')
    return Check(
        "manifest.confidence", "OK",
        f"thresholds low {confidence.low} / high {confidence.high}, fitted for {confidence.fitted_for}",
    )


def check_link_paths(manifest: Manifest) -> Iterator[Check]:
    for linked in manifest.links:
        if _is_absolute(linked.path):
            yield Check(
                "manifest.links", "WARN",
                f"[[links.kb]] {linked.alias!r} has an absolute path ({linked.path}); it works only "
                "on this machine, and publishing the KB publishes it",
                remedy=f"write it relative to {manifest.root} (e.g. \"../{Path(linked.path).name}\")",
            )


def _is_absolute(path: str) -> bool:
    return PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute()


def check_roots(manifest: Manifest) -> Iterator[Check]:
    """A root that is not a directory is a FAIL here. A root reached through a symbolic link is the
    `source roots` check's (doctor's sync area, in the walk's own words and remedy, as a sync refuses
    it): one finding for it, and never "every root exists" beside it."""
    linked = _linked_roots(manifest)
    missing = [root for root in manifest.sources.roots
               if root not in linked and not (manifest.root / root).is_dir()]
    for root in missing:
        yield Check(
            "manifest.sources", "FAIL",
            f"[sources] root {root!r} is not a directory in {manifest.root}",
            remedy=f"create {manifest.root / root}, or fix [sources] roots",
        )
    if not missing and not linked:
        roots = ", ".join(manifest.sources.roots)
        yield Check("manifest.sources", "OK", f"every [sources] root exists ({roots})")


def _linked_roots(manifest: Manifest) -> set[str]:
    """The roots a sync refuses as reached through a symbolic link (the walk's one rule for it)."""
    from dataclasses import replace

    from pinakes.sources.walk import SourceRootError, check_source_roots

    linked: set[str] = set()
    for root in manifest.sources.roots:
        try:
            check_source_roots(manifest.root, replace(manifest.sources, roots=(root,)))
        except SourceRootError:
            linked.add(root)
    return linked
