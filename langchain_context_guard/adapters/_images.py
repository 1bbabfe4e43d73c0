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
from langchain_core.messages import AnyMessage, BaseMessage
from langgraph.store.base import BaseStore

from ._image_archive import check_keep, make_image_reader, offload_images
from ._namespace import check_prefix

__all__ = ["ImageOffloadMiddleware", "make_image_reader"]


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
        self.keep = check_keep(keep, field="keep", owner="ImageOffloadMiddleware")
        self.store = store
        self.prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def _offload(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        messages: list[BaseMessage] = list(request.messages)
        sent = offload_images(
            messages, self.keep, store=self.store, config=None, prefix=self.prefix
        )
        if sent is messages:
            return request
        return request.override(messages=cast("list[AnyMessage]", sent))

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
