"""The type of a parsed JSON (or YAML-as-JSON) value, shared by every module that reads one, and the
checks that narrow an unchecked value to what a reader expects.

A value typed `JSONValue` narrows with `isinstance` alone (`dict[str, JSONValue]`, ...). One typed
`object` (a YAML document, a payload read back from a cache) narrows through `is_list` and
`is_dict`, which say what can be read from it: `isinstance` alone would leave its items unknown.
"""

from __future__ import annotations

from typing import TypeAlias, TypeGuard

JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"


def is_list(value: object) -> TypeGuard[list[object]]:
    return isinstance(value, list)


def is_dict(value: object) -> TypeGuard[dict[object, object]]:
    return isinstance(value, dict)


def is_object(value: object) -> TypeGuard[dict[str, object]]:
    """`value` is a parsed JSON object: a dict, whose keys JSON makes strings. (A YAML mapping's keys
    may be anything: read one with `is_dict`.)"""
    return isinstance(value, dict)


def str_list(value: object) -> list[str] | None:
    """`value` when it is a list of strings, else None."""
    if not is_list(value):
        return None
    strings = [item for item in value if isinstance(item, str)]
    return strings if len(strings) == len(value) else None


def int_list(value: object) -> list[int] | None:
    """`value` when it is a list of integers (a boolean is not one), else None."""
    if not is_list(value):
        return None
    numbers = [item for item in value if type(item) is int]
    return numbers if len(numbers) == len(value) else None


__all__ = ["JSONObject", "JSONValue", "int_list", "is_dict", "is_list", "is_object", "str_list"]
