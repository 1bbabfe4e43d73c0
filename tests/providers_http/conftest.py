"""The stand-in provider server, and a socket guard that keeps every call local."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ._server import ProviderServer

LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_ENV = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "ANTHROPIC_BASE_URL",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING_V2",
)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any connection that would leave 127.0.0.1 (and any proxy or tracer)."""
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    connect = socket.socket.connect

    def local_connect(self: socket.socket, address: Any) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            host = address[0]
            if host not in LOOPBACK:
                raise OSError(f"tests/providers_http: connection to {host} refused")
        connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", local_connect)


@pytest.fixture
def make_server() -> Iterator[Callable[..., ProviderServer]]:
    """Start a ``ProviderServer`` (``limit``, ``multiplier``, ``tool_steps``)."""
    started: list[ProviderServer] = []

    def make(**settings: Any) -> ProviderServer:
        server = ProviderServer(**settings).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.close()
