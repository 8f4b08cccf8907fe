"""The offline model: its default kernels pass the real evaluator, it walks its parameter space from
the attempts a prompt quotes, declines what it has no template for, and answers deterministically."""

import importlib.util
import json
import re
import shutil
from pathlib import Path
from string import Template

import pytest
import torch
import torch.nn.functional as F

import harness.prompts
from harness.evaluate import Evaluator
from harness.llm.base import extract_code
from harness.llm.offline import OfflineModel
from harness.llm.offline.prompt import parse_task
from harness.llm.offline.search import parse_attempts
from harness.llm.offline.writers import FAMILIES, render
from harness.platforms.base import Platform
from harness.prompts import build_messages, heading_of, task_section
from harness.tasks import resolve_one

CPU = Platform("cpu", "cpu", "C++")
LEVEL1 = Path(__file__).resolve().parents[3] / "shared" / "data" / "kernelbench" / "level1"
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


def reworded(name: str, template: str) -> str:
    """The template with every `## ` heading and the words before the parent's outcome said otherwise."""
    lines = template.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("## "):
            lines[i] = f"## Part {i} of the {name} prompt, in other words"
        elif "$parent_result" in line:
            lines[i] = "What the evaluator made of it -> $parent_result"
    return "\n".join(lines) + "\n"


@pytest.fixture
def reworded_prompts(tmp_path, monkeypatch) -> Path:
    """A prompts folder whose refine and analyst templates word their headings differently."""
    folder = tmp_path / "prompts"
    shutil.copytree(harness.prompts.PROMPTS_DIR, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    for name in ("refine", "analyst"):
        path = folder / f"{name}.md"
        path.write_text(reworded(name, path.read_text()))
    monkeypatch.setattr(harness.prompts, "PROMPTS_DIR", folder)
    return folder


def test_hill_climb_reads_the_parent_under_reworded_refine_headings(reworded_prompts):
    """The section holding the version to improve is found by the heading refine.md gives it, not by
    a copy of its words: reworded, the model still climbs from the parent rather than starting over."""
    rmsnorm = FAMILIES["rmsnorm"]
    task = parse_task(build_messages(resolve_one("rmsnorm_qwen"), CPU, "new", [])[1]["content"])
    parent_point = rmsnorm.neighbours(rmsnorm.default)[-1]  # not the default, so starting over shows
    parent = render(rmsnorm, parent_point, task)
    outcome = "correct (1 ms, 3x vs eager)"
    prompt = build_messages(resolve_one("rmsnorm_qwen"), CPU, "refine", [], parent, outcome)[1]["content"]
    assert "## The version to improve" not in prompt and "It was evaluated as" not in prompt
    assert heading_of("refine", "parent_source") in prompt
    _, parsed = parse_attempts(prompt)
    assert parsed is not None and parsed.point == parent_point and parsed.speedup == 3.0
    code = extract_code(OfflineModel().complete([{"role": "user", "content": prompt}]).text)
    assert point_of(code) == ("rmsnorm", dict(zip(rmsnorm.space, rmsnorm.neighbours(parent_point)[0])))


def test_analyst_prompt_is_recognised_under_reworded_headings(reworded_prompts):
    """An analyst prompt is told from a kernel prompt, and its measurements read, by analyst.md's headings."""
    task = resolve_one("rmsnorm_qwen")
    prompt = Template((reworded_prompts / "analyst.md").read_text()).substitute(
        task=task_section(task, CPU),
        platform_notes="",
        source=extract_code(ask("rmsnorm_qwen")),
        measurements="1.2 ms, 3x vs eager\n40% of the bandwidth roofline",
        profile="| op | self us |\n|---|---|\n| rmsnorm_rows | 1100 |",
    )
    assert "## The version to analyse" not in prompt
    text = OfflineModel().complete([{"role": "user", "content": prompt}]).text
    assert extract_code(text) is None
    assert "measurements: 1.2 ms, 3x vs eager; 40% of the bandwidth roofline." in text
    assert "Largest profile entry: | rmsnorm_rows | 1100 |." in text


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
        # No operator template: written from the aten calls the prompt restates the torch reference as.
        ("1_Square_matrix_multiplication_.py", "cpu_matmul"),
        ("88_MinGPTNewGelu.py", "cpu_rows"),
    ],
)
def test_kernelbench_prompts_pick_their_family(file, family):
    assert point_of(extract_code(ask(str(LEVEL1 / file))))[0] == family


@pytest.mark.parametrize(
    "file, expected",
    [
        ("54_conv_standard_3D__square_input__square_kernel.py", "I have no template for aten.convolution on cpu"),
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
