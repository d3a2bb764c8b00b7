from collections.abc import Mapping, Sequence

from doit.task import Task

def load_tasks(namespace: Mapping[str, object], command_names: Sequence[str] = ..., allow_delayed: bool = ...,
               args: Sequence[str] = ..., config: Mapping[str, object] | None = ...,
               task_opts: Mapping[str, object] | None = ...) -> list[Task]: ...
