"""How the offline model reads a prompt: the task block, and the sections it acts on, each found with
the words and headings of the prompt templates themselves (harness/prompts), never copies of them,
so rewording a template cannot silently change what the model reads."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from harness.prompts import ATEN_GRAPH_LEAD, heading_of, line_pattern

_TASK_FIELDS = ("operator", "aten_ops", "input_shapes", "input_dtypes", "init_inputs", "platform")
# The reference is the first Python block after the task's fields (a Markdown fence, not template wording).
_CODE_BLOCK = re.compile(r"^```python\n(.*?)\n```", re.MULTILINE | re.DOTALL)
_FIRST_CODE_LINE = re.compile(r"^```python\n(.*)$", re.MULTILINE)


@dataclass(frozen=True)
class PromptTask:
    """The machine-readable task block of a prompt, and the reference source under it."""

    operator: str
    aten_ops: list[str]
    input_shapes: list[list[int]]
    input_dtypes: list[str]
    init_inputs: list[Any]
    platform: str
    reference: str
    aten_graph: str = ""  # a torch reference restated as aten calls, where the prompt shows it

    @property
    def dtype(self) -> str:
        return ", ".join(self.input_dtypes) or "no inputs"


def parse_task(prompt: str) -> PromptTask | None:
    """The task block of a prompt, or None when the prompt has none."""
    found = {name: line_pattern("task", name).search(prompt) for name in _TASK_FIELDS}
    if not all(found.values()):
        return None
    fields = {name: match.group(name).strip() for name, match in found.items()}
    reference = _CODE_BLOCK.search(prompt, max(match.end() for match in found.values()))
    lead = prompt.find(f"\n{ATEN_GRAPH_LEAD}\n", reference.end() if reference else 0)
    aten_graph = _CODE_BLOCK.search(prompt, lead + 1) if lead >= 0 else None
    try:
        shapes, init_inputs = json.loads(fields["input_shapes"]), ast.literal_eval(fields["init_inputs"])
    except (ValueError, SyntaxError):
        return None
    if not isinstance(shapes, list) or not all(isinstance(shape, list) for shape in shapes):
        return None
    return PromptTask(
        operator=fields["operator"],
        aten_ops=[op for op in fields["aten_ops"].split(", ") if op != "unknown"],
        input_shapes=shapes,
        input_dtypes=[d for d in fields["input_dtypes"].strip("[]").split(", ") if d],
        init_inputs=list(init_inputs),
        platform=fields["platform"],
        reference=reference.group(1) if reference else "",
        aten_graph=aten_graph.group(1) if aten_graph else "",
    )


def section(prompt: str, heading: str) -> str | None:
    """The text under a `## ` heading line, up to the next heading; None when the prompt has no such line."""
    found = re.search(rf"^{re.escape(heading)}$", prompt, re.MULTILINE)
    return prompt[found.end() :].split("\n## ", 1)[0] if found else None


def section_lines(prompt: str, template: str, field: str) -> list[str]:
    """The non-empty lines of the section that template `template` writes `$field` into."""
    body = section(prompt, heading_of(template, field)) or ""
    return [line.strip() for line in body.splitlines() if line.strip()]


def is_analyst(prompt: str) -> bool:
    """Whether the prompt asks for an analysis of a version (analyst.md) rather than a kernel."""
    return section(prompt, heading_of("analyst", "source")) is not None


def parent_section(prompt: str) -> str | None:
    """The section showing the version a refine or repair prompt improves (refine.md); None elsewhere."""
    return section(prompt, heading_of("refine", "parent_source"))


def read_parent(parent: str) -> tuple[str, str] | None:
    """The outcome and the first source line of the version to improve, as its section shows them."""
    outcome = line_pattern("refine", "parent_result").search(parent)
    first_line = _FIRST_CODE_LINE.search(parent)
    return (outcome.group("parent_result"), first_line.group(1)) if outcome and first_line else None
