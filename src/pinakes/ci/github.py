"""The GitHub Actions workflow `pnk ci init` (and `pnk init --ci`) writes (spec §6.3).

One job, no daemon: check out, set up Python, restore `.pinakes/` and the model cache from the
Actions cache, install Pinakes (the one that wrote the workflow, from where it came, or the
manifest's `[ci] install`) with the extras the manifest needs (`steps.extras_for`), run
`steps.RUN_STEPS` (sync with the free extractor in the job's own process, then the eval gate), and
save the cache. The text is rendered here line by line
rather than dumped from a mapping, so the comments that explain each step survive, and it is checked
by actionlint in the tests.

The cache key is the manifest's hash and the pinned version, then the run id: an Actions cache entry
is immutable, so each run saves under a new key and the next run restores the newest entry whose
prefix matches. The last restore key drops the manifest's hash, so a manifest edit still starts
from the previous index and model cache: sync compares every document's build key against the
manifest and redoes exactly what the edit changed (a model change rebuilds), so a stale entry costs
work, never correctness.
"""

from __future__ import annotations

import json

from pinakes.ci.steps import INSTALL_VARIABLE, PDF_EXTRAS, RUN_STEPS, VERSION_VARIABLE, InstallRequirement

MARKER = "# pinakes-ci: managed by `pnk ci init`"
PYTHON_VERSION = "3.12"
# What the workflow runs and the runner's default Hugging Face cache (HF_HOME is left unset there).
MODEL_CACHE = "~/.cache/huggingface"
ACTIONS = {
    "checkout": "actions/checkout@v4",
    "setup-python": "actions/setup-python@v5",
    "cache-restore": "actions/cache/restore@v4",
    "cache-save": "actions/cache/save@v4",
}


def workflow_name(kb_relative: str) -> str:
    """The workflow's file name: pinakes.yml for a KB at the repository's top, else one per KB."""
    if kb_relative == ".":
        return "pinakes.yml"
    slug = "".join(char if char.isalnum() else "-" for char in kb_relative.lower()).strip("-")
    return f"pinakes-{'-'.join(part for part in slug.split('-') if part)}.yml"


def _in_kb(kb_relative: str, path: str) -> str:
    return path if kb_relative == "." else f"{kb_relative}/{path}"


def render_workflow(kb_name: str, kb_relative: str, version: str, install: InstallRequirement,
                    extras: tuple[str, ...] = PDF_EXTRAS) -> str:
    """The workflow for the KB called `kb_name` at `kb_relative` (from the repository's top, "." there),
    written by Pinakes `version`, installing `install` (which carries `extras`)."""
    state = _in_kb(kb_relative, ".pinakes")
    manifest = _in_kb(kb_relative, "pinakes.toml").replace("'", "''")
    key_prefix = f"pinakes-${{{{ runner.os }}}}-${{{{ env.{VERSION_VARIABLE} }}}}-"
    manifest_hash = f"${{{{ hashFiles('{manifest}') }}}}"
    cache_paths = [f"            {state}", f"            {MODEL_CACHE}"]
    lines = [
        f"{MARKER} (Pinakes {version}); re-run it to regenerate this file.",
        "#",
        "# Keeps the KB's index fresh and its retrieval quality gated on every push and pull request.",
        f"# One job, no daemon: install Pinakes with the [{','.join(extras)}] extras, restore .pinakes/ and",
        "# the model cache, sync, run the golden-set gate, save the cache. Exit codes: docs/CLI.md.",
        f"name: {json.dumps('pinakes: ' + kb_name, ensure_ascii=False)}",
        "",
        "on:",
        "  push:",
        "  pull_request:",
        "  workflow_dispatch:",
        "",
        "permissions:",
        "  contents: read",
        "",
        "jobs:",
        "  kb:",
        "    runs-on: ubuntu-latest",
        "    timeout-minutes: 60",
    ]
    if kb_relative != ".":
        lines += ["    defaults:", "      run:", f"        working-directory: {json.dumps(kb_relative)}"]
    lines += [
        "    env:",
        "      # The Pinakes this KB is synced with: bump it deliberately (the cache key follows it).",
        f"      {VERSION_VARIABLE}: {json.dumps(version)}",
        "      # What the install step installs (one pip requirement):",
        f"      # {install.source}.",
        "      # Set [ci] install in pinakes.toml to choose another, then run `pnk ci init` again.",
        f"      {INSTALL_VARIABLE}: {json.dumps(install.requirement)}",
        "    steps:",
        "      - name: Check out the KB",
        f"        uses: {ACTIONS['checkout']}",
        "      - name: Set up Python",
        f"        uses: {ACTIONS['setup-python']}",
        "        with:",
        f"          python-version: {json.dumps(PYTHON_VERSION)}",
        "      - name: Restore the index and the model cache",
        "        id: cache",
        f"        uses: {ACTIONS['cache-restore']}",
        "        with:",
        "          path: |",
        *cache_paths,
        f"          key: {key_prefix}{manifest_hash}-${{{{ github.run_id }}}}",
        "          # The newest entry for this manifest, else any for this version: sync redoes exactly",
        "          # what a manifest edit changed, so an older index costs work, never correctness.",
        "          restore-keys: |",
        f"            {key_prefix}{manifest_hash}-",
        f"            {key_prefix}",
    ]
    for step in RUN_STEPS:
        lines.append(f"      - name: {step.name}")
        lines += [f"        # {comment}" for comment in step.comment]
        lines.append(f"        run: {step.command}")
    lines += [
        "      - name: Save the index and the model cache",
        "        # Also after a failed sync or gate: every document that synced is its own transaction.",
        "        if: ${{ !cancelled() }}",
        f"        uses: {ACTIONS['cache-save']}",
        "        with:",
        "          path: |",
        *cache_paths,
        "          key: ${{ steps.cache.outputs.cache-primary-key }}",
    ]
    return "\n".join(lines) + "\n"
