"""The steps a CI job runs for a KB, in order: one list that the GitHub Actions workflow
(`ci/github.py`) and the GitLab CI job documented in GUIDE.md (`ci/gitlab.py`) both render, so the
two cannot drift apart.

Every command is non-interactive and free: the sync forces the free extractor exactly as the git
hooks do (spec §6.3), because a CI job has no terminal to confirm a spend on, and `pnk eval`
prints why it skipped when the KB has no golden set instead of failing a KB that has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pinakes.hooks import FREE_EXTRACTOR_NOTE

if TYPE_CHECKING:
    from pinakes.manifest import Manifest

# The environment variable the install step reads: the pip requirement `pnk ci init` resolved
# (pinakes.ci.install_requirement); Pinakes' own test of the workflow points it at a local wheel.
INSTALL_VARIABLE = "PINAKES_INSTALL"
VERSION_VARIABLE = "PINAKES_VERSION"
PDF_EXTRAS = ("light", "pdf")  # and pypdfium2, the free extractor the sync step forces


@dataclass(frozen=True)
class InstallRequirement:
    requirement: str  # one pip requirement, the install step's only argument
    source: str  # where it came from, in words, for the workflow's comment


@dataclass(frozen=True)
class RunStep:
    name: str
    command: str
    comment: tuple[str, ...] = ()  # lines written above the step, without the leading "# "


RUN_STEPS = (
    RunStep("Install Pinakes", f'python -m pip install "${INSTALL_VARIABLE}"'),
    RunStep("Sync the index", "pnk sync --extract=pypdfium2 --executor local",
            (FREE_EXTRACTOR_NOTE.removeprefix("# "),
             "Embeds in the job's own process whatever [embedding] executor says: a runner reaches no Ray",
             "cluster, and the vectors are the same either way.",
             "A document fails the step (exit 1) and is listed; see docs/CLI.md, exit codes.")),
    RunStep("Gate retrieval quality on the golden set", "pnk eval --no-sync",
            ("Exits 1 on a regression against eval/baseline.json; prints why it skipped (exit 0)",
             "when the KB has no golden set (eval/questions.yaml), as a new KB has none.")),
)


def extras_for(manifest: Manifest) -> tuple[str, ...]:
    """What a runner needs to sync and search this KB: the embedding provider's extra, the
    reranker's when search reranks, and the extra of each free extractor (the sync forces the free
    one) whose type the KB indexes (`[sources] types`) and a root can select: [pdf] for PDFs,
    [formats] for HTML, EPUB, DOCX or ODT, [ocr] for images. The default KB's: [light,pdf,formats]."""
    from pinakes.embed.registry import PROVIDERS, RERANKERS
    from pinakes.extract.registry import EXTRACTORS
    from pinakes.extract.source_types import SUFFIX_TO_TYPE

    wanted = [PROVIDERS[manifest.embedding.provider].extra]
    if manifest.retrieval.rerank:
        wanted.append(RERANKERS[manifest.rerank.provider].extra)  # None for an HTTP reranker: it needs none
    sources = manifest.sources
    selected = {kind for suffix, kind in SUFFIX_TO_TYPE.items() if kind in sources.types
                and any(sources.selects(f"{root}/document{suffix}" if root != "." else f"document{suffix}")
                        for root in sources.roots)}
    wanted += [spec.extra for spec in EXTRACTORS.values() if not spec.paid and selected & set(spec.source_types)]
    return tuple(dict.fromkeys(extra for extra in wanted if extra is not None))
