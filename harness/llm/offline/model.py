"""The offline model as a chat model: one reply to each prompt, from its templates, no network."""

from __future__ import annotations

import time

from harness.llm.base import Completion
from harness.llm.offline.prompt import is_analyst, parent_section, parse_task, section_lines
from harness.llm.offline.search import next_point, parse_attempts
from harness.llm.offline.writers import plan_for, render
from harness.prompts import sibling_number


def advise(prompt: str) -> str:
    """Analyst advice in plain text: the offline model has no profile-driven reasoning, so it says
    what the profile shows and that its next step is a neighbouring point of its template."""
    measurements = section_lines(prompt, "analyst", "measurements")
    profile = [line for line in section_lines(prompt, "analyst", "profile") if not set(line) <= set("|-: ")]
    top = profile[1] if len(profile) > 1 else (profile[0] if profile else "no profile entries")
    return (
        "Offline analyst (template search, no model of the hardware): "
        f"measurements: {'; '.join(measurements[:3]) or 'none'}. Largest profile entry: {top}. "
        "Recommendation: keep the approach and try the neighbouring points of the template's parameter "
        "space (accumulators, vector width, schedule) that have not been tried yet."
    )


def answer(prompt: str) -> str:
    """The offline model's whole reply to one user prompt."""
    if is_analyst(prompt):
        return advise(prompt)
    task = parse_task(prompt)
    if task is None:
        return (
            "I found no ForgeBench task block (operator, input shapes, input dtypes, init inputs, "
            "platform) in this prompt, so I have no kernel to offer."
        )
    plan = plan_for(task)
    if isinstance(plan, str):
        return plan
    family = plan.family
    attempts, parent = parse_attempts(prompt)
    refining = parent_section(prompt) is not None
    point, why = next_point(family, attempts, parent, refining, skip=sibling_number(prompt) - 1)
    if point is None:
        return (
            f"Every one of the {len(family.points())} points of my {family.name} template has been tried "
            f"(best: {why}); I have nothing new to propose for {task.operator}."
        )
    return f"This is {why}: `{family.describe(point)}`.\n\n```python\n{render(family, point, task, plan)}```\n"


class OfflineModel:
    """A deterministic chat model that answers from kernel templates; it needs no network."""

    def __init__(self, name: str = "offline", label: str | None = None):
        self.name = name
        self.label = label
        self.api_base = None

    def check_ready(self) -> None:
        """Nothing to check: no key, no server."""

    def trace_to(self, tracking_uri: str, experiment: str) -> None:
        """Nothing to trace: no provider is called (transcripts are in the tree's folder)."""

    def complete(self, messages: list[dict[str, str]]) -> Completion:
        started = time.monotonic()
        prompt = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        text = answer(prompt)
        return Completion(
            text=text,
            model=self.name,
            tokens_in=sum(len(m.get("content", "")) for m in messages) // 4,
            tokens_out=len(text) // 4,
            cost_usd=0.0,
            latency_s=time.monotonic() - started,
        )
