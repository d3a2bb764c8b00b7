from collections.abc import Mapping

class ModuleTaskLoader:
    def __init__(self, mod_dict: Mapping[str, object]) -> None: ...
