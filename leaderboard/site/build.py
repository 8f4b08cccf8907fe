"""Render the site's pages with Jinja2 into a folder that works from file:// and any static host."""

from __future__ import annotations

import shutil
import time
from importlib.resources import files
from pathlib import Path

import plotly.io
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from harness.errors import ForgeBenchError
from leaderboard.site import pages
from leaderboard.site.data import Site

HERE = Path(__file__).parent
# The page's own script and style, and Plotly's bundle taken from the installed package (no CDN:
# the site must draw with no network).
STATIC = [HERE / "static" / "site.js", HERE / "static" / "site.css"]
PLOTLY_JS = files("plotly") / "package_data" / "plotly.min.js"


def script_json(value) -> Markup:
    """JSON for a <script type="application/json"> block. '<', '>' and '&' become \\u escapes, which
    JSON.parse reads back, so no text inside (a kernel source holding '</script>') can end the block."""
    text = plotly.io.to_json(value, validate=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def environment() -> Environment:
    # Sources, prompts and responses are untrusted text: every value is escaped unless marked safe.
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined, trim_blocks=True
    )
    env.filters["script_json"] = script_json
    return env


def standalone(template: str, **context) -> str:
    """One page that stands alone (an export, not a page of the site): the site's style inline."""
    style = Markup((HERE / "static" / "site.css").read_text())
    return environment().get_template(template).render(**context, style=style, root="")


def _pages(site: Site):
    """(path in the site, template, context) for every page."""
    yield "index.html", "index.html.j2", pages.index(site)
    yield "compare.html", "compare.html.j2", pages.compare(site)
    yield "cost.html", "cost.html.j2", pages.cost(site)
    yield "rounds.html", "rounds.html.j2", pages.rounds(site)
    yield "e2e.html", "e2e.html.j2", pages.e2e(site)
    for suite in site.suites:
        yield pages.run_page(suite.run_id), "run.html.j2", pages.run(site, suite)
        for task in suite.tasks:
            yield pages.tree_page(task), "tree.html.j2", pages.tree(suite, task)
    for task_id in sorted({t.task for t in site.task_runs()}):
        yield pages.task_page(task_id), "task.html.j2", pages.task(site, task_id)


def build_site(site: Site, out: Path) -> list[Path]:
    """Write every page and the static files under `out`; returns the pages written."""
    if out.exists() and not out.is_dir():
        raise ForgeBenchError(f"site folder '{out}' is a file; pass a folder (it is made if missing).")
    env = environment()
    common = {"experiment": site.experiment, "built": time.strftime("%Y-%m-%d %H:%M")}
    for folder in ("static", "runs", "tasks", "trees"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    for path in STATIC:
        shutil.copyfile(path, out / "static" / path.name)
    with PLOTLY_JS.open("rb") as source, open(out / "static" / "plotly.min.js", "wb") as target:
        shutil.copyfileobj(source, target)
    written = []
    for relative, template, context in _pages(site):
        root = "../" * relative.count("/")
        html = env.get_template(template).render(**common, **context, root=root)
        (out / relative).write_text(html, encoding="utf-8")
        written.append(out / relative)
    return written
