"""The offline model: its default kernels pass the real evaluator, it walks its parameter space from
the attempts a prompt quotes, declines what it has no template for, and answers deterministically."""

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from harness.evaluate import Evaluator
from harness.llm.base import extract_code
from harness.llm.offline import FAMILIES, OfflineModel, parse_attempts, parse_task, render
from harness.platforms.base import Platform
from harness.prompts import build_messages
from harness.tasks import resolve_one

CPU = Platform("cpu", "cpu", "C++")
LEVEL1 = Path(__file__).resolve().parents[2] / "shared" / "data" / "kernelbench" / "level1"
HANDWRITTEN = {
    "softmax_rows": "softmax",
    "rmsnorm_qwen": "rmsnorm",
    "layernorm_sd3": "layernorm",
    "groupnorm_sd_vae": "groupnorm",
    "gelu_tanh_sd3": "gelu_tanh",
    "silu_and_mul_qwen": "silu_and_mul",
}
APPROACH = re.compile(r"^# approach: offline (\w+) (\{.*\})$")


def ask(task_id: str, action: str = "new", attempts=(), parent: str | None = None, parent_result: str = "") -> str:
    messages = build_messages(resolve_one(task_id), CPU, action, list(attempts), parent, parent_result)
    return OfflineModel().complete(messages).text


def point_of(code: str) -> tuple[str, dict]:
    match = APPROACH.match(code.splitlines()[0])
    assert match, code.splitlines()[0]
    return match.group(1), json.loads(match.group(2))


@pytest.fixture(scope="module")
def evaluator(make_evaluator) -> Evaluator:
    # Correctness only: one check seed and a token timing budget keep six evaluations quick.
    return make_evaluator(check_seeds=[1], timing_seeds=[101], budget_ms=10, warmup_ms=1)


@pytest.mark.slow
@pytest.mark.parametrize("task_id", sorted(HANDWRITTEN))
def test_default_point_of_every_handwritten_family_is_correct(evaluator, task_id):
    code = extract_code(ask(task_id))
    family, params = point_of(code)
    assert family == HANDWRITTEN[task_id]
    assert tuple(params.values()) == FAMILIES[family].default
    result = evaluator.evaluate(resolve_one(task_id), code)
    assert result.correct, result.reason


