"""Old images sent as pointers, archived per conversation, and viewed back.

Shared by every adapter that offloads images (``ImageOffloadMiddleware``,
``pre_model_hook(keep_images=...)``, ``as_runnable(keep_images=...)``): the
newest ``keep`` images are sent whole and every older image block as a one-line
pointer (``offload_old_images``); each offloaded block is written once to the
LangGraph store, namespace ``(*namespace_prefix, "context_guard", "images",
<thread_id>)``, key the pointer's ``img_...`` key. ``make_image_reader`` gives the
agent a ``view_image`` tool that puts an offloaded image back, as a tool result,
from the conversation's own namespace only. Needs no LangChain agents.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage
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


def check_keep(keep: int, *, field: str, owner: str) -> int:
    """``keep`` if it is a number of images (0 or more), else ``ConfigError``."""
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 0:
        raise ConfigError(
            f"{owner} {field} must be 0 or more, got {keep!r}.",
            field=field,
            hint=f"pass the number of newest images to send whole, e.g. {field}=2.",
        )
    return keep


def offload_images(
    messages: list[BaseMessage],
    keep: int,
    *,
    store: BaseStore | None,
    config: RunnableConfig | None,
    prefix: tuple[str, ...] = (),
    only_if_archived: bool = False,
) -> list[BaseMessage]:
    """``messages`` with images past the newest ``keep`` sent as pointers.

    The offloaded blocks go to ``store`` (else the running graph's), in the
    conversation's namespace. Without a store or a thread id they are not
    archived (a warning says so): the pointers are still sent, since the
    caller's history keeps the images, unless ``only_if_archived`` (a caller
    that writes what it sends back to its state): then the images stay whole.
    The input list itself when nothing is offloaded; never changed.
    """
    sent = offload_old_images(messages, keep)
    if sent is messages:
        return messages
    target = ResultArchive(store).target()
    namespace = image_namespace(config, prefix)
    if target is None or namespace is None:
        logger.warning(
            "Context guard: %d old image(s) not archived: no store or no "
            "thread_id (images are archived per conversation)%s.",
            len(old_images(messages, keep)),
            "; they are sent whole" if only_if_archived else "",
        )
        return messages if only_if_archived else sent
    for key, block in old_images(messages, keep).items():
        if target.get(namespace, key) is None:
            target.put(namespace, key, {"block": block})
    return sent


def make_image_reader(
    store: BaseStore | None = None,
    *,
    name: str = "view_image",
    namespace_prefix: Sequence[str] = (),
) -> BaseTool:
    """The ``view_image`` tool: put an offloaded image back, by its key."""
    prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def view(key: str, config: RunnableConfig) -> str | list[Any]:
        target = ResultArchive(store).target()
        namespace = image_namespace(config, prefix)
        if target is None or namespace is None:
            return "No image archive for this conversation (no store or thread_id)."
        item = target.get(namespace, key)
        value = item.value if item is not None else None
        block = value.get("block") if isinstance(value, dict) else None
        if not isinstance(block, dict):  # absent, or not what we wrote
            return f"No offloaded image {key!r} in this conversation."
        return [{"type": "text", "text": f"Image {key}:"}, block]

    return StructuredTool.from_function(
        view,
        name=name,
        description="Look again at an earlier image the context guard offloaded "
        'from the conversation: give the key its marker names (view_image("img_...")).',
    )
