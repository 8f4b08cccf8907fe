"""Real providers through litellm (imported only here, so the evaluator never pays for it)."""

from __future__ import annotations

import logging
import sys
import threading
import time
from dataclasses import dataclass, field

from harness.errors import ForgeBenchError
from harness.llm.base import Completion, ModelCallError, ProviderUnreachable

# litellm's own loggers print a traceback per retry (1,800 lines a task for a closed port): ours say
# one sentence per failed call instead.
_QUIET_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "httpx", "openai")


# What a provider's failure raises in litellm (after the Router's retries); anything else is a bug.
_PROVIDER_ERRORS = (
    "APIError", "APIConnectionError", "Timeout", "RateLimitError", "BadRequestError", "AuthenticationError",
    "InternalServerError", "ServiceUnavailableError", "NotFoundError", "PermissionDeniedError",
    "UnprocessableEntityError", "BadGatewayError",
)  # fmt: skip


def _provider_errors(litellm) -> tuple[type[Exception], ...]:
    return tuple(getattr(litellm.exceptions, name) for name in _PROVIDER_ERRORS if hasattr(litellm.exceptions, name))


@dataclass
class LiteLLMModel:
    name: str
    # What tells this provider apart on a leaderboard (two local servers of one model): default the name.
    label: str | None = None
    api_base: str | None = None
    api_key_env: str | None = None  # for a server litellm has no key convention for
    temperature: float = 0.7
    max_tokens: int = 8192
    timeout_s: float = 300.0
    num_retries: int = 3
    retry_after_s: float = 1.0  # the least wait before a retry; litellm backs off further
    # Per-token prices (USD) for models litellm's price map does not know, e.g. a local server.
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    # A self-hosted server's price: each call is charged its wall time at this GPU-hour rate times
    # the GPUs serving it, as if the server served that call alone. Calls in flight together
    # overlap, so with N of them the recorded spend can reach N times the GPU time used.
    gpu_hour_usd: float | None = None
    gpus: int = 1
    # Failed calls in a row (each after its retries) after which the run stops: the provider is down.
    max_failed_calls: int = 3
    extra: dict = field(default_factory=dict)  # passed to litellm.completion as is (e.g. mock_response)
    _router_instance: object = field(default=None, init=False, repr=False)
    _failures: int = field(default=0, init=False, repr=False)
    # MCTS with several expansions in flight calls complete() from threads: one router, built once.
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _registered: bool = field(default=False, init=False, repr=False)

    def _litellm(self):
        import litellm

        litellm.suppress_debug_info = True
        for name in _QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        if self.input_cost_per_token is not None and not self._registered:
            self._registered = True
            litellm.register_model(
                {
                    self.name: {
                        "input_cost_per_token": self.input_cost_per_token,
                        "output_cost_per_token": self.output_cost_per_token or 0.0,
                        "litellm_provider": self.name.split("/", 1)[0],
                        "mode": "chat",
                    }
                }
            )
        return litellm

    def _api_key(self) -> str | None:
        import os

        return os.environ.get(self.api_key_env) if self.api_key_env else None

    def _check_provider(self) -> None:
        """litellm's own lookup of the provider: an unknown prefix fails here, once, at start."""
        litellm = self._litellm()
        try:
            litellm.get_llm_provider(model=self.name, api_base=self.api_base)
        except Exception as exc:  # litellm raises BadRequestError, or ValueError for some prefixes
            prefix = self.name.split("/", 1)[0] if "/" in self.name else self.name
            raise ForgeBenchError(
                f"model '{self.name}': litellm knows no provider '{prefix}'; write the model as "
                "provider/model with a provider litellm lists (openai/, anthropic/, gemini/, openrouter/, "
                "hosted_vllm/, ...: https://docs.litellm.ai/docs/providers), or pick an entry of conf/model/."
            ) from exc

    def check_ready(self) -> None:
        import os

        self._check_provider()
        if self.api_key_env:
            if not os.environ.get(self.api_key_env):
                raise ForgeBenchError(f"model '{self.name}' needs {self.api_key_env} in the environment; export it.")
            return
        if self.api_base or "mock_response" in self.extra:
            return  # a local server or a mock needs no key
        check = self._litellm().validate_environment(model=self.name)
        if not check.get("keys_in_environment", False):
            missing = ", ".join(check.get("missing_keys") or ["an API key"])
            raise ForgeBenchError(
                f"model '{self.name}' needs {missing} in the environment; export it, or run with --model offline."
            )

    def _router(self, litellm):
        """litellm's Router retries rate limits, timeouts and server errors with backoff (the
        global litellm.num_retries is reset after a failure, so it cannot be relied on)."""
        with self._lock:
            return self._build_router(litellm)

    def _build_router(self, litellm):
        if self._router_instance is None:
            params = {
                "model": self.name,
                "api_base": self.api_base,
                "api_key": self._api_key(),
                "timeout": self.timeout_s,
            }
            self._router_instance = litellm.Router(
                model_list=[{"model_name": self.name, "litellm_params": params}],
                num_retries=self.num_retries,
                retry_after=self.retry_after_s,
            )
        return self._router_instance

    def _failed(self, exc: Exception) -> None:
        """One sentence for a failed call, on the terminal and in the node's record; the run stops after
        max_failed_calls in a row (ProviderUnreachable)."""
        from harness.record import api_host

        first = (str(exc).strip().splitlines() or [""])[0][:200]
        where = api_host(self.api_base) or "its provider's default address"
        reason = f"{self.name} at {where}: {type(exc).__name__}: {first}"
        with self._lock:
            self._failures += 1
            failures = self._failures
        print(f"forgebench: a model call failed ({reason})", file=sys.__stderr__, flush=True)
        if failures >= self.max_failed_calls:
            raise ProviderUnreachable(
                f"{failures} model calls in a row failed, the last: {reason}; the run stops here, keeping what it "
                "recorded. Check model.api_base, the key and the network, then run the same command to resume."
            ) from exc
        raise ModelCallError(reason) from exc

    def trace_to(self, tracking_uri: str, experiment: str) -> None:
        """MLflow's litellm autologging: a trace per call, with its prompt, answer and tokens."""
        import mlflow

        mlflow.set_tracking_uri(tracking_uri)
        mlflow.set_experiment(experiment)
        mlflow.litellm.autolog()

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        with self._lock:
            litellm = self._litellm()
        started = time.monotonic()
        try:
            response = self._router(litellm).completion(
                model=self.name,
                messages=messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                **self.extra,
            )
        except _provider_errors(litellm) as exc:
            self._failed(exc)
        self._failures = 0
        latency_s = time.monotonic() - started
        usage = getattr(response, "usage", None)
        try:
            cost = float(litellm.completion_cost(completion_response=response))
        except Exception:  # litellm raises a bare Exception for models missing from its price map
            cost = 0.0
        if self.gpu_hour_usd:
            cost += latency_s / 3600.0 * self.gpu_hour_usd * self.gpus
        return Completion(
            text=response.choices[0].message.content or "",
            model=self.name,
            tokens_in=getattr(usage, "prompt_tokens", 0) or 0,
            tokens_out=getattr(usage, "completion_tokens", 0) or 0,
            cost_usd=cost,
            latency_s=latency_s,
        )
