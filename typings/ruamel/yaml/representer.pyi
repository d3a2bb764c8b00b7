# ruamel.yaml's representers, as far as registering one for a type (see main.pyi for why these stubs exist).
from collections.abc import Callable
from typing import Self, TypeVar

from ruamel.yaml.nodes import Node, ScalarNode

_T = TypeVar("_T")

class BaseRepresenter:
    @classmethod
    def add_representer(cls, data_type: type[_T], representer: Callable[[Self, _T], Node]) -> None: ...
    def represent_scalar(
        self, tag: str, value: str, style: str | None = None, anchor: str | None = None,
    ) -> ScalarNode: ...

class SafeRepresenter(BaseRepresenter): ...
class RoundTripRepresenter(SafeRepresenter): ...