@pytest.mark.slow
@pytest.mark.parametrize(
    "op, reference",
    [
        ("sigmoid", torch.sigmoid),
        ("tanh", torch.tanh),
        ("silu", F.silu),
        ("relu", torch.relu),
        ("gelu_erf", F.gelu),
        ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh")),
    ],
)
def test_polynomial_activations_stay_within_fp32_tolerance(op, reference, tmp_path, monkeypatch):
    """The vectorised exp and erf approximations are the accuracy risk; libm is exact by construction."""
    monkeypatch.setenv("FORGEBENCH_BUILD_CACHE", str(tmp_path / "build"))
    task = parse_task(build_messages(resolve_one("gelu_tanh_sd3"), CPU, "new", [])[1]["content"])
    path = tmp_path / "candidate.py"
    path.write_text(render(FAMILIES[op], FAMILIES[op].default, task))
    spec = importlib.util.spec_from_file_location(f"offline_{op}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    x = torch.cat([torch.randn(100_000) * 4, torch.tensor([0.0, -1e-7, 1e-7, -30.0, 30.0, -100.0, 100.0])])
    torch.testing.assert_close(module.ModelNew()(x), reference(x), atol=1e-4, rtol=1e-4)


def test_refine_proposes_an_untried_neighbour_of_the_fastest_point():
    rmsnorm = FAMILIES["rmsnorm"]
    first = extract_code(ask("rmsnorm_qwen"))
    second = extract_code(
        ask("rmsnorm_qwen", "refine", [(first, "correct (1 ms, 3x vs eager)")], first, "correct (1 ms, 3x vs eager)")
    )
    assert point_of(second) == ("rmsnorm", dict(zip(rmsnorm.space, rmsnorm.neighbours(rmsnorm.default)[0])))
    # The slower second point is the parent now, but the search stays around the faster first one.
    third = extract_code(
        ask(
            "rmsnorm_qwen",
            "refine",
            [(first, "correct (1 ms, 3x vs eager)"), (second, "correct (2 ms, 1.5x vs eager)")],
            second,
            "correct (2 ms, 1.5x vs eager)",
        )
    )
    assert tuple(point_of(third)[1].values()) == rmsnorm.neighbours(rmsnorm.default)[1]


def test_attempts_and_parent_are_parsed_with_their_outcomes():
    first = extract_code(ask("softmax_rows"))
    second = extract_code(
        ask(
            "softmax_rows", "repair", [(first, "correct (9 ms, 0.8x vs eager)")], first, "correct (9 ms, 0.8x vs eager)"
        )
    )
    prompt = build_messages(
        resolve_one("softmax_rows"),
        CPU,
        "repair",
        [(first, "correct (9 ms, 0.8x vs eager)"), ("# approach: hand-written\n", "incorrect: x")],
        second,
        "compile_error: g++ failed",
    )[1]["content"]
    attempts, parent = parse_attempts(prompt)
    assert [a.speedup for a in attempts] == [0.8, None]
    assert parent is not None and parent.point == tuple(point_of(second)[1].values())


def test_new_prompt_with_attempts_gives_the_first_untried_point():
    first = extract_code(ask("layernorm_sd3"))
    code = extract_code(ask("layernorm_sd3", "new", [(first, "runtime_error: boom")]))
    assert tuple(point_of(code)[1].values()) == FAMILIES["layernorm"].points()[1]


def test_says_so_in_plain_text_when_every_point_was_tried():
    family = FAMILIES["relu"]
    task = parse_task(build_messages(resolve_one("gelu_tanh_sd3"), CPU, "new", [])[1]["content"])
    attempts = [
        (render(family, point, task), f"correct (1 ms, {i + 1}x vs eager)") for i, point in enumerate(family.points())
    ]
    text = ask(str(LEVEL1 / "19_ReLU.py"), "new", attempts)
    assert extract_code(text) is None
    count = len(family.points())
    assert f"Every one of the {count} points" in text and f"{count}x vs eager" in text


@pytest.mark.parametrize(
    "file, family",
    [
        ("23_Softmax.py", "softmax"),
        ("26_GELU_.py", "gelu_erf"),
        ("19_ReLU.py", "relu"),
        ("21_Sigmoid.py", "sigmoid"),
        ("22_Tanh.py", "tanh"),
    ],
)
def test_kernelbench_prompts_pick_their_family(file, family):
    assert point_of(extract_code(ask(str(LEVEL1 / file))))[0] == family


@pytest.mark.parametrize(
    "file, expected",
    [
        ("1_Square_matrix_multiplication_.py", "I have no template for aten.mm on cpu with float32, float32."),
        ("40_LayerNorm.py", "my layernorm template does not fit"),
        ("35_GroupNorm_.py", "my groupnorm template does not fit"),
    ],
)
def test_declines_in_plain_text_what_it_has_no_template_for(file, expected):
    text = ask(str(LEVEL1 / file))
    assert extract_code(text) is None
    assert expected in text


def test_declines_another_platform_or_dtype():
    messages = build_messages(resolve_one("rmsnorm_qwen"), CPU, "new", [])
    for old, new in [("platform: cpu", "platform: metal"), ("[float32]", "[bfloat16]")]:
        edited = [messages[0], {"role": "user", "content": messages[1]["content"].replace(old, new)}]
        text = OfflineModel().complete(edited).text
        assert text.startswith("I have no template for rms_norm on") and extract_code(text) is None


def test_answers_are_deterministic_and_free():
    messages = build_messages(resolve_one("silu_and_mul_qwen"), CPU, "new", [])
    first, second = OfflineModel().complete(messages), OfflineModel().complete(messages)
    assert first.text == second.text
    assert first.model == "offline" and first.cost_usd == 0.0
    assert first.tokens_in == sum(len(m["content"]) for m in messages) // 4 > 0
    assert first.tokens_out == len(first.text) // 4 > 0
