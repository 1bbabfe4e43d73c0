"""The LCEL adapter: a ``Runnable`` that returns the guarded messages to send.

```python
chain = prompt | as_runnable(guard, tools=tools) | model.bind_tools(tools)
```

The step takes a list of messages, a ``PromptValue`` (what a ``ChatPromptTemplate``
yields) or a dict holding messages, and returns ``list[BaseMessage]``: the history
after ``ContextGuard.prepare``. The report goes out as custom events (see
``_callbacks``), so it shows in ``astream_events`` and in traces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.config import run_in_executor
from langgraph.store.base import BaseStore

from ..engine import InvalidInputError, to_messages
from ._callbacks import aemit, emit, usage_of
from ._clock import call_time
from ._image_archive import check_keep, offload_images

if TYPE_CHECKING:
    from ..engine import ContextGuard, PrepareResult

GuardInput = Sequence[Any] | PromptValue | dict[str, Any]
"""What the runnable accepts: message-likes, a prompt value, or a dict of them."""


class GuardRunnable(Runnable[GuardInput, list[BaseMessage]]):
    """An LCEL step that keeps the messages inside the model's context window.

    Args:
        guard: The guard whose ``prepare`` does the work (shared, thread-safe).
        tools: Tools bound to the model; their schemas count against the budget.
        model: The chat model (or its name) whose window applies; defaults to the
            guard's own model.
        messages_key: Where the messages are when the input is a dict.
        name: The run name in traces.
        keep_images: Send only the newest this many images whole, and each older
            image block as a pointer, archived per conversation (the config's
            ``thread_id``) in ``image_store``, else the running graph's store;
            pair it with ``make_image_reader()``. None (default) sends every image.
        image_store: Where offloaded images go.
    """

    def __init__(
        self,
        guard: ContextGuard,
        *,
        tools: Sequence[Any] | None = None,
        model: Any = None,
        messages_key: str = "messages",
        name: str | None = None,
        keep_images: int | None = None,
        image_store: BaseStore | None = None,
    ) -> None:
        self.guard = guard
        self.keep_images = (
            None
            if keep_images is None
            else check_keep(keep_images, field="keep_images", owner="as_runnable")
        )
        self.image_store = image_store
        self.tools = list(tools) if tools else None
        self.model = model
        self.messages_key = messages_key
        self.name = name or "ContextGuard"

    @property
    def InputType(self) -> Any:
        """The accepted input type."""
        return GuardInput

    @property
    def OutputType(self) -> Any:
        """The output type: the messages to send."""
        return list[BaseMessage]

    def _read(self, value: Any, config: RunnableConfig) -> Any:
        messages = self._messages(value)
        if self.keep_images is None:
            return messages
        return offload_images(
            to_messages(messages),
            self.keep_images,
            store=self.image_store,
            config=config,
        )

    def _messages(self, value: Any) -> Any:
        if isinstance(value, PromptValue):
            return value.to_messages()
        if isinstance(value, dict):
            if self.messages_key not in value:
                raise InvalidInputError(
                    f"Input dict has no {self.messages_key!r} key "
                    f"(keys: {sorted(value)}).",
                    hint="pass messages_key=... to as_runnable() to name the key.",
                )
            return value[self.messages_key]
        return value

    def _run(self, value: Any, config: RunnableConfig) -> PrepareResult:
        return self.guard.prepare(
            self._read(value, config),
            tools=self.tools,
            model=self.model,
            now=call_time(self.guard),
        )

    def _prepare(
        self,
        value: Any,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> list[BaseMessage]:
        result = self._run(value, config)
        emit(
            result.report,
            source="runnable",
            config=config,
            usage=usage_of(self.guard, result),
        )
        return result.messages

    async def _aprepare(
        self,
        value: Any,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> list[BaseMessage]:
        result = await run_in_executor(config, self._run, value, config)
        await aemit(
            result.report,
            source="runnable",
            config=config,
            usage=usage_of(self.guard, result),
        )
        return result.messages

    def invoke(
        self, input: GuardInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        """Return the guarded messages for ``input``."""
        return self._call_with_config(self._prepare, input, config)

    async def ainvoke(
        self, input: GuardInput, config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[BaseMessage]:
        """Async ``invoke``; the counting runs in the config's executor."""
        return await self._acall_with_config(self._aprepare, input, config)


def as_runnable(
    guard: ContextGuard,
    *,
    tools: Sequence[Any] | None = None,
    model: Any = None,
    messages_key: str = "messages",
    keep_images: int | None = None,
    image_store: BaseStore | None = None,
) -> GuardRunnable:
    """Wrap a guard as an LCEL step that goes between a prompt and a model.

    Args:
        guard: The guard to apply.
        tools: Tools bound to the model, counted against the budget.
        model: The chat model (or name) whose context window applies.
        messages_key: The key holding the messages when the input is a dict.
        keep_images: Images sent whole, the newest ones; older ones go as pointers
            to ``image_store`` (see ``GuardRunnable``). None sends every image.
        image_store: Where offloaded images go; None uses the running graph's.

    Returns:
        A runnable from messages (or a prompt value, or a dict) to the guarded
        ``list[BaseMessage]``; ``invoke``, ``ainvoke``, ``batch`` and ``stream`` work.
    """
    return GuardRunnable(
        guard,
        tools=tools,
        model=model,
        messages_key=messages_key,
        keep_images=keep_images,
        image_store=image_store,
    )
