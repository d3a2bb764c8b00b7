from collections.abc import Iterable, Mapping, Sequence

from doit.cmd_base import ModuleTaskLoader

class DoitMain:
    def __init__(self, task_loader: ModuleTaskLoader | None = None,
                 config_filenames: Iterable[str] = ..., extra_config: Mapping[str, object] | None = None) -> None: ...
    def run(self, all_args: Sequence[str]) -> int: ...
