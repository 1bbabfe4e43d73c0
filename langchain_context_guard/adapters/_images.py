"""Old images offloaded for ``create_agent``: ``ImageOffloadMiddleware``.

Before each model call it sends the newest ``keep`` images whole and every
older image block as a one-line pointer (``offload_old_images``), and writes
each offloaded block once to the LangGraph store: namespace
``(*namespace_prefix, "context_guard", "images", <thread_id>)``, key the
pointer's ``img_...`` key. State is left alone (the next call offloads the same
images the same way, so the prompt prefix stays stable). ``make_image_reader``
gives the agent a ``view_image`` tool that puts an offloaded image back, as a
tool result, from the conversation's own namespace only. Put the middleware
before ``ContextGuardMiddleware`` so the guard counts what is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        "ImageOffloadMiddleware needs LangChain v1 agents (langchain>=1.0). "
        'Install it with: pip install "langchain-context-guard[agents]"'
    ) from exc
from langchain_core.messages import AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import BaseStore

from ..engine import ConfigError, offload_old_images, old_images
from ._namespace import check_prefix, configurable, resolve_prefix, scoped, thread_of
from ._results import ResultArchive

NAMESPACE = ("images",)
logger = logging.getLogger("langchain_context_guard")


def image_namespace(
    config: RunnableConfig | None, prefix: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The conversation's image namespace; None without a thread id."""
    thread = thread_of(config)
    labels = resolve_prefix(prefix, configurable(config))
    if thread is None or labels is None:
        return None
    return scoped(labels, NAMESPACE, thread)


class ImageOffloadMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Send the newest ``keep`` images whole, older ones as pointers, archived.

    Args:
        keep: Images sent whole, the newest ones (over the whole history).
        store: Where offloaded images go; None uses the agent's store.
        namespace_prefix: Labels before the archive's own, as in
            ``ResultArchive``; give ``make_image_reader`` the same.
    """

    def __init__(
        self,
        keep: int = 2,
        *,
        store: BaseStore | None = None,
        namespace_prefix: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        if keep < 0:
            raise ConfigError(
                f"ImageOffloadMiddleware keep must be 0 or more, got {keep}.",
                field="keep",
                hint="pass the number of newest images to send whole, e.g. keep=2.",
            )
        self.keep = keep
        self.store = store
        self.prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def _offload(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        messages: list[AnyMessage] = list(request.messages)
        sent = cast("list[AnyMessage]", offload_old_images(messages, self.keep))
        if sent is messages:
            return request
        self._archive(old_images(messages, self.keep))
        return request.override(messages=sent)

    def _archive(self, images: dict[str, dict[str, Any]]) -> None:
        store = ResultArchive(self.store).target()
        namespace = image_namespace(None, self.prefix)
        if store is None or namespace is None:
            logger.warning(
                "Context guard: %d offloaded image(s) not archived: no store or "
                "no thread_id (images are archived per conversation).",
                len(images),
            )
            return
        for key, block in images.items():
            if store.get(namespace, key) is None:
                store.put(namespace, key, {"block": block})

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Offload old images from this call's messages."""
        return handler(self._offload(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async ``wrap_model_call``."""
        return await handler(self._offload(request))


def make_image_reader(
    store: BaseStore | None = None,
    *,
    name: str = "view_image",
    namespace_prefix: tuple[str, ...] = (),
) -> BaseTool:
    """The ``view_image`` tool: put an offloaded image back, by its key."""
    prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def view(key: str, config: RunnableConfig) -> str | list[Any]:
        target = ResultArchive(store).target()
        namespace = image_namespace(config, prefix)
        if target is None or namespace is None:
            return "No image archive for this conversation (no store or thread_id)."
        item = target.get(namespace, key)
        if item is None:
            return f"No offloaded image {key!r} in this conversation."
        return [{"type": "text", "text": f"Image {key}:"}, item.value["block"]]

    return StructuredTool.from_function(
        view,
        name=name,
        description="Look again at an earlier image the context guard offloaded "
        'from the conversation: give the key its marker names (view_image("img_...")).',
    )
