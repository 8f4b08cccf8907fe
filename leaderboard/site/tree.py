"""The search-tree inspector's content: a tidy layout of a task run's tree, its Plotly figure, and
what the page shows for each node (source, diff to the parent, EvalResult, advice, prompt, response).
The figure is a plain Plotly figure dict, as in charts.py (which says why)."""

from __future__ import annotations

import difflib
import math

from leaderboard.site.data import TaskRun

# One colour per outcome, the same on every tree page: a correct node's by whether it beats eager
# (colour_group), the others' by their verdict, or why a node has none.
OUTCOME_COLOURS = {
    "correct, faster than eager": "#2ca02c",
    "correct, not faster than eager": "#17becf",
    "incorrect": "#d62728",
    "compile_error": "#ff7f0e",
    "runtime_error": "#9467bd",
    "timeout": "#8c564b",
    "crash": "#e377c2",
    "rejected": "#7f7f7f",
    "analyst": "#1f77b4",
    "no code": "#bcbd22",
}
LEVEL_HEIGHT_PX = 70


def outcome(node: dict) -> str:
    """The node's verdict; an analyst's advice and an answer without code have none."""
    if node.get("result"):
        return node["result"]["verdict"]
    return "analyst" if node.get("action") == "analyst" else "no code"


def colour_group(node: dict) -> str:
    """The node's legend entry: its outcome, a correct one split by its speedup over eager (a correct
    0.06x kernel is no success to colour as one)."""
    found = outcome(node)
    if found != "correct":
        return found
    return "correct, faster than eager" if speedup(node) > 1 else "correct, not faster than eager"


def speedup(node: dict) -> float:
    """Speedup over eager of a correct node; 0 for anything else (as Node.speedup)."""
    result = node.get("result") or {}
    return (result.get("speedup_vs_eager") or 0.0) if result.get("verdict") == "correct" else 0.0


def summary(node: dict) -> str:
    """One line on what happened to the node's candidate."""
    result = node.get("result")
    if not result:
        return node.get("note") or "analyst advice"
    if result["verdict"] == "correct":
        return f"correct: {result['time_ms']:.4g} ms, {speedup(node):.3g}x vs eager"
    reason = (result.get("reason") or "").strip().splitlines()
    return f"{result['verdict']}: {reason[0][:200] if reason else 'no reason recorded'}"


def marker_size(node: dict) -> float:
    """Grows with the log of the speedup, and stops growing at 64x so one outlier does not cover its tree."""
    return 12 + 4 * math.log2(1 + min(speedup(node), 64.0))


def tidy_layout(nodes: list[dict]) -> dict[int, tuple[float, int]]:
    """(x, depth) of every node: leaves one apart in depth-first order, each parent centred over its
    first and last child, so no two subtrees overlap. Nodes whose parent is not in the tree are roots."""
    ids = {node["id"] for node in nodes}
    children: dict[int | None, list[int]] = {}
    for node in sorted(nodes, key=lambda n: n["id"]):
        parent = node.get("parent_id") if node.get("parent_id") in ids else None
        children.setdefault(parent, []).append(node["id"])
    positions: dict[int, tuple[float, int]] = {}
    next_leaf = 0
    # Post-order without recursion: a long refine chain is as deep as the run had rounds.
    stack = [(root, 0, False) for root in reversed(children.get(None, []))]
    while stack:
        node_id, depth, placed_children = stack.pop()
        kids = children.get(node_id, [])
        if not placed_children:
            stack.append((node_id, depth, True))
            stack.extend((kid, depth + 1, False) for kid in reversed(kids))
        elif kids:
            positions[node_id] = ((positions[kids[0]][0] + positions[kids[-1]][0]) / 2, depth)
        else:
            positions[node_id] = (float(next_leaf), depth)
            next_leaf += 1
    return positions


