"""The server boundary, in-process: no tool argument can name a file, and each refusal says which
argument and why. The same hostile values travel over a real MCP session in test_serve_e2e.py."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinakes.errors import PinakesError
from pinakes.serve import boundary
from pinakes.serve.config import load_kb
from pinakes.serve.specs import GET_ARGUMENTS, LINKS_ARGUMENTS, SEARCH_ARGUMENTS, STATUS_ARGUMENTS, TOOL_SPECS
from pinakes.serve.tools import PinakesTools
from tests.test_serve_helpers import (
    ABSENT_ULID,
    PATH_CHECKED_ARGUMENTS,
    PATH_LIKE_VALUES,
    call_tool,
    doc_ids,
    hostile_call,
    make_kb,
    sync_kb,
)


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PinakesTools]:
    root = make_kb(tmp_path_factory.mktemp("boundary") / "kb", "boundary",
                   {"wings.md": "# Wings\n\nWings generate lift.\n"})
    sync_kb(root)
    served = PinakesTools([load_kb(root)])
    yield served
    served.close()


@pytest.mark.parametrize("value", PATH_LIKE_VALUES.values(), ids=list(PATH_LIKE_VALUES))
@pytest.mark.parametrize(("tool", "argument"), PATH_CHECKED_ARGUMENTS, ids=[f"{t}.{a}" for t, a in PATH_CHECKED_ARGUMENTS])
def test_path_like_values_are_refused_in_every_identifier_and_filter(
    tools: PinakesTools, tool: str, argument: str, value: str
) -> None:
    with pytest.raises(PinakesError) as refused:
        tools.call(tool, hostile_call(tool, argument, value))
    error = refused.value
    assert isinstance(error, (boundary.ToolArgumentError, boundary.NotServedError))
    named = f"`{argument}`" in error.message or "KB" in error.message
    assert named, f"the refusal does not name the argument: {error.message}"
    assert error.remedy


@pytest.mark.parametrize("name", ["path", "file", "uri", "url", "root", "directory", "glob", "pattern"])
@pytest.mark.parametrize("tool", ["pinakes_search", "pinakes_get", "pinakes_list_kbs", "pinakes_links"])
def test_an_argument_the_schema_does_not_declare_is_refused_not_dropped(tools: PinakesTools, tool: str,
                                                                        name: str) -> None:
    arguments = hostile_call(tool, "kb", "boundary") if tool != "pinakes_list_kbs" else {}
    arguments[name] = "/etc/passwd"
    with pytest.raises(boundary.ToolArgumentError, match=f"does not take `{name}`"):
        tools.call(tool, arguments)


@pytest.mark.parametrize("doc_id", [
    ABSENT_ULID.lower(),  # decodes to the same ULID, but ids are compared as strings
    ABSENT_ULID[:-1],
    ABSENT_ULID + "0",
    "01ARZ3NDEKTSV4RRFFQ69G5FA\u0412",  # Cyrillic VE for the final V
    "01ARZ3NDEKTSV4RRFFQ69G5FAU",  # U is not Crockford base32
    "docs/wings.md",
    12345,
    None,
    ["01ARZ3NDEKTSV4RRFFQ69G5FAV"],
])
def test_get_takes_only_a_canonical_ulid(tools: PinakesTools, doc_id: object) -> None:
    with pytest.raises(boundary.ToolArgumentError, match="doc_id"):
        tools.call("pinakes_get", {"doc_id": doc_id})


def test_a_ulid_that_is_not_indexed_is_not_found(tools: PinakesTools) -> None:
    with pytest.raises(boundary.NotServedError, match="no document"):
        tools.call("pinakes_get", {"doc_id": ABSENT_ULID})


@pytest.mark.parametrize("kb", ["BOUNDARY", "boundary ", "b\u043eundary", "\uff42oundary"])
def test_kb_must_match_a_served_alias_exactly(tools: PinakesTools, kb: str) -> None:
    with pytest.raises(PinakesError):
        tools.call("pinakes_search", {"query": "wings", "kb": kb})


@pytest.mark.parametrize(("argument", "value"), [
    ("k", "5"), ("k", 0), ("k", -3), ("k", 2.5), ("k", True),
    ("char_start", -1), ("char_start", "0"), ("char_end", 0), ("page_start", 0), ("page_end", 10**12),
    ("all_tags", "yes"), ("mode", "sql"), ("mode", "BM25"),
])
def test_numbers_and_switches_are_type_and_range_checked(tools: PinakesTools, argument: str, value: object) -> None:
    tool = "pinakes_get" if argument.startswith(("char", "page")) else "pinakes_search"
    arguments = hostile_call(tool, "kb", "boundary")
    arguments[argument] = value
    with pytest.raises(boundary.ToolArgumentError, match=f"`{argument}`"):
        tools.call(tool, arguments)


@pytest.mark.parametrize("query", ["", "   ", "wings\x00", "wings\u202e", "w" * (boundary.MAX_QUERY_CHARS + 1), 42])
def test_a_query_with_control_characters_or_no_words_or_too_long_is_refused(tools: PinakesTools,
                                                                         query: object) -> None:
    with pytest.raises(boundary.ToolArgumentError, match="`query`"):
        tools.call("pinakes_search", {"query": query, "mode": "bm25"})


def test_path_shaped_text_in_a_query_is_searched_as_words(tools: PinakesTools, tmp_path: Path) -> None:
    """The query is the one free-text argument: it is never a location, so `../` in it is just words."""
    result = call_tool(tools, "pinakes_search", {"query": "../../wings/*.md file:///lift", "mode": "bm25"})
    assert [p["path"] for p in result["passages"]] == ["docs/wings.md"]


def test_a_tag_may_hold_a_colon_or_a_slash_but_not_a_uri() -> None:
    assert boundary.check_tags(["status:draft", "lang/python"]) == ["status:draft", "lang/python"]
    for bad in ("file:etc", "x://y", "/abs", "a/../b", "tag*"):
        with pytest.raises(boundary.ToolArgumentError):
            boundary.check_tags([bad])


def test_an_unknown_tool_is_refused(tools: PinakesTools) -> None:
    with pytest.raises(boundary.NotServedError, match="no tool named"):
        tools.call("pinakes_read_file", {"path": "/etc/passwd"})


@given(st.text(alphabet=st.sampled_from(list("./\\~:%*?[]{}ab09_-\x00\u2215\uff0f\u2024 ")), max_size=24))
@settings(max_examples=400, deadline=None)
def test_an_accepted_path_prefix_never_leaves_the_kb_root(candidate: str) -> None:
    try:
        prefix = boundary.check_path_prefix(candidate)
    except boundary.ToolArgumentError:
        return
    root = "/kb/root"
    joined = os.path.normpath(os.path.join(root, prefix))
    assert joined == root or joined.startswith(root + "/"), prefix
    assert not any(char in prefix for char in "*?[]{}\\\x00")
    assert not re.search("%[0-9A-Fa-f]{2}", prefix), "a percent-escape would decode to another path"


def test_no_tool_declares_a_path_or_uri_parameter() -> None:
    names = {spec.name for spec in TOOL_SPECS}
    assert names == {"pinakes_search", "pinakes_get", "pinakes_list_kbs", "pinakes_links", "pinakes_status"}
    for spec in TOOL_SPECS:
        schemas: list[dict[str, Any]] = [spec.input_schema]  # JSON Schema: nested dicts, read by key
        while schemas:  # each object schema, the items of an array of objects included
            schema = schemas.pop()
            assert schema["additionalProperties"] is False, spec.name
            for name, prop in schema["properties"].items():
                assert prop.get("format") not in ("uri", "uri-reference", "iri", "path"), (spec.name, name)
                assert name not in ("path", "file", "uri", "url", "dir", "directory", "root"), (spec.name, name)
                if prop.get("items", {}).get("type") == "object":
                    schemas.append(prop["items"])
        assert spec.annotations["read_only_hint"] is True
    links: dict[str, Any] = next(spec.input_schema for spec in TOOL_SPECS if spec.name == "pinakes_links")
    get: dict[str, Any] = next(spec.input_schema for spec in TOOL_SPECS if spec.name == "pinakes_get")
    for schema in (links, get["properties"]["documents"]["items"]):
        assert schema["required"] == ["doc_id"]
        assert schema["properties"]["doc_id"]["pattern"] == "^[0-9A-HJKMNP-TV-Z]{26}$"
    assert get["properties"]["doc_id"]["pattern"] == "^[0-9A-HJKMNP-TV-Z]{26}$"  # or one, by itself


def test_each_schema_declares_exactly_the_arguments_its_tool_accepts() -> None:
    accepted = {"pinakes_search": SEARCH_ARGUMENTS, "pinakes_get": GET_ARGUMENTS, "pinakes_list_kbs": (),
                "pinakes_links": LINKS_ARGUMENTS, "pinakes_status": STATUS_ARGUMENTS}
    for spec in TOOL_SPECS:
        schema: dict[str, Any] = spec.input_schema
        assert set(schema["properties"]) == set(accepted[spec.name]), spec.name


def test_the_served_kb_answers_to_its_ulid_as_well_as_its_alias(tools: PinakesTools) -> None:
    kb = tools.kbs[0]
    by_alias = call_tool(tools, "pinakes_search", {"query": "wings", "kb": kb.alias, "mode": "bm25"})
    by_id = call_tool(tools, "pinakes_search", {"query": "wings", "kb": kb.kb_id, "mode": "bm25"})
    assert by_alias["passages"] == by_id["passages"]
    assert by_id["kb"] == {"alias": "boundary", "id": kb.kb_id}
    assert doc_ids(kb.root)["docs/wings.md"] == by_id["passages"][0]["doc_id"]


@pytest.mark.parametrize("value", PATH_LIKE_VALUES.values(), ids=list(PATH_LIKE_VALUES))
@pytest.mark.parametrize(("tool", "argument"), [(tool, argument) for tool, argument in PATH_CHECKED_ARGUMENTS
                                                 if argument in ("kb", "tags")],
                         ids=lambda pair: str(pair))
def test_a_refused_kb_or_tag_is_not_given_path_prefix_advice(tools: PinakesTools, tool: str, argument: str,
                                                             value: str) -> None:
    """Issue #26: a bad `kb` or `tags` value was told to pass "a prefix relative to the KB root, such
    as docs/", which is advice for `path_prefix` only."""
    with pytest.raises(PinakesError) as refused:
        tools.call(tool, hostile_call(tool, argument, value))
    remedy = refused.value.remedy or ""
    assert "docs/" not in remedy and "prefix" not in remedy, remedy


@pytest.mark.parametrize(("argument", "value", "advice"), [
    ("kb", "../other", "pinakes_list_kbs"),
    ("kb", "a/b", "pinakes_list_kbs"),
    ("tags", "file:///etc", "the tag as written"),
    ("tags", "tag*", "the tag as written"),
    ("path_prefix", "/etc", "docs/"),
])
def test_each_path_checked_argument_gets_advice_for_its_own_kind_of_value(argument: str, value: str,
                                                                         advice: str) -> None:
    checks: dict[str, Callable[[object], object]] = {"kb": boundary.check_kb_name,
                                                     "tags": lambda v: boundary.check_tags([v]),
                                                     "path_prefix": boundary.check_path_prefix}
    check = checks[argument]
    with pytest.raises(boundary.ToolArgumentError) as refused:
        check(value)
    assert advice in (refused.value.remedy or "")
