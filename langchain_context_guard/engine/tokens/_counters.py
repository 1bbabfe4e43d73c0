"""Token counters: a tiktoken encoding (see ``_encodings``) behind a per-message cache.

Counts follow what providers bill: a fixed overhead per message, the text of every
content block, tool-call names and JSON arguments, tool schemas, and a flat,
documented cost for images and other binary blocks (never their base64 length).
Texts over ``_encodings.EXACT_LIMIT`` characters are counted from samples. Usage
anchoring, calibration against the provider's own counts and ``count_messages``
live in ``_anchor``.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage

from .._messages import drop_oldest, sweep_dead
from ._blocks import MESSAGE_OVERHEAD as MESSAGE_OVERHEAD
from ._blocks import TOOL_CALL_OVERHEAD as TOOL_CALL_OVERHEAD
from ._blocks import call_parts, message_parts
from ._cache_keys import content_key as content_key
from ._cache_keys import text_key
from ._encodings import EXACT_LIMIT, batch_lengths, counts_pieces, piecewise, place
from ._encodings import TokenizerFallbackWarning as TokenizerFallbackWarning
from ._encodings import encoding_for_model as encoding_for_model
from ._encodings import load_encoding as load_encoding
from ._image_cost import image_rule
from ._pieces import PIECE_CHARS, pieces, split_pairs

_SWEEP_FLOOR = 4_096
_BATCH_MIN = 16
"""Fewer uncounted messages than this are encoded one by one (``prime``)."""
_TEXT_MIN, _TEXT_MEMORY = 512, 1_024
"""Texts this long are counted once per content (``_count_text``); how many kept."""

REPLY_OVERHEAD = 3
"""Tokens that prime the reply, once per request."""
TOOL_SCHEMA_OVERHEAD = 8
"""Tokens around each tool schema besides its JSON."""


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of one message, and of tool schemas."""

    name: str

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message, overhead included."""
        ...

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tokens of the tool schemas bound to the model."""
        ...


