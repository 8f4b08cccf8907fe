"""The litellm client: real HTTP to a loopback server, prices, and mock_response failures."""

import pytest

from harness.errors import ForgeBenchError
from harness.llm.base import ModelCallError, extract_code
from harness.llm.client import LiteLLMModel
from tests.loopback_llm import LoopbackLLM

ANSWER = "Here you go.\n```python\n# approach: test\nprint('hi')\n```\n"
MESSAGES = [{"role": "user", "content": "write a kernel"}]


def test_real_http_call_counts_tokens_and_prices_them(monkeypatch):
    monkeypatch.setenv("LOOPBACK_KEY", "loopback-secret")
    with LoopbackLLM(lambda messages: ANSWER) as server:
        model = server.model(
            input_cost_per_token=1e-6,
            output_cost_per_token=2e-6,
            num_retries=0,
        )
        model.check_ready()
        completion = model.complete(MESSAGES)
    assert server.requests[0]["path"].endswith("/chat/completions")
    assert server.requests[0]["auth"] == "Bearer loopback-secret"
    assert server.requests[0]["body"]["messages"] == MESSAGES
    assert extract_code(completion.text) == "# approach: test\nprint('hi')\n"
    assert (completion.tokens_in, completion.tokens_out) == (1000, 500)
    assert completion.cost_usd == pytest.approx(1000 * 1e-6 + 500 * 2e-6)


def test_a_self_hosted_server_is_charged_its_gpu_time(monkeypatch):
    import time

    monkeypatch.setenv("LOOPBACK_KEY", "loopback-secret")

    def slow(messages):
        time.sleep(0.3)  # the server's GPU busy on this call
        return ANSWER

    with LoopbackLLM(slow) as server:
        model = server.model(input_cost_per_token=0.0, output_cost_per_token=0.0, num_retries=0)
        model.gpu_hour_usd, model.gpus = 7200.0, 2  # 2 GPUs at $7200/h: $4 per second of wall time
        completion = model.complete(MESSAGES)
    assert completion.latency_s >= 0.3
    assert completion.cost_usd == pytest.approx(completion.latency_s * 4.0, rel=1e-6)


def test_rate_limits_are_retried_with_backoff_over_real_http(monkeypatch):
    import time

    monkeypatch.setenv("LOOPBACK_KEY", "loopback-secret")
    with LoopbackLLM(lambda messages: ANSWER, rate_limited=2) as server:
        model = server.model(
            num_retries=3,
            retry_after_s=0.2,
        )
        started = time.monotonic()
        completion = model.complete(MESSAGES)
        waited = time.monotonic() - started
    assert len(server.requests) == 3  # two 429s, then the answer
    assert extract_code(completion.text) is not None
    assert waited >= 0.2  # it backed off rather than hammering the server


def test_retries_give_up_as_a_model_call_error(monkeypatch):
    monkeypatch.setenv("LOOPBACK_KEY", "loopback-secret")
    with LoopbackLLM(lambda messages: ANSWER, rate_limited=10) as server:
        model = server.model(
            num_retries=1,
            retry_after_s=0.1,
        )
        with pytest.raises(ModelCallError, match="RateLimit"):
            model.complete(MESSAGES)
    assert len(server.requests) == 2


def test_missing_key_is_one_sentence_naming_the_variable(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ForgeBenchError, match="OPENAI_API_KEY") as info:
        LiteLLMModel(name="openai/gpt-4o").check_ready()
    assert "\n" not in str(info.value)


def test_mock_response_prices_a_known_model():
    model = LiteLLMModel(name="openai/gpt-4o", extra={"mock_response": ANSWER})
    completion = model.complete(MESSAGES)
    assert completion.text == ANSWER
    assert completion.cost_usd > 0


@pytest.mark.parametrize(
    "extra",
    [
        {"mock_response": "litellm.RateLimitError"},
        {"mock_response": "litellm.ContextWindowExceededError"},
        {"mock_response": ANSWER, "mock_timeout": True},
    ],
    ids=["rate_limit", "context_overflow", "timeout"],
)
def test_provider_failures_become_model_call_errors(extra):
    model = LiteLLMModel(name="openai/gpt-4o", num_retries=0, timeout_s=1, extra=extra)
    with pytest.raises(ModelCallError):
        model.complete(MESSAGES)


def test_answer_without_code_block_yields_no_code():
    assert extract_code("I cannot write this kernel.") is None
