"""The type of a parsed JSON (or YAML-as-JSON) value, shared by every module that reads one."""

from __future__ import annotations

from typing import TypeAlias

JSONValue: TypeAlias = "str | int | float | bool | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"

__all__ = ["JSONObject", "JSONValue"]
