"""The same steps as a GitLab CI job, for GUIDE.md (`tests/test_ci_workflow.py` keeps the guide's copy
equal to this rendering, so the two providers cannot drift apart).

GitLab restores the cache before `script` and saves it after (`when: always`: also after a failed
sync or gate), and caches only paths inside the project, so HF_HOME is pointed there.
"""

from __future__ import annotations

import json

from pinakes.ci.steps import INSTALL_VARIABLE, RUN_STEPS, VERSION_VARIABLE

PYTHON_IMAGE = "python:3.12"


def render_gitlab_job(kb_relative: str, version: str, install: str) -> str:
    """A `.gitlab-ci.yml` job for the KB at `kb_relative` (from the repository's top, "." there) that
    installs the pip requirement `install`."""
    inside = "" if kb_relative == "." else f"{kb_relative}/"
    lines = [
        "pinakes:",
        f"  image: {PYTHON_IMAGE}",
        "  variables:",
        f"    {VERSION_VARIABLE}: {json.dumps(version)}",
        f"    {INSTALL_VARIABLE}: {json.dumps(install)}",
        '    HF_HOME: "$CI_PROJECT_DIR/.cache/huggingface"  # GitLab caches paths inside the project only',
        "  cache:",
        "    key:",
        f"      files: [{json.dumps(inside + 'pinakes.toml')}]",
        f'      prefix: "pinakes-${VERSION_VARIABLE}"',
        f"    paths: [{json.dumps(inside + '.pinakes/')}, \".cache/huggingface/\"]",
        "    when: always",
        "  script:",
    ]
    if kb_relative != ".":
        lines.append(f"    - cd {json.dumps(kb_relative)}")
    for step in RUN_STEPS:
        lines += [f"    # {comment}" for comment in step.comment]
        lines.append(f"    - {json.dumps(step.command) if ':' in step.command else step.command}")
    return "\n".join(lines) + "\n"
