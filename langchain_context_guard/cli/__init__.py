"""The ``context-guard`` command: ``demo``, ``inspect`` and ``replay``.

``_main`` parses arguments and loads the policy; each sub-command's module loads
only when it runs, so ``context-guard --help`` stays quick. ``_demo`` is the
offline demo agent (``run_demo``) with its scripted model and repository. The
top of the stack: may import every other subpackage; nothing imports it.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._demo import (
        FACT,
        FACT_FILE,
        SYSTEM_PROMPT,
        TASK,
        CallRecord,
        DemoResult,
        ScriptedAgentModel,
        exploration_plan,
        make_tools,
        run_demo,
        scripted_summary,
        write_repository,
    )
    from ._main import main
    from ._replay import main_replay

__getattr__ = lazy_getattr(
    __name__,
    {
        "CallRecord": "._demo",
        "FACT": "._demo",
        "FACT_FILE": "._demo",
        "DemoResult": "._demo",
        "SYSTEM_PROMPT": "._demo",
        "TASK": "._demo",
        "ScriptedAgentModel": "._demo",
        "exploration_plan": "._demo",
        "make_tools": "._demo",
        "run_demo": "._demo",
        "scripted_summary": "._demo",
        "write_repository": "._demo",
        "main": "._main",
        "main_replay": "._replay",
    },
)

__all__ = [
    "FACT",
    "FACT_FILE",
    "SYSTEM_PROMPT",
    "TASK",
    "CallRecord",
    "DemoResult",
    "ScriptedAgentModel",
    "exploration_plan",
    "main",
    "main_replay",
    "make_tools",
    "run_demo",
    "scripted_summary",
    "write_repository",
]
