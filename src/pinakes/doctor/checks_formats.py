"""Doctor: the document formats (HTML, EPUB, DOCX, ODT; issue #43) — files of those types (or images) a
KB made before them leaves out (`[sources] types`), and a KB that indexes them without the `[formats]`
extra."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

from pinakes.doctor import Check, DoctorContext
from pinakes.errors import PinakesError
from pinakes.kb import KBPaths


def checks(ctx: DoctorContext) -> Iterator[Check]:
    from pinakes.distribution import pip_install
    from pinakes.extract.source_types import MARKDOWN_WRITTEN
    from pinakes.manifest import load_manifest
    from pinakes.sources.left_out import left_out_types, notice
    from pinakes.sources.walk import walk

    assert ctx.kb_root is not None
    try:
        manifest = load_manifest(KBPaths(ctx.kb_root).manifest)
        found = walk(ctx.kb_root, manifest.sources, {}, hash_contents=False)
    except PinakesError:
        return  # the manifest and sources checks report why
    left_out = left_out_types(found.skipped)
    told = notice(left_out, manifest.sources.types)
    if told is not None:  # images left out are a choice `pnk init` makes too (OCR is opt-in): said, not warned
        yield Check("document formats", "WARN" if left_out.keys() & set(MARKDOWN_WRITTEN) else "OK", *told)
    formats = sorted({found.source_types[path] for path in found.docs} & set(MARKDOWN_WRITTEN))
    missing = [module for module in ("selectolax", "defusedxml") if importlib.util.find_spec(module) is None]
    if formats and missing:
        yield Check("document formats", "FAIL", f"the KB has {', '.join(formats)} files, but the [formats] extra "
                    f"is not installed ({', '.join(missing)} not importable): they fail to extract",
                    pip_install(("formats",)))
    elif told is None:
        yield Check("document formats", "OK", f"indexing {', '.join(manifest.sources.types)}")
