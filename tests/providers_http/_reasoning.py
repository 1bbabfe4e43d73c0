"""Reasoning models against the stand-in server: real clients, raw requests.

``reasoning_model(kind, server)`` builds the real client of one reasoning setup,
pointed at ``server``, never retrying:

- ``"claude"``: ``ChatAnthropic`` (claude-sonnet-4-6), thinking enabled;
- ``"claude-binding"``: ``ChatAnthropic`` (claude-fable-5-1, which binds its
  thinking blocks to their prefix), adaptive thinking;
- ``"responses"``: ``ChatOpenAI`` on the Responses API (gpt-5-mini), reasoning
  with summaries, ``store=False`` and encrypted reasoning content;
- ``"gemini"``: ``ChatGoogleGenerativeAI`` (gemini-3-pro-preview), thoughts
  included, function calls signed.

``self_guarded_model`` asks a binding model for ``drop_block`` itself (the
adapters other than the middleware cannot); ``post`` sends a hand-built body to
one provider's path; ``error_of`` reads the message of a 400 in any provider's
error body.
"""

from __future__ import annotations

from typing import Any

import httpx

from ._rules_anthropic import BINDING_BETA
from ._server import ProviderServer

Body = dict[str, Any]
REASONING = ("claude", "claude-binding", "responses", "gemini")
PATHS = {
    "openai": "/v1/chat/completions",
    "anthropic": "/v1/messages",
    "responses": "/v1/responses",
    "gemini": "/v1beta/models/gemini-3-pro-preview:generateContent",
}


def reasoning_model(kind: str, server: ProviderServer, **settings: Any) -> Any:
    """The real client of reasoning setup ``kind`` (see the module docstring)."""
    if kind in {"claude", "claude-binding"}:
        from langchain_anthropic import ChatAnthropic

        binding = kind == "claude-binding"
        thinking = (
            {"type": "adaptive"}
            if binding
            else {"type": "enabled", "budget_tokens": 1_024}
        )
        return ChatAnthropic(  # type: ignore[call-arg]
            model="claude-fable-5-1" if binding else "claude-sonnet-4-6",
            base_url=server.url,
            api_key="test",  # type: ignore[arg-type]
            max_retries=0,
            max_tokens=4_096,
            **{"thinking": thinking, **settings},
        )
    if kind == "responses":
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model="gpt-5-mini",
            base_url=server.url + "/v1",
            api_key="test",  # type: ignore[arg-type]
            max_retries=0,
            use_responses_api=True,
            reasoning={"effort": "low", "summary": "auto"},
            store=False,
            include=["reasoning.encrypted_content"],
            **settings,
        )
    if kind == "gemini":
        from langchain_google_genai import ChatGoogleGenerativeAI

        return ChatGoogleGenerativeAI(
            model="gemini-3-pro-preview",
            base_url=server.url,
            google_api_key="test",
            max_retries=0,
            include_thoughts=True,
            **settings,
        )
    raise ValueError(f"unknown reasoning setup {kind!r}; pick one of {REASONING}")


DROP_BLOCK = {
    "type": "adaptive",
    "block_binding": {"prefix_mismatch_behavior": "drop_block"},
}
"""Adaptive thinking that asks a binding model to drop a stale block."""


def self_guarded_model(kind: str, server: ProviderServer) -> Any:
    """``reasoning_model``, asking for ``drop_block`` itself on a binding model.

    The adapters other than ``ContextGuardMiddleware`` cannot change the model's
    request options, so docs/providers.md has the user set them on the model.
    """
    if kind == "claude-binding":
        return reasoning_model(kind, server, thinking=DROP_BLOCK, betas=[BINDING_BETA])
    return reasoning_model(kind, server)


def post(
    server: ProviderServer, provider: str, body: Body, betas: str = ""
) -> httpx.Response:
    """Send ``body`` to ``provider``'s path on ``server`` (an ``anthropic-beta``)."""
    headers = {"anthropic-beta": betas} if betas else {}
    return httpx.post(
        server.url + PATHS[provider], json=body, headers=headers, timeout=5
    )


def error_of(answer: httpx.Response) -> str:
    """The message of a 400, from any provider's error body."""
    assert answer.status_code == 400, answer.text
    return str(answer.json()["error"]["message"])
