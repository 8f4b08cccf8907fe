"""The leaderboard's tables, one per task set, as markdown, JSON, CSV or a standalone HTML page."""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape

import pandas as pd

from leaderboard.table import Layout, render, shown

Tables = list[tuple[str, pd.DataFrame]]

PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; }}
table {{ border-collapse: collapse; margin-bottom: 2rem; }}
th, td {{ padding: 0.25rem 0.6rem; border-bottom: 1px solid #ddd; text-align: right; }}
th {{ background: #f4f4f4; }}
</style>
</head>
<body>
<h1>{title}</h1>
{body}
</body>
</html>
"""


def _heading(name: str, rows: pd.DataFrame, layout: Layout) -> str:
    runs = rows[layout.run_key].nunique()
    named = f"{layout.table_name} {name}" if layout.table_name else name
    return f"{named} ({runs} {layout.run_noun}{'s' if runs != 1 else ''})"


def markdown(tables: Tables, layout: Layout) -> str:
    return "\n\n".join(f"### {_heading(name, rows, layout)}\n\n{render(rows, layout.shown)}" for name, rows in tables)


def _records(rows: pd.DataFrame, layout: Layout) -> list[dict]:
    # to_json writes NaN as null, which json.dumps would write as NaN (not JSON).
    return json.loads(rows[[c for c in layout.exported if c in rows]].to_json(orient="records"))


def as_json(tables: Tables, layout: Layout) -> str:
    return json.dumps([{"task_set": name, "rows": _records(rows, layout)} for name, rows in tables], indent=2)


def as_csv(tables: Tables, layout: Layout) -> str:
    """One table; its task_set column tells the sets apart."""
    frames = [rows[[c for c in layout.exported if c in rows]] for _, rows in tables]
    return (pd.concat(frames) if frames else pd.DataFrame(columns=layout.exported)).to_csv(index=False)


def html(tables: Tables, layout: Layout, title: str = "ForgeBench leaderboard") -> str:
    sections = [
        f"<h2>{escape(_heading(name, rows, layout))}</h2>\n"
        + shown(rows, layout.shown).to_html(index=False, na_rep="", float_format="{:.3g}".format, border=0)
        for name, rows in tables
    ]
    return PAGE.format(title=escape(title), body="\n".join(sections))


FORMATS: dict[str, Callable[[Tables, Layout], str]] = {"md": markdown, "json": as_json, "csv": as_csv, "html": html}