class TiktokenCounter:
    """Counts with a tiktoken encoding; caches every message's count.

    The counts are tiktoken's; where bpe-openai serves the encoding its encoder
    gives them (``_bpe``), and ``name`` says which (``bpe-openai:cl100k_base``).

    The cache is keyed by message identity (checked through a weak reference and the
    content object) and, for equal messages rebuilt from a checkpoint, by content
    hash, so a history that grew by one message costs about one encode per call.
    Identity entries (about 190 bytes each: the recent messages, which are
    counted again) are at most ``max_entries``; content counts (an int each)
    at most ``max_contents``, enough for a 50,000-message history with its
    compressed copies. When full, the oldest quarter goes (the oldest messages,
    which a pruned history no longer sends; clearing all re-encoded such a
    history at once). Identity entries whose message is gone are swept every
    4,096 new ones (they hold the content). Safe to share between threads.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | None = None,
        image_tokens: int = 1_600,
        chars_per_token: float = 3.6,
        max_entries: int = 16_384,
        max_contents: int = 200_000,
    ) -> None:
        self.encoding = encoding or encoding_for_model(model)
        self._length, self.name = load_encoding(self.encoding, chars_per_token)
        self._lengths = batch_lengths(self._length)
        self._piecewise = piecewise(self._length)
        self.image_tokens = image_tokens
        self.image_rule = image_rule(model)
        """Whose pricing an image of known size is counted by (``_image_cost``)."""
        self._by_id: dict[int, tuple[weakref.ref[BaseMessage], Any, Any, int]] = {}
        self._by_key: dict[int, int] = {}
        self._max = max_entries
        self._max_contents = max_contents
        self._sweep_at = _SWEEP_FLOOR
        self._texts: dict[int, int] = {}  # by ``text_key``
        self._lock = threading.Lock()
        self.encoded = 0
        """How many messages were actually encoded (cache misses)."""

    def sweep(self) -> None:
        """Drop the counts kept for messages that are gone (``_release``)."""
        with self._lock:
            sweep_dead(self._by_id)
            self._sweep_at = len(self._by_id) + _SWEEP_FLOOR

    def forget(self, messages: Iterable[BaseMessage]) -> None:
        """Drop the counts kept by content for ``messages`` (``_release``)."""
        keys = [hash(content_key(m)) for m in messages]
        with self._lock:
            for key in keys:
                self._by_key.pop(key, None)

    def text_tokens(self, text: str) -> int:
        """Tokens of a plain string."""
        return self._length(text)

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message, overhead included (cached)."""
        tool_calls = message.tool_calls if isinstance(message, AIMessage) else None
        known = self._known(message, tool_calls)
        if known is not None:
            return known
        key = hash(content_key(message))  # an int: a third of the tuple's memory
        with self._lock:
            count = self._by_key.get(key)
            if count is None:
                count = self._encode(message)
                self.encoded += 1
            self._store(message, key, count, tool_calls)
        return count

    def prime(
        self,
        messages: Sequence[BaseMessage],
        pairs: Sequence[tuple[BaseMessage, BaseMessage]] = (),
    ) -> tuple[list[BaseMessage], list[int]]:
        """Count the messages not counted yet, their texts encoded in one batch.

        tiktoken encodes the batch on threads. The counts are
        ``count_message``'s (a sum over texts; a short text, or the tool calls
        of a rewritten copy, the same list object, is encoded once per batch).
        ``pairs``: (message, rewrite) pairs whose texts share a head or tail
        (``_pieces``), encoded once for both.
        Returns the messages it counted and their counts (flat lists: few
        objects for the garbage collector).
        """
        if self._lengths is None or len(messages) < _BATCH_MIN:
            return [], []  # too few to batch, whatever is counted already
        todo: dict[int, BaseMessage] = {}  # by content key
        queued = self._uncounted(messages, todo)
        if len(todo) < _BATCH_MIN:
            return [], []
        paired = (
            split_pairs(pairs, queued, EXACT_LIMIT)
            if pairs and counts_pieces(self._length)
            else {}
        )
        texts: list[str] = []
        flats: list[int] = []
        where: list[int] = []  # each message's texts' indices, ending at ``ends``
        ends: list[int] = []
        short: dict[str, int] = {}
        placed: dict[int, int] = {}  # shared pieces' indices, by identity
        shared: dict[int, tuple[int, list[int]]] = {}  # tool calls, by list id
        for message in queued:
            flat, own = self._parts(message, calls=False)
            split = paired.get(id(message)) if paired else None
            if split is not None:
                own.remove(split[0])  # the content, counted as its pieces
                for piece in split[1:]:
                    i = placed.get(id(piece))
                    if i is None:
                        i = placed[id(piece)] = len(texts)
                        texts.append(piece)
                    where.append(i)
            where += place(own, texts, short)
            calls = message.tool_calls if isinstance(message, AIMessage) else None
            if calls:
                got = shared.get(id(calls))
                if got is None:
                    extra, call_texts = call_parts(calls)
                    got = shared[id(calls)] = (extra, place(call_texts, texts, short))
                where += got[1]
                flat += got[0]
            flats.append(flat)
            ends.append(len(where))
        lengths = self._lengths(texts)
        counts, start = [], 0
        for flat, end in zip(flats, ends, strict=True):
            for i in where[start:end]:
                flat += lengths[i]
            counts.append(flat)
            start = end
        with self._lock:
            for (key, message), count in zip(todo.items(), counts, strict=True):
                calls = message.tool_calls if isinstance(message, AIMessage) else None
                self._store(message, key, count, calls)
            self.encoded += len(counts)
        return list(todo.values()), counts

    def _uncounted(
        self, messages: Sequence[BaseMessage], todo: dict[int, BaseMessage]
    ) -> list[BaseMessage]:
        """Messages with no count yet and not in ``todo``; added to it."""
        out = []
        shared: dict[tuple[int, int], int] = {}  # a rewrite keeps its calls
        for message in messages:
            calls = message.tool_calls if isinstance(message, AIMessage) else None
            if self._known(message, calls) is not None:
                continue
            key = hash(content_key(message, shared))
            with self._lock:
                if key in self._by_key or key in todo:
                    continue
            todo[key] = message
            out.append(message)
        return out

    def _known(self, message: BaseMessage, calls: Any) -> int | None:
        """The count kept for this very message, unchanged since."""
        hit = self._by_id.get(id(message))
        if (
            hit is not None
            and hit[0]() is message
            and hit[1] is message.content
            and hit[2] is calls
        ):
            return hit[3]
        return None

    def _store(self, message: BaseMessage, key: int, count: int, calls: Any) -> None:
        """Remember ``count`` by content and by identity (under the lock)."""
        if len(self._by_id) >= self._sweep_at:
            # Plain weak references (no callback, so nothing runs at interpreter
            # shutdown): sweep the dead ones, then the oldest if still full.
            sweep_dead(self._by_id)
            if len(self._by_id) >= self._max:
                drop_oldest(self._by_id, self._max * 3 // 4)
            self._sweep_at = len(self._by_id) + _SWEEP_FLOOR
        if len(self._by_key) >= self._max_contents:
            drop_oldest(self._by_key, self._max_contents * 3 // 4)
        self._by_key[key] = count
        ref = weakref.ref(message)
        self._by_id[id(message)] = (ref, message.content, calls, count)

    def _encode(self, message: BaseMessage) -> int:
        flat, texts = self._parts(message)
        return flat + sum(map(self._count_text, texts))

    def _count_text(self, text: str) -> int:
        """Tokens of one text; a long one is remembered by length and hash.

        A message rewritten by a pass (its text cut, its repeated command
        dropped) keeps its tool-call arguments: those are not encoded again.
        A long text is counted in ``_pieces.pieces`` (exact: their counts
        add up), each remembered too: a rewrite that keeps the beginning of
        a text (the truncate pass drops an assistant message's repeated
        command, usually at its end) only encodes the pieces it changed.
        """
        if len(text) < _TEXT_MIN:
            return self._length(text)
        key = text_key(text)
        count = self._texts.get(key)
        if count is None:
            if self._piecewise and PIECE_CHARS < len(text) <= EXACT_LIMIT:
                count = sum(map(self._count_piece, pieces(text)))
            else:
                count = self._length(text)
            self._keep_text(key, count)
        return count

    def _count_piece(self, piece: str) -> int:
        key = text_key(piece)
        count = self._texts.get(key)
        if count is None:
            count = self._length(piece)
            self._keep_text(key, count)
        return count

    def _keep_text(self, key: int, count: int) -> None:
        if len(self._texts) >= _TEXT_MEMORY:
            drop_oldest(self._texts, _TEXT_MEMORY * 3 // 4)
        self._texts[key] = count

    def _parts(self, message: BaseMessage, calls: bool = True) -> tuple[int, list[str]]:
        """A message's flat tokens and texts (``_blocks.message_parts``)."""
        return message_parts(message, self.image_tokens, calls, self.image_rule)

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tokens of tool schemas, as OpenAI-format JSON."""
        if not tools:
            return 0
        from langchain_core.utils.function_calling import convert_to_openai_tool

        total = 0
        for tool in tools:
            schema = tool if isinstance(tool, dict) else convert_to_openai_tool(tool)
            total += TOOL_SCHEMA_OVERHEAD + self._length(
                json.dumps(schema, sort_keys=True, default=str)
            )
        return total


class CallableCounter:
    """Adapts ``f(list[BaseMessage]) -> int`` (LangChain's token_counter shape)."""

    def __init__(
        self, func: Callable[[list[BaseMessage]], int], name: str = ""
    ) -> None:
        self._func = func
        self.name = name or getattr(func, "__name__", "callable")
        self._cache: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()

    def count_message(self, message: BaseMessage) -> int:
        """Tokens of one message, cached by content."""
        key = content_key(message)
        count = self._cache.get(key)
        if count is None:
            count = int(self._func([message]))
            with self._lock:
                self._cache[key] = count
        return count

    def count_list(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a whole list in one call, as LangChain's middlewares count."""
        return int(self._func(list(messages)))

    def count_tools(self, tools: Sequence[Any]) -> int:
        """Tool schemas as JSON text in one synthetic message."""
        if not tools:
            return 0
        from langchain_core.messages import SystemMessage
        from langchain_core.utils.function_calling import convert_to_openai_tool

        text = json.dumps(
            [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools],
            default=str,
        )
        return int(self._func([SystemMessage(text)]))


def make_counter(
    counter: Any = None,
    *,
    model: str | None = None,
    image_tokens: int = 1_600,
    chars_per_token: float = 3.6,
) -> TokenCounter:
    """Turn what a user passed (None, a counter, a callable, a chat model) into one.

    ``"approximate"`` is LangChain's ``count_tokens_approximately``.
    """
    if counter == "approximate":
        from langchain_core.messages.utils import count_tokens_approximately

        return CallableCounter(count_tokens_approximately, name="approximate")
    if counter is None:
        return TiktokenCounter(
            model, image_tokens=image_tokens, chars_per_token=chars_per_token
        )
    if isinstance(counter, TokenCounter):
        return counter
    method = getattr(counter, "get_num_tokens_from_messages", None)
    if callable(method):
        return CallableCounter(method, name=type(counter).__name__)
    if callable(counter):
        return CallableCounter(counter)
    from .._errors import ConfigError

    raise ConfigError(
        f"token_counter must be a TokenCounter, a callable, a chat model or "
        f'"approximate", got {counter!r}.',
        field="token_counter",
        hint='pass e.g. token_counter=model, token_counter="approximate" or a '
        "callable over a message list.",
    )
