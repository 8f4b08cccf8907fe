"""The leaderboard's tables, one per task set, as markdown, JSON, CSV or a standalone HTML page."""

from __future__ import annotations

import json
from collections.abc import Callable

import pandas as pd

from leaderboard.table import Layout, columns_for, expand, render, shown

Tables = list[tuple[str, pd.DataFrame]]


def _heading(name: str, rows: pd.DataFrame, layout: Layout) -> str:
    runs = rows[layout.run_key].nunique()
    named = f"{layout.table_name} {name}" if layout.table_name else name
    return f"{named} ({runs} {layout.run_noun}{'s' if runs != 1 else ''})"


def markdown(tables: Tables, layout: Layout) -> str:
    return "\n\n".join(f"### {_heading(name, rows, layout)}\n\n{render(rows, layout.shown)}" for name, rows in tables)


def _records(rows: pd.DataFrame, layout: Layout) -> list[dict]:
    # to_json writes NaN as null, which json.dumps would write as NaN (not JSON).
    return json.loads(rows[columns_for(rows, layout.exported)].to_json(orient="records"))


def as_json(tables: Tables, layout: Layout) -> str:
    return json.dumps([{"task_set": name, "rows": _records(rows, layout)} for name, rows in tables], indent=2)


def as_csv(tables: Tables, layout: Layout) -> str:
    """One table; its task_set column tells the sets apart."""
    frames = [rows[columns_for(rows, layout.exported)] for _, rows in tables]
    return (pd.concat(frames) if frames else pd.DataFrame(columns=expand(layout.exported, []))).to_csv(index=False)


def html(tables: Tables, layout: Layout, title: str = "ForgeBench leaderboard") -> str:
    """A page that stands alone, from the site's templates (board.html.j2), its cells as the site's."""
    from leaderboard.site.build import standalone
    from leaderboard.site.pages import cell

    boards = []
    for name, rows in tables:
        cells = shown(rows, layout.shown)
        body = [[cell(value) for value in row] for row in cells.astype(object).itertuples(index=False)]
        boards.append({"heading": _heading(name, rows, layout), "columns": list(cells.columns), "rows": body})
    return standalone("board.html.j2", title=title, boards=boards)


FORMATS: dict[str, Callable[[Tables, Layout], str]] = {"md": markdown, "json": as_json, "csv": as_csv, "html": html}
