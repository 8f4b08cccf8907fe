"""What a suite run's kernels would do to the models its tasks were captured from, before any e2e
run: Amdahl over the capture's shares (harness.amdahl, the prediction `forgebench e2e` makes over the
kernels that ran in the model). The leaderboard shows it as a column per captured model, in eager;
`forgebench leaderboard --predicted` gives a row per suite run, model and execution mode."""

from __future__ import annotations

import pandas as pd

from harness.amdahl import predicted_speedup, share_in_mode
from leaderboard import stats

# One column per model a run's captured tasks came from (their `source`), spelled out from the records.
COLUMN = "predicted_e2e_{source}"
EAGER = "eager"
VIEW_COLUMNS = [
    "run",
    "agent",
    "model",
    "platform",
    "source",
    "mode",
    "kernels",
    "mode_vs_eager",
    "predicted_speedup",
    "measured_speedup",
    "device",
    "alone_from",
    "e2e_run",
]
# What an e2e row must hold to be read here; an older record's rows may lack the mode's columns.
_E2E_FIELDS = ["model", "device", "mode", "mode_vs_eager", "mode_speedup", "refused", "overrides", "parent_run_id"]


def _op(call: str) -> str:
    """aten.add.Tensor -> aten.add: a fused task's member as a single-call task's `operator` names it."""
    return ".".join(call.split(".")[:2])


def by_source(tasks: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The task runs of captured tasks (those that recorded a `time_share`), per model, each with
    `guarded`: its speedup as the guard delivers it (the kernel's when correct and faster, else 1.0)."""
    if "time_share" not in tasks or "source" not in tasks:
        return {}
    found = tasks[tasks["time_share"].notna()]
    correct = found["correct"].fillna(0).to_numpy() > 0
    found = found.assign(guarded=stats.guarded(found["speedup_vs_eager"].to_numpy(float), correct))
    return {str(source): group for source, group in found.groupby("source", sort=True)}


def kernels(captured: pd.DataFrame, scale: float = 1.0) -> list[tuple[float, float]]:
    """The (share, speedup) pairs Amdahl takes for one model's captured task runs, each share made a
    share of the mode's time by `scale` (eager over the mode alone; 1 in eager).

    Single-call tasks are the capture's call groups, which share no call: each counts at its share
    and speedup. A fused task's calls are also calls of the single-call groups of its members' ops,
    and in the model a longer chain takes its calls first; so a fused kernel counts only for what it
    saves beyond the fastest single-call kernel (v_m) of any of its members' ops: the time that
    kernel would leave of its share, share / v_m, sped up v / v_m. The prediction then never exceeds
    what keeping every kernel gives, but for a call two fused tasks share (a GEMM epilogue's add that
    also starts a norm)."""
    faster = captured[captured["guarded"] > 1]
    members = faster["members"].fillna("") if "members" in faster else pd.Series("", index=faster.index)
    singles, fused = faster[members == ""], faster[members != ""]
    fastest = singles.groupby("operator")["guarded"].max().to_dict() if "operator" in singles else {}
    pairs = [(share_in_mode(s, scale), v) for s, v in zip(singles["time_share"], singles["guarded"])]
    for share, speedup, calls in zip(fused["time_share"], fused["guarded"], members[members != ""]):
        beaten = max(fastest.get(_op(call), 1.0) for call in calls.split(","))
        if speedup > beaten:
            pairs.append((share_in_mode(share, scale) / beaten, speedup / beaten))
    return pairs


def columns(tasks: pd.DataFrame) -> dict[str, float]:
    """One suite run's predicted eager speedup of each model its captured tasks came from."""
    return {COLUMN.format(source=s): predicted_speedup(kernels(found)) for s, found in by_source(tasks).items()}


def sources(tasks: pd.DataFrame) -> list[str]:
    """The models captured tasks in the records came from."""
    return sorted(by_source(tasks))


def _timed(e2e: pd.DataFrame) -> pd.DataFrame:
    """The e2e rows of modes timed on the captured workload (not refused, no --override), newest first."""
    if e2e.empty:
        return pd.DataFrame(columns=[*_E2E_FIELDS, "run", "started"])
    rows = e2e.reindex(columns=sorted({*e2e.columns, *_E2E_FIELDS})).sort_values("started", ascending=False)
    return rows[rows["refused"].isna() & rows["overrides"].isna()]


def modes_alone(e2e: pd.DataFrame) -> pd.DataFrame:
    """What each mode alone gives each model on each device (eager over the mode with no kernel),
    from the newest e2e record that timed it on the captured workload."""
    rows = _timed(e2e)
    known = rows[(rows["mode"] != EAGER) & rows["mode_vs_eager"].notna()]
    return known.drop_duplicates(["model", "device", "mode"])


def _rows(run: pd.DataFrame, alone: pd.DataFrame, measured: dict) -> list[dict]:
    """One suite run's rows: per captured model, eager and each mode `alone` knows on its device."""
    first, rows = run.iloc[0], []
    for source, captured in by_source(run).items():
        here = alone[(alone["model"] == source) & (alone["device"] == first["device"])]
        modes = [(EAGER, 1.0, None)] + [(r["mode"], r["mode_vs_eager"], r["run"]) for _, r in here.iterrows()]
        for mode, scale, scale_from in modes:
            pairs = kernels(captured, scale)
            speedup, e2e_run = measured.get((first["parent_run_id"], source, first["device"], mode), (None, None))
            rows.append(
                {
                    **{k: first[k] for k in ("task_set", "agent", "model", "platform", "device", "parent_run_id")},
                    "source": source,
                    "mode": mode,
                    "kernels": f"{len(pairs)}/{len(captured)}",
                    "mode_vs_eager": scale,
                    "predicted_speedup": predicted_speedup(pairs),
                    "measured_speedup": speedup,
                    "alone_from": scale_from,
                    "e2e_run": e2e_run,
                    "run": first["parent_run_id"][:8],
                }
            )
    return rows


def view(tasks: pd.DataFrame, e2e: pd.DataFrame) -> pd.DataFrame:
    """A row per suite run, captured model and mode: eager from the capture's shares; each other mode
    where an e2e record of the model on the run's device says what the mode alone gives (the shares
    scaled by it); beside each, what the newest e2e run of this suite run's kernels on that device
    measured there on the captured workload (the patched model over the same mode with no kernel)."""
    timed = _timed(e2e).drop_duplicates(["parent_run_id", "model", "device", "mode"])
    measured = {
        (r["parent_run_id"], r["model"], r["device"], r["mode"]): (r["mode_speedup"], r["run"])
        for _, r in timed.iterrows()
    }
    alone = modes_alone(e2e)
    rows = [row for _, run in tasks.groupby("parent_run_id", sort=False) for row in _rows(run, alone, measured)]
    if not rows:
        return pd.DataFrame(columns=["task_set", *VIEW_COLUMNS, "parent_run_id"])
    frame = pd.DataFrame(rows).assign(later=lambda f: f["mode"] != EAGER)  # eager first, then the modes by name
    frame = frame.sort_values(["task_set", "source", "later", "mode", "predicted_speedup"], ascending=[1, 1, 1, 1, 0])
    return frame.drop(columns="later").reset_index(drop=True)
