"""Pinakes in CI (spec §6.3): the workflow `pnk init --ci` / `pnk ci init` writes, checked by actionlint
and by running its steps; the GitLab job in the guide; the exit-code and --json contract."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest
from ruamel.yaml import YAML

import pinakes.ci
from pinakes import __version__
from pinakes.ci import write_workflow
from pinakes.ci.contract import CONTRACT, DOCTOR_KEYS, ERROR_KEYS, EVAL_RUN_KEYS, SYNC_KEYS, outcomes
from pinakes.ci.gitlab import render_gitlab_job
from pinakes.ci.steps import PDF_EXTRAS, RUN_STEPS
from pinakes.cli import main
from pinakes.distribution import Origin, origin_from_direct_url, requirement, requirement_problem
from pinakes.errors import EXIT_CONFIG, EXIT_FAILURE
from pinakes.hooks import FREE_EXTRACTOR_NOTE
from pinakes.init import RemoteEmbeddingChoice, init_kb
from pinakes.manifest import load_manifest
from tests.conftest import REPO_ROOT
from tests.fakes import FakeEmbedder, substitute_embedder


def yaml_mapping(text: str) -> dict[str, Any]:
    """A YAML document whose top level is a mapping (a workflow, a job), typed as the parsed data it is."""
    return cast(dict[str, Any], YAML(typ="safe").load(text))


def load_yaml(path: Path) -> dict[str, Any]:
    return yaml_mapping(path.read_text(encoding="utf-8"))


def git(cwd: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout


def git_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "ci@example.invalid")
    git(path, "config", "user.name", "CI test")
    return path


def actionlint() -> str:
    found = shutil.which("actionlint") or shutil.which("actionlint", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.skip("actionlint is not installed (the [dev] extra carries it: pip install -e '.[dev]')")
    return found


def lint(workflow: Path) -> None:
    linted = subprocess.run([actionlint(), "-no-color", str(workflow)], capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout + linted.stderr


COMMIT = "0123456789abcdef0123456789abcdef01234567"
GIT_ORIGIN = Origin("vcs", __version__, url="https://git.example.org/pinakes.git", vcs="git", commit=COMMIT)


@pytest.fixture
def installed_from_git(monkeypatch: pytest.MonkeyPatch) -> Origin:
    """This Pinakes as a user would have it: installed from a git URL at a commit (the test run's own
    install is an editable checkout, which a runner cannot reach, so `pnk ci init` would refuse)."""
    monkeypatch.setattr(pinakes.ci, "installed_origin", lambda: GIT_ORIGIN)
    return GIT_ORIGIN


# --- the workflow ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("installed_from_git")
def test_init_ci_writes_a_workflow_that_actionlint_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = git_repo(tmp_path / "kb")
    assert main(["init", str(root), "--template", "research-papers", "--ci"]) == 0
    out = capsys.readouterr().out
    assert FREE_EXTRACTOR_NOTE.lstrip("# ") in out.splitlines()  # the one-line notice, at write time
    lint(root / ".github" / "workflows" / "pinakes.yml")


@pytest.mark.usefixtures("installed_from_git")
def test_the_workflow_runs_the_shared_steps_in_order(tmp_path: Path) -> None:
    root = init_kb(git_repo(tmp_path / "kb"), name="kb").root
    result = write_workflow(root)
    text = result.path.read_text(encoding="utf-8")
    job = load_yaml(result.path)["jobs"]["kb"]
    steps = job["steps"]
    uses = [step.get("uses", "").split("@")[0] for step in steps]
    assert uses == ["actions/checkout", "actions/setup-python", "actions/cache/restore", "", "", "",
                    "actions/cache/save"]
    assert [step["run"] for step in steps if "run" in step] == [step.command for step in RUN_STEPS]
    assert all("${{" not in step["run"] for step in steps if "run" in step)  # the shell sees env vars only
    sync = next(step for step in steps if step.get("name") == "Sync the index")
    assert sync["run"] == "pnk sync --extract=pypdfium2 --executor local"  # a runner reaches no Ray cluster
    assert f"        {FREE_EXTRACTOR_NOTE}\n" in text  # the same line the hooks carry, as a comment
    restore, save = steps[2], steps[-1]
    assert restore["with"]["path"] == save["with"]["path"] == ".pinakes\n~/.cache/huggingface\n"
    assert "hashFiles('pinakes.toml')" in restore["with"]["key"] and "env.PINAKES_VERSION" in restore["with"]["key"]
    assert save["with"]["key"] == "${{ steps.cache.outputs.cache-primary-key }}"
    assert job["env"]["PINAKES_VERSION"] == __version__
    # the default KB reads PDFs; the install is this Pinakes from its git URL at its commit
    assert job["env"]["PINAKES_INSTALL"] == f"pinakes-kb[light,pdf,formats] @ git+https://git.example.org/pinakes.git@{COMMIT}"
    assert "daemon" in text and "schedule" not in text


@pytest.mark.usefixtures("installed_from_git")
def test_a_kb_without_pdfs_installs_the_light_extra_only(tmp_path: Path) -> None:
    root = init_kb(git_repo(tmp_path / "kb"), name="kb", template="notes").root
    job = load_yaml(write_workflow(root).path)["jobs"]["kb"]
    assert job["env"]["PINAKES_INSTALL"].startswith("pinakes-kb[light] @ git+https://")


@pytest.mark.usefixtures("installed_from_git")
def test_a_kb_that_reads_images_installs_the_ocr_extra(tmp_path: Path) -> None:
    root = init_kb(git_repo(tmp_path / "kb"), name="kb").root
    _set_manifest(root, ('"docx", "odt"]', '"docx", "odt", "image"]'))
    job = load_yaml(write_workflow(root).path)["jobs"]["kb"]
    assert job["env"]["PINAKES_INSTALL"].startswith("pinakes-kb[light,pdf,ocr,formats] @ git+https://")


def _set_manifest(root: Path, *replacements: tuple[str, str]) -> None:
    manifest = root / "pinakes.toml"
    text = manifest.read_text(encoding="utf-8")
    for old, new in replacements:
        assert old in text, old
        text = text.replace(old, new)
    manifest.write_text(text, encoding="utf-8")


@pytest.mark.usefixtures("installed_from_git")
@pytest.mark.parametrize(("template", "embedding", "rerank", "extras"), [
    ("notes", "sentence-transformers", None, "st"),  # the manifest's model, not the default one
    ("default", "sentence-transformers", None, "st,pdf,formats"),  # template 5 indexes HTML, EPUB, DOCX, ODT
    ("notes", "fastembed", "sentence-transformers", "light,st"),  # search reranks on the runner too
    ("notes", "sentence-transformers", "sentence-transformers", "st"),
])
def test_the_workflow_installs_the_extras_the_manifest_needs(tmp_path: Path, template: str, embedding: str,
                                                            rerank: str | None, extras: str) -> None:
    root = init_kb(git_repo(tmp_path / "kb"), name="kb", template=template).root
    provider = load_manifest(root / "pinakes.toml").embedding.provider
    _set_manifest(root, (f'provider = "{provider}"', f'provider = "{embedding}"'))  # [embedding] and [rerank]
    if rerank is not None:
        _set_manifest(root, ("rerank = false", "rerank = true"),
                      (f'Mirrors [embedding].\nprovider = "{embedding}"', f'Mirrors [embedding].\nprovider = "{rerank}"'))
        assert load_manifest(root / "pinakes.toml").rerank.provider == rerank
    job = load_yaml(write_workflow(root).path)["jobs"]["kb"]
    assert job["env"]["PINAKES_INSTALL"] == f"pinakes-kb[{extras}] @ git+https://git.example.org/pinakes.git@{COMMIT}"


@pytest.mark.usefixtures("installed_from_git")
def test_a_remote_kb_installs_the_remote_extra_and_no_local_model(tmp_path: Path) -> None:
    remote = RemoteEmbeddingChoice("http://127.0.0.1:9/v1", "nomic-embed-text", 768, "EMBED_KEY")
    root = init_kb(git_repo(tmp_path / "kb"), name="kb", template="notes", remote=remote).root
    assert load_manifest(root / "pinakes.toml").embedding.provider == "openai-compatible"
    job = load_yaml(write_workflow(root).path)["jobs"]["kb"]
    assert job["env"]["PINAKES_INSTALL"] == f"pinakes-kb[remote] @ git+https://git.example.org/pinakes.git@{COMMIT}"


# PEP 610 records as pip writes them, and the requirement each must become.
def vcs(url: str, **more: object) -> str:
    return json.dumps({"url": url, "vcs_info": {"commit_id": COMMIT, "vcs": "git"}, **more})


WHEEL = "pinakes_kb-0.1.0-py3-none-any.whl"
REACHABLE = [
    (vcs("https://git.example.org/pinakes.git"), f"pinakes-kb[light] @ git+https://git.example.org/pinakes.git@{COMMIT}"),
    (vcs("https://git.example.org/mono.git", subdirectory="tools/pinakes"),
     f"pinakes-kb[light] @ git+https://git.example.org/mono.git@{COMMIT}#subdirectory=tools/pinakes"),
    (json.dumps({"url": f"https://files.example.org/{WHEEL}", "archive_info": {"hashes": {"sha256": "ab"}}}),
     f"pinakes-kb[light] @ https://files.example.org/{WHEEL}"),
    (None, "pinakes-kb[light]==0.1.0"),  # no record: resolved by name from an index
]
UNREACHABLE = [
    (json.dumps({"url": "file:///home/me/pinakes", "dir_info": {"editable": True}}),
     "an editable install of the directory /home/me/pinakes"),
    (json.dumps({"url": "file:///home/me/pinakes", "dir_info": {}}), "the directory /home/me/pinakes"),
    (json.dumps({"url": f"file:///tmp/{WHEEL}", "archive_info": {}}), f"the archive file:///tmp/{WHEEL}"),
    (vcs("file:///srv/clone"), "git repository file:///srv/clone"),
]


@pytest.mark.parametrize(("record", "expected"), REACHABLE)
def test_the_workflow_installs_exactly_the_pinakes_that_wrote_it_from_where_it_came(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, record: str | None, expected: str) -> None:
    monkeypatch.setattr(pinakes.ci, "installed_origin", lambda: origin_from_direct_url(record, "0.1.0"))
    root = init_kb(git_repo(tmp_path / "kb"), name="kb", template="notes").root
    result = write_workflow(root)
    assert load_yaml(result.path)["jobs"]["kb"]["env"]["PINAKES_INSTALL"] == expected
    assert requirement_problem(expected) is None
    lint(result.path)


@pytest.mark.parametrize(("record", "described"), UNREACHABLE)
def test_an_install_no_runner_can_reach_is_refused_naming_ci_install(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        record: str, described: str) -> None:
    monkeypatch.setattr(pinakes.ci, "installed_origin", lambda: origin_from_direct_url(record, "0.1.0"))
    root = init_kb(git_repo(tmp_path / "kb"), name="kb").root
    assert main(["-C", str(root), "ci", "init"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert described in err and "[ci] install = \"pinakes-kb[light,pdf,formats] @ git+https://" in err, err
    assert "Traceback" not in err
    assert not (root / ".github").exists()
    # `pnk init --ci` refuses before creating anything
    assert main(["init", str(tmp_path / "new"), "--ci"]) == EXIT_CONFIG
    assert "create the KB without --ci" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_the_refusal_suggests_the_checkouts_remote_at_its_head(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    checkout = git_repo(tmp_path / "checkout")
    (checkout / "f").write_text("x")
    git(checkout, "add", "f")
    git(checkout, "commit", "-q", "-m", "x")
    git(checkout, "remote", "add", "origin", "https://git.example.org/me/pinakes.git")
    head = git(checkout, "rev-parse", "HEAD").strip()
    editable = Origin("directory", "0.1.0", url=checkout.as_uri(), editable=True)
    monkeypatch.setattr(pinakes.ci, "installed_origin", lambda: editable)
    root = init_kb(git_repo(tmp_path / "kb"), name="kb", template="notes").root
    assert main(["-C", str(root), "ci", "init"]) == EXIT_CONFIG
    assert f'[ci] install = "pinakes-kb[light] @ git+https://git.example.org/me/pinakes.git@{head}"' in (
        capsys.readouterr().err)


def test_ci_install_in_the_manifest_is_what_the_workflow_installs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    editable = Origin("directory", "0.1.0", url="file:///home/me/pinakes", editable=True)
    monkeypatch.setattr(pinakes.ci, "installed_origin", lambda: editable)  # would be refused without it
    root = init_kb(git_repo(tmp_path / "kb"), name="kb").root
    spec = "pinakes-kb[light,pdf,formats] @ https://files.example.org/pinakes_kb-0.2.0-py3-none-any.whl"
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text() + f'\n[ci]\ninstall = "{spec}"\n')
    assert main(["-C", str(root), "ci", "init", "--json"]) == 0
    workflow = Path(json.loads(capsys.readouterr().out)["workflow"])
    assert load_yaml(workflow)["jobs"]["kb"]["env"]["PINAKES_INSTALL"] == spec
    assert "# the manifest's [ci] install." in workflow.read_text()
    lint(workflow)


@pytest.mark.parametrize(("spec", "problem"), [
    ("pinakes[light]==0.1.0", "another project"),  # the other project's name: never installed
    ("Pinakes_KB[light]==0.1.0", None),  # names compare as the index compares them
    ("requests==2.0", "it must install 'pinakes-kb'"),
    ("pinakes-kb[light] >=0.1, <0.3", None),
    ("pinakes-kb[light] @ git+https://git.example.org/p.git@v0.1.0", None),
    ("pinakes-kb[light] ; rm -rf /", "neither a version spec"),
    ("pinakes-kb\n==0.1", "spans lines"),
    ("pinakes-kb @ https://x.example/${{ secrets.TOKEN }}.whl", "GitHub Actions expression"),
    ("", "empty"),
])
def test_ci_install_is_validated_when_the_manifest_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         spec: str, problem: str | None) -> None:
    assert (requirement_problem(spec) is None) == (problem is None)
    if problem is None:
        return
    root = init_kb(tmp_path / "kb", name="kb").root
    manifest = root / "pinakes.toml"
    manifest.write_text(manifest.read_text() + f"\n[ci]\ninstall = {json.dumps(spec)}\n")
    assert main(["-C", str(root), "status"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "ci.install" in err and problem in err and "pinakes-kb" in err, err


@pytest.mark.usefixtures("installed_from_git")
def test_a_kb_in_a_subdirectory_gets_its_own_workflow_at_the_repository_top(tmp_path: Path) -> None:
    top = git_repo(tmp_path / "repo")
    root = init_kb(top / "kbs" / "papers", name="papers").root
    result = write_workflow(root)
    assert result.path == top.resolve() / ".github" / "workflows" / "pinakes-kbs-papers.yml"
    job = load_yaml(result.path)["jobs"]["kb"]
    assert job["defaults"]["run"]["working-directory"] == "kbs/papers"
    assert job["steps"][2]["with"]["path"] == "kbs/papers/.pinakes\n~/.cache/huggingface\n"
    assert "hashFiles('kbs/papers/pinakes.toml')" in job["steps"][2]["with"]["key"]
    lint(result.path)


@pytest.mark.usefixtures("installed_from_git")
def test_ci_init_regenerates_its_own_file_and_refuses_a_foreign_one(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    root = init_kb(git_repo(tmp_path / "kb"), name="kb").root
    assert main(["-C", str(root), "ci", "init", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "created"
    assert main(["-C", str(root), "ci", "init", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["action"] == "unchanged"

    workflow = root / ".github" / "workflows" / "pinakes.yml"
    workflow.write_text("name: ours\non: push\njobs: {}\n")
    assert main(["-C", str(root), "ci", "init"]) == EXIT_CONFIG
    assert "was not written by Pinakes" in capsys.readouterr().err
    assert workflow.read_text() == "name: ours\non: push\njobs: {}\n"


def test_the_guide_documents_the_same_steps_for_gitlab() -> None:
    guide = (REPO_ROOT / "docs" / "GUIDE.md").read_text(encoding="utf-8")
    job = render_gitlab_job(".", "X.Y.Z", requirement(PDF_EXTRAS, " @ git+https://<host>/<repository>@<commit>"))
    assert f"```yaml\n{job}```" in guide, "docs/GUIDE.md's GitLab job differs from pinakes.ci.gitlab"
    script = yaml_mapping(job)["pinakes"]["script"]
    assert script == [step.command for step in RUN_STEPS]


# --- the exit-code and --json contract ------------------------------------------------------------


@pytest.fixture
def synced_kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    substitute_embedder(monkeypatch, lambda section, offline=None, threads=None: FakeEmbedder())
    root = init_kb(tmp_path / "kb", name="contract").root
    (root / "docs" / "a.md").write_text("# A\n\nThe lighthouse keeper.\n", encoding="utf-8")
    return root


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out)


def test_the_contract_names_each_command_ci_acts_on() -> None:
    assert {outcome.command for outcome in CONTRACT} == {"sync", "eval", "doctor"}
    for command in ("sync", "eval", "doctor"):
        assert {0, EXIT_FAILURE} <= {outcome.exit_code for outcome in outcomes(command)}


def test_sync_keeps_its_contract(synced_kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = run_json(capsys, "-C", str(synced_kb), "sync", "--extract=pypdfium2", "--json")
    assert code == 0 and report["ok"] is True and set(SYNC_KEYS) <= set(report)
    (synced_kb / "docs" / "bad.md").write_bytes(b"ok then \xc3\x28 broken")
    code, report = run_json(capsys, "-C", str(synced_kb), "sync", "--json")
    assert code == EXIT_FAILURE and report["ok"] is False and report["failures"][0]["path"] == "docs/bad.md"
    (synced_kb / "pinakes.toml").write_text("[kb]\nname = 1\n")
    code, error = run_json(capsys, "-C", str(synced_kb), "sync", "--json")
    assert code == EXIT_CONFIG and tuple(error) == ERROR_KEYS and error["ok"] is False


def test_eval_keeps_its_contract_when_there_is_no_golden_set(synced_kb: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, data = run_json(capsys, "-C", str(synced_kb), "eval", "--json")
    assert code == 0 and data["ok"] is True and "no golden set" in data["skipped"]
    assert main(["-C", str(synced_kb), "eval", "--no-sync"]) == 0
    assert capsys.readouterr().out.startswith("eval skipped: ")  # the printed skip CI shows
    assert set(EVAL_RUN_KEYS) > {"ok"}  # the run's keys are checked on the demo KB by test_eval_run


def test_doctor_keeps_its_contract(synced_kb: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["-C", str(synced_kb), "sync", "--quiet"])
    capsys.readouterr()
    code, data = run_json(capsys, "-C", str(synced_kb), "doctor", "--json")
    assert set(DOCTOR_KEYS) <= set(data)
    assert code == (0 if data["ok"] else EXIT_FAILURE)
    assert data["ok"] == (data["summary"]["FAIL"] == 0)


def test_cli_md_carries_the_contract_table() -> None:
    cli = (REPO_ROOT / "docs" / "CLI.md").read_text(encoding="utf-8")
    assert "<!-- generated: exit contract -->" in cli
    for outcome in CONTRACT:
        assert f"| `pnk {outcome.command}` | {outcome.exit_code} |" in cli


# --- the workflow, run: its steps in order, in a fresh venv, twice (the second hits the cache) ------

EMULATED_ACTIONS = ("actions/checkout", "actions/setup-python", "actions/cache/restore", "actions/cache/save")


class ActionsEmulator:
    """Runs a generated workflow's job here: `run:` steps in bash, in order, with the job's env and
    working directory; the four `uses:` steps emulated. The Actions cache is emulated by a directory
    (one folder per key; restore takes the exact key, else the newest entry under a restore-key
    prefix; save never overwrites a key), which is all the workflow relies on. An action or an
    expression this emulator does not know fails the test rather than being skipped."""

    def __init__(self, workflow: Path, cache_dir: Path, base_env: dict[str, str]):
        self.job = load_yaml(workflow)["jobs"]["kb"]
        self.cache_dir = cache_dir
        self.base_env = base_env

    def run(self, origin: Path, workspace: Path, home: Path, venv: Path, run_id: int,
            env_overrides: dict[str, str]) -> dict[str, str]:
        """One run of the job on a fresh runner (a new clone, home and Python environment `venv`);
        returns each step's output by step name (and "cache-hit")."""
        home.mkdir(parents=True)
        env = {**self.base_env, **{k: str(v) for k, v in self.job.get("env", {}).items()}, **env_overrides,
               "HOME": str(home), "GITHUB_WORKSPACE": str(workspace), "CI": "true"}
        self.expressions = {"runner.os": "Linux", "github.run_id": str(run_id)}
        workdir = workspace / self.job.get("defaults", {}).get("run", {}).get("working-directory", ".")
        outputs: dict[str, str] = {}
        for step in self.job["steps"]:
            name = step["name"]
            if "if" in step:
                assert step["if"] == "${{ !cancelled() }}", step["if"]
            if "run" in step:
                done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                      cwd=workdir, env=env, capture_output=True, text=True, timeout=600)
                outputs[name] = done.stdout + done.stderr
                assert done.returncode == 0, f"step {name!r} exited {done.returncode}:\n{outputs[name]}"
                continue
            action = step["uses"].split("@")[0]
            assert action in EMULATED_ACTIONS, f"no emulation for {action}"
            if action == "actions/checkout":
                subprocess.run(["git", "clone", "-q", str(origin), str(workspace)], check=True)
            elif action == "actions/setup-python":
                env["PATH"] = f"{venv / 'bin'}:{env['PATH']}"
            elif action == "actions/cache/restore":
                outputs["cache-hit"] = self._restore(step["with"], workspace, home, env)
            else:
                self._save(step["with"], workspace, home, env)
        return outputs

    def _expand(self, text: str, workspace: Path, env: dict[str, str]) -> str:
        import hashlib
        import re

        def value(match: re.Match[str]) -> str:
            expression = match.group(1).strip()
            if expression.startswith("env."):
                return env[expression[4:]]
            hashed = re.fullmatch(r"hashFiles\('([^']+)'\)", expression)
            if hashed:
                return hashlib.sha256((workspace / hashed.group(1)).read_bytes()).hexdigest()
            if expression == "steps.cache.outputs.cache-primary-key":
                return self.primary_key
            assert expression in self.expressions, f"no emulation for the expression {expression!r}"
            return self.expressions[expression]

        return re.sub(r"\$\{\{(.*?)\}\}", value, text)

    def _paths(self, spec: dict[str, Any], workspace: Path, home: Path) -> list[tuple[str, Path]]:
        paths: list[tuple[str, Path]] = []
        for line in spec["path"].splitlines():
            line = line.strip()
            if line:
                paths.append((line, home / line[2:] if line.startswith("~/") else workspace / line))
        return paths

    def _restore(self, spec: dict[str, Any], workspace: Path, home: Path, env: dict[str, str]) -> str:
        self.primary_key = self._expand(spec["key"], workspace, env)
        entry = self.cache_dir / self.primary_key
        if not entry.is_dir():
            for prefix in self._expand(spec.get("restore-keys", ""), workspace, env).split():
                matches = sorted((p for p in self.cache_dir.glob("*") if p.name.startswith(prefix)),
                                 key=lambda p: p.stat().st_mtime_ns)
                if matches:
                    entry = matches[-1]
                    break
        if not entry.is_dir():
            return "miss"
        for index, (_, target) in enumerate(self._paths(spec, workspace, home)):
            saved = entry / str(index)
            if saved.exists():
                shutil.copytree(saved, target, symlinks=True, dirs_exist_ok=True)
        return "hit" if entry.name == self.primary_key else f"restored {entry.name}"

    def _save(self, spec: dict[str, Any], workspace: Path, home: Path, env: dict[str, str]) -> None:
        entry = self.cache_dir / self._expand(spec["key"], workspace, env)
        if entry.exists():  # an Actions cache entry is immutable
            return
        for index, (_, source) in enumerate(self._paths(spec, workspace, home)):
            if source.exists():
                shutil.copytree(source, entry / str(index), symlinks=True)
        entry.mkdir(parents=True, exist_ok=True)


