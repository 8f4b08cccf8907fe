"""The site's charts: cost against speedup with its Pareto frontier, best-so-far curves over rounds,
and per-task speedups side by side.

Every figure is Plotly's figure JSON as a plain dict ({"data": [...], "layout": {...}}), serialised
by plotly.io and drawn by the vendored plotly.js. A site holds hundreds of figures, and building each
through plotly.graph_objects (which validates every property as it is set) took most of the build's
time; tests/test_site.py checks every kind of figure against Plotly's schema instead."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from leaderboard.site.data import SuiteRun

MARGIN = {"l": 60, "r": 20, "t": 40, "b": 50}
NO_COST = (
    "no API cost recorded: these runs cost $0<br>(the offline model, or a provider without prices), "
    "so there is no cost frontier"
)
NO_COST_NOTE = {"text": NO_COST, "xref": "paper", "yref": "paper", "x": 0.5, "y": 0.98, "showarrow": False}


@dataclass(frozen=True)
class CostPoint:
    name: str
    cost_usd: float
    speedup: float  # guarded: a task without a correct, faster kernel counts 1.0
    url: str  # the page a click on the point opens, relative to the site's root


def pareto_frontier(points: list[CostPoint]) -> list[CostPoint]:
    """The points no other point beats on both axes (cheaper or as cheap, and faster), cheapest first."""
    frontier: list[CostPoint] = []
    for point in sorted(points, key=lambda p: (p.cost_usd, -p.speedup)):
        if not frontier or point.speedup > frontier[-1].speedup:
            frontier.append(point)
    return frontier


def cost_figure(points: list[CostPoint], title: str) -> dict:
    """Runs as points, the frontier as a step line: between two frontier runs, the cheaper one's
    speedup is the best a budget buys. Where no run cost anything (the offline model, a provider
    without prices), there is no trade-off to draw: the runs stand at zero with a note saying so."""
    runs = {
        "type": "scatter",
        "name": "runs",
        "x": [p.cost_usd for p in points],
        "y": [p.speedup for p in points],
        "mode": "markers+text",
        "text": [p.name for p in points],
        "textposition": "top center",
        "customdata": [p.url for p in points],
        "hovertemplate": "%{text}<br>$%{x:.4g}, %{y:.3g}x<extra></extra>",
        "marker": {"size": 11},
    }
    axes = {"xaxis": {"title": {"text": "LLM cost (USD)"}}, "yaxis": {"title": {"text": "speedup vs eager (guarded)"}}}
    layout = {"title": {"text": title}, **axes, "margin": MARGIN, "height": 420}
    if not any(p.cost_usd for p in points):
        # Plotly would span a lone x of 0 from -1 to 1, as if a run could cost less than nothing.
        layout["xaxis"] = {**axes["xaxis"], "range": [-0.5, 0.5], "tickvals": [0], "ticktext": ["$0"]}
        layout["showlegend"] = False
        layout["annotations"] = [NO_COST_NOTE]
        return {"data": [runs], "layout": layout}
    frontier = pareto_frontier(points)
    line = {
        "type": "scatter",
        "name": "Pareto frontier",
        "x": [p.cost_usd for p in frontier],
        "y": [p.speedup for p in frontier],
        "mode": "lines",
        "line": {"shape": "hv", "dash": "dash"},
        "hoverinfo": "skip",
    }
    return {"data": [runs, line], "layout": layout}


def rounds_curve(suite: SuiteRun, metric: str) -> list[tuple[int, float]]:
    """The median over the run's tasks of a step metric at each round; a task that stopped early
    keeps its last value. Tasks recorded without the metric are left out."""
    series = [task.history[metric] for task in suite.tasks if task.history.get(metric)]
    if not series:
        return []
    last_round = max(points[-1][0] for points in series)
    curve = []
    for round_ in range(1, last_round + 1):
        values = [next((v for s, v in reversed(points) if s <= round_), None) for points in series]
        known = [v for v in values if v is not None]
        if known:
            curve.append((round_, statistics.median(known)))
    return curve


def rounds_figure(suites: list[SuiteRun], metric: str, title: str, y_title: str) -> dict | None:
    """A line per run, or None when no run recorded the metric."""
    traces = []
    for suite in suites:
        curve = rounds_curve(suite, metric)
        if curve:
            x, y = [r for r, _ in curve], [v for _, v in curve]
            traces.append({"type": "scatter", "name": suite.name, "x": x, "y": y, "mode": "lines+markers"})
    if not traces:
        return None
    axes = {"xaxis": {"title": {"text": "round"}, "dtick": 1}, "yaxis": {"title": {"text": y_title}}}
    return {"data": traces, "layout": {"title": {"text": title}, **axes, "margin": MARGIN, "height": 400}}


def comparison_figure(tasks: list[str], columns: dict[str, list[float | None]], title: str) -> dict:
    """Grouped bars, one group per task and one bar per run; a run without a correct kernel for a
    task has no bar there. The dotted line at 1.0 is PyTorch eager."""
    bars = [{"type": "bar", "name": name, "x": tasks, "y": speedups} for name, speedups in columns.items()]
    eager = {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": 1,
        "y1": 1,
        "line": {"dash": "dot", "color": "#666"},
    }
    layout = {
        "title": {"text": title},
        "barmode": "group",
        "yaxis": {"title": {"text": "speedup vs eager"}},
        "xaxis": {"tickangle": -30, "automargin": True},  # long task ids keep their whole label
        "shapes": [eager],
        "margin": MARGIN,
        "height": 440,
    }
    return {"data": bars, "layout": layout}
