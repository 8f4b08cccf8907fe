"""The chat-model interface agents use, and code extraction from an answer."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from harness import serial
from harness.errors import ForgeBenchError

_CODE_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Completion:
    text: str
    model: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    latency_s: float

    def to_dict(self) -> dict:
        return serial.to_dict(self)


class ModelCallError(Exception):
    """The provider failed after its retries (rate limit, timeout, context overflow, bad answer)."""


class ProviderUnreachable(ForgeBenchError):
    """Several model calls in a row failed: the provider is down or misconfigured, and a run that went
    on would only spend every task's rounds on failures. The run stops, keeping what it recorded."""


class ChatModel(Protocol):
    name: str
    label: str | None  # the leaderboard's name for it; None takes `name`
    api_base: str | None  # a provider's URL, if not the provider's default (its host is recorded)

    def check_ready(self) -> None:
        """Raise ForgeBenchError, naming the missing variable or server, if it cannot be called."""

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        """Answer a chat; a provider failure after retries raises ModelCallError."""

    def trace_to(self, tracking_uri: str, experiment: str) -> None:
        """Record each provider call as an MLflow trace in that store and experiment."""


def extract_code(text: str) -> str | None:
    """The last Python code block of an answer, or None when it has none."""
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1].strip() + "\n" if blocks else None
