"""The embedded offline model: answers ForgeBench prompts from its own kernel templates, no network.

It is the leaderboard's no-LLM baseline, and a small compiler. It reads the task block of a prompt
(`prompt`), picks the template that serves the task on its platform (`writers`: one writer each for
`cpu`, `triton` and `cuda`; a captured reference is read as a graph of aten calls by `graph` and
lowered to one Triton kernel by `lower`, or to one C++ row or matmul kernel by `cpu_lower`), and
walks that template family's parameter space (`search`): every candidate's approach line names its family and point
(`# approach: offline rmsnorm {"accumulators": 16, ...}`), so a later prompt, which quotes earlier
approach lines and their outcomes, tells it which points were tried and which was fastest. It
proposes an untried neighbour of the fastest point first, then the rest of the space in a fixed
order, and says so in plain text when nothing is left.
"""

from harness.llm.offline.model import OfflineModel

__all__ = ["OfflineModel"]