GIT_URL = "https://git.example.org/pinakes.git"


def git_redirect(url: str, to: Path) -> dict[str, str]:
    """Environment that makes git fetch `url` from the repository `to` (`url.<to>.insteadOf`): the
    stand-in for the origin a real runner would clone over the network."""
    return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"url.{to.as_uri()}.insteadOf", "GIT_CONFIG_VALUE_0": url}


@pytest.mark.heavy
def test_the_workflow_installs_the_pinakes_that_wrote_it_and_a_second_run_hits_the_cache(tmp_path: Path) -> None:
    """End to end, offline: this checkout committed to a git repository that stands in for Pinakes'
    origin, a user's Pinakes installed from it by its git URL, that Pinakes writing the workflow, and
    the job run twice on fresh runners, its install step exactly as written (git redirected to the
    stand-in; pip with no index and no build isolation, seeing this environment's packages) — the real
    [light] model and free PDF extractor included."""
    pytest.importorskip("fastembed", reason="the workflow installs the [light] extra, which is not installed here")
    pytest.importorskip("pypdfium2", reason="the workflow installs the [pdf] extra, which is not installed here")
    from tests.test_extract_text import make_pdf
    from tests.test_wheel import copy_build_inputs, fresh_venv, isolated_env, run

    # Pinakes' origin: this checkout's build inputs at one commit.
    upstream = git_repo(copy_build_inputs(tmp_path / "upstream"))
    git(upstream, "add", "-A")
    git(upstream, "commit", "-q", "-m", "pinakes")
    commit = git(upstream, "rev-parse", "HEAD").strip()
    # The runner would build the git checkout in an isolated environment fetched from the index; offline,
    # pip builds it with this environment's setuptools. (pip sets an option's value from its variable,
    # so PIP_NO_BUILD_ISOLATION=0 sets build_isolation to false: isolation off.)
    offline = isolated_env(PIP_NO_BUILD_ISOLATION="0", PIP_DISABLE_PIP_VERSION_CHECK="1",
                           **git_redirect(GIT_URL, upstream))

    # The user's Pinakes, installed from the git URL at that commit; it writes the KB and its workflow.
    users = fresh_venv(tmp_path / "users-venv")
    run([users / "bin" / "python", "-m", "pip", "install", "--no-deps", f"pinakes-kb @ git+{GIT_URL}@{commit}"],
        env=offline)
    origin = git_repo(tmp_path / "origin")
    run([users / "bin" / "pnk", "init", origin, "--name", "lighthouse", "--ci"], env=offline, cwd=tmp_path)
    workflow = origin / ".github" / "workflows" / "pinakes.yml"
    expected = f"pinakes-kb[light,pdf,formats] @ git+{GIT_URL}@{commit}"
    assert load_yaml(workflow)["jobs"]["kb"]["env"]["PINAKES_INSTALL"] == expected
    lint(workflow)
    (origin / "docs" / "storms.md").write_text("# Storms\n\nThe keeper logs every storm in the ledger.\n")
    (origin / "docs" / "lamps.md").write_text("# Lamps\n\nThe lamp is trimmed at dusk and dawn.\n")
    (origin / "docs" / "survey.pdf").write_bytes(make_pdf([["Tidal survey"], ["The tide gauge reads hourly."]]))
    assert main(["-C", str(origin), "sync", "--sidecars-only", "--quiet"]) == 0
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "a KB with its workflow")

    base_env = {key: value for key, value in offline.items() if key not in ("HF_HOME", "XDG_CACHE_HOME")}
    base_env["PATH"] = os.defpath
    emulator = ActionsEmulator(workflow, tmp_path / "actions-cache", base_env)

    first = emulator.run(origin, tmp_path / "run1" / "ws", tmp_path / "run1" / "home",
                         fresh_venv(tmp_path / "run1" / "venv"), 1, {})
    assert "Successfully installed pinakes-kb-" in first["Install Pinakes"], first["Install Pinakes"]
    runner_python = tmp_path / "run1" / "venv" / "bin" / "python"
    installed = run([runner_python, "-c", "from pinakes.distribution import installed_origin as o\n"
                     "import pinakes; print(o().commit, pinakes.__file__)"], env=base_env).split()
    assert installed[0] == commit  # exactly the commit that wrote the workflow
    assert Path(installed[1]).is_relative_to(tmp_path / "run1" / "venv")
    assert first["cache-hit"] == "miss"
    assert "added 3" in first["Sync the index"] and "failed 0" in first["Sync the index"]
    assert "eval skipped: no golden set" in first["Gate retrieval quality on the golden set"]
    assert (tmp_path / "run1" / "ws" / ".pinakes" / "index.db").is_file()
    assert len(list((tmp_path / "actions-cache").iterdir())) == 1

    # A second run on a fresh runner: a new clone, a new home, the cache restored.
    second = emulator.run(origin, tmp_path / "run2" / "ws", tmp_path / "run2" / "home",
                          fresh_venv(tmp_path / "run2" / "venv"), 2, {})
    assert "Successfully installed pinakes-kb-" in second["Install Pinakes"]
    assert second["cache-hit"].startswith("restored pinakes-Linux-")  # the newest entry under the prefix
    sync = second["Sync the index"]
    assert "added 0, changed 0" in sync and "files: 0 indexed, 3 unchanged" in sync, sync
    assert (tmp_path / "run2" / "home" / ".cache" / "huggingface").is_dir()  # the model cache came back
    assert len(list((tmp_path / "actions-cache").iterdir())) == 2  # each run saves under its own key