def tree_figure(nodes: list[dict], best_id: int | None) -> dict:
    """Edges as one line trace, nodes as a scatter per outcome (the legend), sized by speedup; each
    node's id rides in customdata for the page's click handler."""
    positions = tidy_layout(nodes)
    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    for node in nodes:
        parent = node.get("parent_id")
        if parent in positions and node["id"] in positions:
            (px, pd), (cx, cd) = positions[parent], positions[node["id"]]
            edge_x += [px, cx, None]
            edge_y += [-pd, -cd, None]
    edges = {"type": "scatter", "x": edge_x, "y": edge_y, "mode": "lines", "line": {"color": "#bbb"}}
    traces = [{**edges, "hoverinfo": "skip", "showlegend": False}]
    for name, colour in OUTCOME_COLOURS.items():
        group = [n for n in nodes if colour_group(n) == name and n["id"] in positions]
        if not group:
            continue
        traces.append(
            {
                "type": "scatter",
                "name": name,
                "x": [positions[n["id"]][0] for n in group],
                "y": [-positions[n["id"]][1] for n in group],
                "mode": "markers+text",
                "text": [str(n["id"]) for n in group],
                "textposition": "top center",
                "customdata": [n["id"] for n in group],
                "hovertext": [f"node {n['id']} ({n.get('action')}): {summary(n)}" for n in group],
                "hoverinfo": "text",
                "marker": {
                    "color": colour,
                    "opacity": 1,
                    "size": [marker_size(n) for n in group],
                    "line": {"color": "#000", "width": [3 if n["id"] == best_id else 0 for n in group]},
                },
            }
        )
    depth = max((d for _, d in positions.values()), default=0)
    width = max((x for x, _ in positions.values()), default=0)
    layout = {
        "height": 160 + LEVEL_HEIGHT_PX * depth,
        "margin": {"l": 20, "r": 20, "t": 30, "b": 20},
        # Half a step of room around the outer nodes, so their markers and ids are not cut.
        "xaxis": {"visible": False, "range": [-0.5, width + 0.5]},
        "yaxis": {"visible": False, "range": [-depth - 0.5, 0.5]},
        "plot_bgcolor": "#fff",
        "hovermode": "closest",
        "legend": {"orientation": "h", "title": {"text": "outcome (outlined: the best kernel; size: speedup)"}},
    }
    return {"data": traces, "layout": layout}


def _diff(parent: dict | None, node: dict) -> str | None:
    """The unified diff from the parent's source; None where either has no source to compare."""
    if not (parent and parent.get("source") and node.get("source")):
        return None
    lines = difflib.unified_diff(
        parent["source"].splitlines(keepends=True),
        node["source"].splitlines(keepends=True),
        fromfile=f"node {parent['id']}",
        tofile=f"node {node['id']}",
    )
    return "".join(lines)


def _advice(nodes: list[dict], node: dict) -> str:
    """An analyst node's advice; for a candidate, the advice on its parent given before it was asked
    for (what the analyst strategy quotes in a refine's prompt)."""
    if node.get("action") == "analyst":
        return (node.get("extra") or {}).get("advice", "")
    given = (
        n
        for n in nodes
        if n.get("action") == "analyst" and n.get("parent_id") == node.get("parent_id") and n["id"] < node["id"]
    )
    first = next(given, None)
    return (first.get("extra") or {}).get("advice", "") if first and node.get("parent_id") is not None else ""


def node_details(task: TaskRun) -> list[dict]:
    """What the inspector's panel shows for each node, as plain data for the page's JSON."""
    by_id = {node["id"]: node for node in task.nodes}
    return [
        {
            "id": node["id"],
            "parent_id": node.get("parent_id"),
            "action": node.get("action"),
            "outcome": outcome(node),
            "summary": summary(node),
            "cost_usd": node.get("cost_usd", 0.0),
            "tokens_in": node.get("tokens_in", 0),
            "tokens_out": node.get("tokens_out", 0),
            "wall_s": node.get("wall_s", 0.0),
            "source": node.get("source") or "",
            "diff": _diff(by_id.get(node.get("parent_id")), node),
            "result": node.get("result"),
            "advice": _advice(task.nodes, node),
            "prompt": (task.transcripts.get(node.get("prompt_id")) or {}).get("messages", []),
            "response": task.transcripts.get(node.get("response_id")),
        }
        for node in task.nodes
    ]


def best_node(nodes: list[dict]) -> int | None:
    """The id of the fastest correct node (the run's best kernel), if any."""
    correct = [n for n in nodes if outcome(n) == "correct"]
    return max(correct, key=speedup)["id"] if correct else None
