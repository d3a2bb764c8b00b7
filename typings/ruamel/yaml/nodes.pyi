# ruamel.yaml's composed nodes, as `YAML.compose` returns them (see main.pyi for why these stubs exist).
from ruamel.yaml.error import StreamMark

class Node:
    start_mark: StreamMark
    end_mark: StreamMark
    anchor: object  # None, or the anchor's name: a str (an Anchor, with .value, in some versions)
    @property
    def tag(self) -> object: ...  # a str (0.18+), a Tag (with .value) in others

class ScalarNode(Node):
    value: str
    style: str | None  # None (plain), '"', "'", "|" or ">"

class CollectionNode(Node):
    flow_style: bool | None

class SequenceNode(CollectionNode):
    value: list[Node]

class MappingNode(CollectionNode):
    value: list[tuple[Node, Node]]
