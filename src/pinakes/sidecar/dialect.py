"""The YAML that sidecars are read and written in: ruamel.yaml's round-trip mode under YAML 1.2,
with every scalar Pinakes does not own kept exactly as written.

Reading and rewriting share this one configuration because a rewrite must resolve the file exactly
as the reader did; anything else could respell a value the author wrote and Pinakes never meant to
touch.
"""

from __future__ import annotations

from ruamel.yaml import YAML
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.nodes import Node, ScalarNode
from ruamel.yaml.representer import RoundTripRepresenter

from pinakes.sidecar.model import MAX_NESTING
from pinakes.sidecar.tree import tag_text

UTF8_BOM = b"\xef\xbb\xbf"
YAML_TAG = "tag:yaml.org,2002:"
STR, NULL, BOOL, INT, FLOAT, TIMESTAMP, SEQ, MAP = (
    YAML_TAG + name for name in ("str", "null", "bool", "int", "float", "timestamp", "seq", "map")
)
STRING_TAGS = (STR, TIMESTAMP)  # a timestamp is kept as the text written


class _Verbatim:
    """A null, boolean, number or timestamp kept exactly as written (`~`, `True`, `+12`,
    `2024-1-5`), so rewriting a file never respells a value Pinakes does not own."""

    __slots__ = ("tag", "text")

    def __init__(self, tag: str, text: str):
        self.tag = tag
        self.text = text


class _SidecarConstructor(RoundTripConstructor):
    pass


class _SidecarRepresenter(RoundTripRepresenter):
    pass


def _construct_verbatim(constructor: RoundTripConstructor, node: ScalarNode) -> _Verbatim:
    return _Verbatim(tag_text(node.tag), node.value)


def _represent_verbatim(representer: RoundTripRepresenter, data: _Verbatim) -> Node:
    return representer.represent_scalar(data.tag, data.text)


# Registered on subclasses, so no other user of ruamel in the process is affected.
for _verbatim_tag in (NULL, BOOL, INT, FLOAT, TIMESTAMP):
    _SidecarConstructor.add_constructor(_verbatim_tag, _construct_verbatim)
_SidecarRepresenter.add_representer(_Verbatim, _represent_verbatim)


def new_yaml() -> YAML:
    # A fresh instance each time: ruamel keeps per-document state (such as a %YAML directive
    # seen while loading) on the instance and would carry it into the next dump.
    yaml = YAML(typ="rt")
    yaml.Constructor = _SidecarConstructor
    yaml.Representer = _SidecarRepresenter
    yaml.preserve_quotes = True
    yaml.width = 1 << 16  # never re-fold a long line the author wrote on one line
    yaml.allow_duplicate_keys = False
    # Newer ruamel stops composing past this depth; older versions hit RecursionError instead,
    # and _compose reports both the same way.
    yaml.max_depth = MAX_NESTING
    return yaml
