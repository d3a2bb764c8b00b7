"""`pnk doctor`: the framework (report, JSON, exit code, crash containment) and the environment checks."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
import types
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pinakes.doctor as doctor
from pinakes.cli import main
from pinakes.cli.cmd_doctor import NAME_WIDTH
from pinakes.distribution import pip_install
from pinakes.doctor import Check, DoctorContext, checks_env, run_checks
from pinakes.errors import EXIT_FAILURE, ManifestError

ENV_CHECK_NAMES = [check.name for check in checks_env.checks(DoctorContext(None))]


def doctor_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main([*argv, "doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {check["name"]: check for check in report["checks"]}


def fake_area(monkeypatch: pytest.MonkeyPatch, area: str, checks: Callable[[DoctorContext], Iterable[Check]]) -> None:
    module = types.ModuleType(f"pinakes.doctor.checks_{area}")
    module.checks = checks  # pyright: ignore[reportAttributeAccessIssue]  # a fake area module's one attribute
    monkeypatch.setitem(sys.modules, module.__name__, module)


def test_outside_a_kb_only_the_environment_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_area(monkeypatch, "manifest", lambda ctx: [Check("needs a kb", "FAIL", "ran outside a KB")])
    monkeypatch.chdir(tmp_path)

    code = main(["doctor"])

    lines = capsys.readouterr().out.splitlines()
    statuses = [line.split()[0] for line in lines[:-1] if not line.startswith(" ")]
    assert lines[0].startswith("WARN  kb ") and "only the environment was checked" in lines[0]
    assert "remedy: run `pnk init`" in lines[1]
    names = [line[6:6 + NAME_WIDTH].strip() for line in lines[:-1] if not line.startswith(" ")]
    assert names == ["kb", *ENV_CHECK_NAMES]
    assert not any("needs a kb" in line for line in lines)
    assert lines[-1] == (f"doctor: {statuses.count('OK')} OK, {statuses.count('WARN')} WARN, "
                         f"{statuses.count('FAIL')} FAIL")
    assert code == (EXIT_FAILURE if "FAIL" in statuses else 0)


def test_inside_a_kb_the_kb_areas_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pinakes.toml").write_text("")
    (tmp_path / "sub").mkdir()
    monkeypatch.setattr(doctor, "CHECK_MODULES", ("env", "manifest"))
    fake_area(monkeypatch, "manifest", lambda ctx: [Check("kb seen", "OK", str(ctx.kb_root))])

    code, report = doctor_json(capsys, "-C", str(tmp_path / "sub"))

    checks = by_name(report)
    assert checks["kb"] == {"name": "kb", "status": "OK", "detail": str(tmp_path.resolve()), "remedy": None}
    assert checks["kb seen"]["detail"] == str(tmp_path.resolve())
    assert report["kb_root"] == str(tmp_path.resolve())
    assert code == (0 if report["ok"] else EXIT_FAILURE)


def test_json_report_shape_and_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    code, report = doctor_json(capsys)

    assert set(report) == {"ok", "kb_root", "checks", "summary"}
    assert report["kb_root"] is None
    assert [c["name"] for c in report["checks"]] == ["kb", *ENV_CHECK_NAMES]
    for check in report["checks"]:
        assert set(check) == {"name", "status", "detail", "remedy"}
        assert check["status"] in ("OK", "WARN", "FAIL")
        assert check["status"] == "OK" or check["remedy"], f"{check['name']} is not OK but has no remedy"
    statuses = [c["status"] for c in report["checks"]]
    assert report["summary"] == {s: statuses.count(s) for s in ("OK", "WARN", "FAIL")}
    assert report["ok"] == ("FAIL" not in statuses)
    assert code == (0 if report["ok"] else EXIT_FAILURE)


def test_naming_a_directory_that_is_no_kb_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = doctor_json(capsys, "-C", str(tmp_path / "missing"))

    kb = by_name(report)["kb"]
    assert kb["status"] == "FAIL" and "does not exist" in kb["detail"]
    assert (report["ok"], code) == (False, EXIT_FAILURE)


def test_a_check_that_raises_is_a_fail_and_later_areas_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def raises_midway(ctx: DoctorContext) -> Iterator[Check]:
        yield Check("before", "OK", "ran")
        raise RuntimeError("probe exploded")

    def raises_user_error(ctx: DoctorContext) -> Iterator[Check]:
        raise ManifestError("kb.name is missing", remedy="add name", path=tmp_path / "pinakes.toml")

    broken = tmp_path / "broken_checks"
    broken.mkdir()
    (broken / "checks_import.py").write_text("raise ImportError('cannot import a thing')\n")
    (broken / "checks_dependency.py").write_text("import pinakes_no_such_dependency\n")
    monkeypatch.setattr(doctor, "__path__", [*doctor.__path__, str(broken)])
    monkeypatch.setattr(doctor, "CHECK_MODULES",
                        ("midway", "import", "dependency", "not_written", "user_error", "after"))
    fake_area(monkeypatch, "midway", raises_midway)
    fake_area(monkeypatch, "user_error", raises_user_error)
    fake_area(monkeypatch, "after", lambda ctx: [Check("after", "OK", "still ran")])

    results = [(c.name, c.status, c.detail) for c in run_checks(DoctorContext(tmp_path))]

    assert results == [
        ("before", "OK", "ran"),
        ("midway", "FAIL", "the midway checks raised an error: RuntimeError: probe exploded"),
        ("import", "FAIL", "the import checks could not be loaded: ImportError: cannot import a thing"),
        ("dependency", "FAIL", "the dependency checks could not be loaded: ModuleNotFoundError: "
                               "No module named 'pinakes_no_such_dependency'"),
        ("not_written", "FAIL", "the not_written checks could not be loaded: ModuleNotFoundError: "
                                "No module named 'pinakes.doctor.checks_not_written'"),
        ("user_error", "FAIL", f"{tmp_path / 'pinakes.toml'}: kb.name is missing"),
        ("after", "OK", "still ran"),
    ]


@pytest.mark.parametrize("module_source", [None, "raise RuntimeError('broken on import')\n"],
                         ids=["missing from the install", "raises on import"])
def test_a_listed_area_that_does_not_import_fails_doctor_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    module_source: str | None,
) -> None:
    """`CHECK_MODULES` is the contract: a listed area whose module cannot be imported is never skipped."""
    if module_source is not None:
        planted = tmp_path / "planted"
        planted.mkdir()
        (planted / "checks_vanished.py").write_text(module_source)
        monkeypatch.setattr(doctor, "__path__", [*doctor.__path__, str(planted)])
    monkeypatch.setattr(doctor, "CHECK_MODULES", ("env", "vanished"))
    monkeypatch.setattr(doctor, "ENVIRONMENT_AREAS", frozenset({"env", "vanished"}))
    monkeypatch.chdir(tmp_path)

    code, report = doctor_json(capsys)

    vanished = by_name(report)["vanished"]
    assert vanished["status"] == "FAIL" and vanished["remedy"]
    assert vanished["detail"].startswith("the vanished checks could not be loaded: ")
    assert ("checks_vanished" in vanished["detail"]) if module_source is None else (
        "RuntimeError: broken on import" in vanished["detail"])
    assert (report["ok"], code) == (False, EXIT_FAILURE)


def test_a_raising_check_fails_doctor_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(checks_env, "check_sqlite_version", lambda: 1 / 0)
    monkeypatch.chdir(tmp_path)

    code = main(["doctor"])

    out = capsys.readouterr()
    assert code == EXIT_FAILURE
    assert "FAIL  env" in out.out and "ZeroDivisionError" in out.out
    assert "Traceback" not in out.out + out.err


def test_environment_probes_agree_with_sqlite3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        has_fts5 = True
    except sqlite3.OperationalError:
        has_fts5 = False
    can_load = hasattr(conn, "enable_load_extension")
    conn.close()

    _, report = doctor_json(capsys)

    checks = by_name(report)
    assert checks["sqlite fts5"]["status"] == ("OK" if has_fts5 else "FAIL")
    assert checks["sqlite load_extension"]["status"] == "OK"  # nothing built needs it: never a WARN
    assert "not needed by anything built" in checks["sqlite load_extension"]["detail"]
    assert ("permitted" in checks["sqlite load_extension"]["detail"]) == can_load
    assert checks["sqlite"]["detail"].startswith(sqlite3.sqlite_version)
    assert checks["sqlite"]["status"] == ("OK" if sqlite3.sqlite_version_info >= (3, 35) else "FAIL")
    assert checks["python"]["detail"].startswith("{}.{}.{}".format(*sys.version_info[:3]))


@pytest.mark.parametrize("can_load", [True, False])
def test_extension_loading_is_information_not_a_warning(monkeypatch: pytest.MonkeyPatch, can_load: bool) -> None:
    """Only the unbuilt sqlite-vec tier would load an extension: a healthy install shows no WARN for it."""
    monkeypatch.setattr(checks_env, "load_extension_available", lambda: can_load)
    check = checks_env.check_load_extension()
    assert check.status == "OK" and check.remedy is None
    assert "not needed by anything built" in check.detail


def test_missing_fts5_is_a_fail_with_a_remedy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(checks_env, "fts5_available", lambda: False)
    monkeypatch.chdir(tmp_path)  # no KB named, so the kb line is a WARN and cannot cause the exit code

    code, report = doctor_json(capsys)

    checks = by_name(report)
    assert checks["kb"]["status"] == "WARN"
    assert checks["sqlite fts5"]["status"] == "FAIL" and "uv" in checks["sqlite fts5"]["remedy"]
    assert code == EXIT_FAILURE


@pytest.mark.parametrize(("present", "expected"), [
    ({"fastembed", "pypdfium2"},
     {"light": "OK", "st": "OK", "pdf": "OK", "claude": "OK", "remote": "OK", "ray": "OK", "ocr": "OK", "ann": "OK"}),
    (set[str](),  # a core-only install: supported, but it cannot embed
     {"light": "WARN", "st": "WARN", "pdf": "WARN", "claude": "OK", "remote": "OK", "ray": "OK", "ocr": "OK", "ann": "OK"}),
    ({"sentence_transformers", "anthropic"},  # [claude] without the [pdf] it requires
     {"light": "OK", "st": "OK", "pdf": "WARN", "claude": "WARN", "remote": "OK", "ray": "OK", "ocr": "OK", "ann": "OK"}),
    ({"fastembed", "openai", "ray"},
     {"light": "OK", "st": "OK", "pdf": "WARN", "claude": "OK", "remote": "OK", "ray": "OK", "ocr": "OK", "ann": "OK"}),
])
def test_extras_report_by_install_state(
    monkeypatch: pytest.MonkeyPatch, present: set[str], expected: dict[str, str]
) -> None:
    def importable(module: str) -> bool:
        return module in present

    monkeypatch.setattr(checks_env, "is_importable", importable)

    results = {c.name: c for c in checks_env.check_extras()}

    assert {name[len("extra ["):-1]: c.status for name, c in results.items()} == expected
    for name, check in results.items():
        if check.status == "WARN":
            assert check.remedy and check.remedy.startswith("pip install ")
        if name == "extra [claude]" and check.status == "OK" and "anthropic" not in present:
            assert pip_install(("claude",)) in check.detail
    for extra, module in (("remote", "openai"), ("ray", "ray")):  # optional: named as installed or how to add
        detail = results[f"extra [{extra}]"].detail
        assert detail.startswith("installed") if module in present else pip_install((extra,)) in detail


def test_is_importable_never_imports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "pnk_probe_side_effect.py").write_text(textwrap.dedent("""
        raise AssertionError("find_spec must not execute the module")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))  # pyright: ignore[reportUnknownMemberType] -- pytest: `path` untyped

    assert checks_env.is_importable("pnk_probe_side_effect")
    assert "pnk_probe_side_effect" not in sys.modules
    assert not checks_env.is_importable("pnk_no_such_module.sub")
