"""Prompts are data: the .md files beside this module, filled from the task, platform and tree."""

from __future__ import annotations

import re
from pathlib import Path
from string import Template

from harness.platforms.base import Platform
from harness.tasks import Task
from harness.trace import signature

PROMPTS_DIR = Path(__file__).resolve().parent
# The line before a torch reference's restatement as aten calls (harness/trace.py), which the task
# section shows where there is one; a reader of prompts finds the restatement's code block after it.
ATEN_GRAPH_LEAD = "The same, as the aten calls it makes at these shapes (traced on meta tensors):"

INSTRUCTIONS = {
    "refine": "Make this version faster while keeping it correct. Say in the approach line what you changed.",
    "repair": "This version failed. Fix the failure and keep the approach if it is sound.",
}


def _template(name: str) -> Template:
    return Template((PROMPTS_DIR / f"{name}.md").read_text())


def platform_notes(platform: Platform) -> str:
    """What a model must know to write a candidate for this platform: platform_<name>.md."""
    return (PROMPTS_DIR / f"platform_{platform.name}.md").read_text().strip()


def task_section(task: Task, platform: Platform) -> str:
    sig = signature(task)
    roofline = (
        f"{task.bytes_moved:.0f} bytes moved, {task.flops:.0f} FLOPs" if task.bytes_moved and task.flops else "unknown"
    )
    return _template("task").substitute(
        task_id=task.id,
        operator=task.operator or sig.operator,
        aten_ops=", ".join(sig.aten_ops) or "unknown",
        input_shapes=sig.input_shapes,
        input_dtypes="[" + ", ".join(sig.input_dtypes) + "]",
        init_inputs=sig.init_inputs,
        platform=platform.name,
        roofline=roofline,
        reference=task.reference_source.strip(),
        aten_graph=f"\n{ATEN_GRAPH_LEAD}\n```python\n{sig.aten_graph.strip()}\n```\n" if sig.aten_graph else "",
    )


def approach_line(source: str | None) -> str:
    """The candidate's own one-line description of itself, as the prompt asked for."""
    first = (source or "").lstrip().splitlines()[:1]
    return first[0].lstrip("# ").strip() if first and first[0].startswith("#") else "no approach line"


def attempts_section(attempts: list[tuple[str | None, str]]) -> str:
    """Earlier attempts, so the model does not repeat what failed or was slow."""
    if not attempts:
        return ""
    lines = [f"- `{approach_line(source)}`: {outcome}" for source, outcome in attempts]
    return "\n## Earlier attempts (do not repeat these)\n" + "\n".join(lines) + "\n"


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """A provider-free token estimate of a chat: characters / 4, rounded up (close for code and
    English with BPE tokenizers; exact counts need the provider's tokenizer)."""
    return -(-sum(len(m["content"]) for m in messages) // 4)


def context_section(entries: list[tuple[str, str | None, str]]) -> str:
    """Lineage context: (label, code or None when left out, outcome) per node. A node whose code
    was left out keeps its one-line outcome."""
    if not entries:
        return ""
    parts = ["\n## Context from the search so far"]
    for label, source, outcome in entries:
        parts.append(f"### {label}: {outcome}")
        if source is None:
            continue
        parts.append(f"```python\n{source.strip()}\n```")
    return "\n".join(parts) + "\n"


def advice_section(advice: str) -> str:
    """The analyst's recommendations, placed after the version they are about; empty without advice."""
    return f"\n## The analyst's recommendations for this version\n{advice.strip()}\n" if advice.strip() else ""


def sibling_section(sibling: int) -> str:
    """For a call sent while `sibling` others from the same search state are being answered: its
    place among them, so a model can make it differ (they cannot see each other's answers)."""
    return _template("sibling").substitute(number=sibling + 1, others=sibling) if sibling else ""


def sibling_number(prompt: str) -> int:
    """The place `sibling_section` gave a call among those sent together (1 when it gave none),
    read back with the template's own wording, so rewording sibling.md cannot break the reading."""
    words = re.escape(_template("sibling").template.strip())
    first, *rest = words.replace(re.escape("$others"), r"\d+").split(re.escape("$number"))
    groups = [r"(?P<number>\d+)"] + [r"(?P=number)"] * (len(rest) - 1)  # a name may be defined once
    words = first + "".join(group + part for group, part in zip(groups, rest))
    found = re.search(words, prompt)
    return int(found.group("number")) if found else 1


def _placeholders(line: str) -> list[tuple[re.Match, str | None]]:
    """Each `$` of a template line, with the name of the field it substitutes (None for `$$` or a lone `$`)."""
    return [(m, m.group("named") or m.group("braced")) for m in Template.pattern.finditer(line)]


def _line_holding(name: str, field: str) -> tuple[list[str], int]:
    """The lines of template `name` and the index of the one that substitutes `$field`."""
    lines = _template(name).template.splitlines()
    for index, line in enumerate(lines):
        if any(found == field for _, found in _placeholders(line)):
            return lines, index
    raise ValueError(f"prompt template {name}.md has no ${field}; a reader of its prompts expects one")


def heading_of(name: str, field: str) -> str:
    """The `## ` heading of the section of template `name` that holds `$field`. A reader of the prompts
    finds a section by what it holds, so rewording a template's headings cannot break the reading."""
    lines, index = _line_holding(name, field)
    heading = next((line for line in reversed(lines[: index + 1]) if line.startswith("## ")), None)
    if heading is None:
        raise ValueError(f"prompt template {name}.md writes ${field} under no `## ` heading")
    return heading


def line_pattern(name: str, field: str) -> re.Pattern[str]:
    """The line of template `name` that holds `$field`, as a pattern whose group `field` takes the value
    back out of a prompt: the template's own words around it, any other field on the line matching
    anything, so rewording that line cannot break the reading."""
    lines, index = _line_holding(name, field)
    line, parts, start = lines[index], [], 0
    for match, found in _placeholders(line):
        parts.append(re.escape(line[start : match.start()]))
        parts.append(f"(?P<{field}>.*)" if found == field else ".*" if found else re.escape(match.group()[:1]))
        start = match.end()
    parts.append(re.escape(line[start:]))
    return re.compile("^" + "".join(parts) + "$", re.MULTILINE)


def build_messages(
    task: Task,
    platform: Platform,
    action: str,
    attempts: list[tuple[str | None, str]],
    parent_source: str | None = None,
    parent_result: str = "",
    advice: str = "",
    context: str = "",
) -> list[dict[str, str]]:
    """The exact chat a model sees for one expansion; rebuilt from the tree, it is the same.
    `action` is a tree node's Action (harness/agents/tree.py), read here by its value: "new",
    "refine" or "repair". `advice` is the analyst's text on the version to improve (refine and repair prompts only);
    `context` a `context_section` (lineage: best, recent and ancestor nodes)."""
    fields = {
        "task": task_section(task, platform),
        "platform_notes": platform_notes(platform),
        "attempts": attempts_section(attempts),
        "context": context,
    }
    if action == "new":
        user = _template("new").substitute(fields)
    else:
        user = _template("refine").substitute(
            fields,
            parent_source=(parent_source or "").strip(),
            parent_result=parent_result,
            instruction=INSTRUCTIONS[action],
            advice=advice_section(advice),
        )
    return [{"role": "system", "content": _template("system").template.strip()}, {"role": "user", "content": user}]
