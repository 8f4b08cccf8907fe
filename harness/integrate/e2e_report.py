"""What an e2e run found, as figures and as the table `forgebench e2e` prints: the metrics its
MLflow record carries (e2e.record) and the text the user reads, from model_run.py's result."""

from __future__ import annotations

import textwrap

from harness import serial
from harness.integrate.e2e_record import E2EResult, Mode


def _against_eager(t: dict, key: str) -> float:
    """t[key]'s time over eager's, eager timed beside it (timing.measure_together; a record of an
    older shape has only the one eager timing)."""
    return t[key]["median_ms"] / t.get(f"eager_beside_{key}", t["eager"])["median_ms"]


def summary_metrics(found: dict | E2EResult) -> dict[str, float]:
    r = E2EResult.read(found)
    t = r.timings
    eager, patched = t["eager"]["median_ms"], t["patched_eager"]["median_ms"]
    # Each variant's figures are its time relative to eager's beside it, over eager's beside the
    # patched model: ratios of one moment each, not absolute times of different moments.
    relative = {key: _against_eager(t, key) * eager for key in ("graph_only",) if key in t}
    metrics = {
        "eager_ms": eager,
        "patched_eager_ms": patched,
        "e2e_speedup_vs_eager": eager / patched,
        "predicted_speedup": r.predicted_speedup,
        "predicted_speedup_in_place": r.predicted_speedup_in_place,
        "share_of_time_replaced": r.share_of_time_replaced,
        "kernels_kept": sum(d.kept for d in r.decisions),
        "kernels_rejected": sum(not d.kept for d in r.decisions),
        "graph_only_ms": relative["graph_only"],
        # The kernels' own gain: the patched model against the same graph pass with no kernel.
        "patched_speedup_vs_graph_only": relative["graph_only"] / patched,
        # Host time of one eager forward (timing.Timing.host_ms: the timed calls' or a few issued
        # to an idle queue, whichever was less slowed): near eager_ms, the host sets the pace, and
        # kernels that save GPU time cannot show.
        "eager_host_ms": t["eager"]["host_ms"],
        "patch_overhead_us_per_call": r.patch_overhead_us_per_call,
    }
    compiled = r.mode(Mode.COMPILE)
    if compiled and not compiled.refused:
        metrics["compile_ms"] = eager / compiled.base_vs_eager
        metrics["e2e_speedup_vs_compile"] = metrics["compile_ms"] / patched
        metrics["patched_compile_ms"] = metrics["compile_ms"] / compiled.speedup
        metrics["patched_compile_speedup_vs_compile"] = compiled.speedup
    eager_mode = r.mode(Mode.EAGER)
    if eager_mode and eager_mode.realization is not None:
        metrics["realization"] = eager_mode.realization
    if "eager_prefill" in t:  # an LLM: its prefill alone, and each decode step by difference
        steps, prefill, patched_prefill = r.decode_steps, t["eager_prefill"], t["patched_prefill"]
        metrics["prefill_eager_ms"], metrics["prefill_patched_ms"] = prefill["median_ms"], patched_prefill["median_ms"]
        metrics["e2e_prefill_speedup_vs_eager"] = prefill["median_ms"] / patched_prefill["median_ms"]
        metrics["decode_step_eager_ms"] = (eager - prefill["median_ms"]) / steps
        metrics["decode_step_patched_ms"] = (patched - patched_prefill["median_ms"]) / steps
        if metrics["decode_step_patched_ms"] > 0:
            metrics["e2e_decode_speedup_vs_eager"] = metrics["decode_step_eager_ms"] / metrics["decode_step_patched_ms"]
    for key in ("max_output_error", "mean_output_error"):
        if getattr(r, key) is not None:
            metrics[key] = getattr(r, key)
    if r.tokens_match is not None:
        metrics["tokens_match"] = float(r.tokens_match)
    return metrics


# The decisions table's "why": a reason wrapped at this width, whole up to this many characters (cut
# at a fixed width, "...: not faster" read "...: no"); a longer one is cut at a word's end, and
# decisions.json has it whole.
WHY_CHARS, WHY_WIDTH = 300, 72

# A forward whose host time is this close to its time is paced by the host (eager ResNet-50 on the
# H200: 9.9 ms of host time for a 9.1 ms forward).
HOST_BOUND = 0.9


def _agreement(found: dict) -> str:
    """agreement.py's findings in words: the error of the float outputs (an LLM's prefill logits),
    and for an LLM whether every step's token is eager's."""
    said = []
    if found.get("max_output_error") is not None:
        said.append(f"max error {found['max_output_error']:.3g}, mean {found.get('mean_output_error') or 0:.3g}")
    if found.get("tokens_match") is not None:
        said.append(f"tokens match: {found['tokens_match']}")
    if found.get("output_mismatch"):
        said.append(found["output_mismatch"])
    return "; ".join(said) or "no output compared"


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else ""


def _phase_rows(m: dict) -> list[list[str]]:
    rows = [["eager", f"{m['eager_ms']:.4g} ms", "1.00x"]]
    rows.append(["eager + kept kernels", f"{m['patched_eager_ms']:.4g} ms", f"{m['e2e_speedup_vs_eager']:.2f}x"])
    if "prefill_eager_ms" in m:
        rows.append(["prefill, eager", f"{m['prefill_eager_ms']:.4g} ms", ""])
        prefill = f"{m['e2e_prefill_speedup_vs_eager']:.2f}x"
        rows.append(["prefill, kept kernels", f"{m['prefill_patched_ms']:.4g} ms", prefill])
        rows.append(["a decode step, eager (by difference)", f"{m['decode_step_eager_ms']:.4g} ms", ""])
        rows.append(
            [
                "a decode step, kept kernels",
                f"{m['decode_step_patched_ms']:.4g} ms",
                _x(m.get("e2e_decode_speedup_vs_eager")),
            ]
        )
    rows.append(["predicted (Amdahl, isolated speedups)", "", f"{m['predicted_speedup']:.2f}x"])
    rows.append(["predicted (Amdahl, in-place speedups)", "", f"{m['predicted_speedup_in_place']:.2f}x"])
    return rows


def modes_table(r: E2EResult) -> str:
    """One row per execution mode: the mode alone against eager timed beside it, the patched model
    against the mode alone, the kernels kept there, the prediction and how much of it was realized."""
    from tabulate import tabulate

    rows = []
    for m in r.modes.values():
        if m.refused:
            rows.append([m.mode.value, "", "", "", "", "", "", f"refused: {m.refused}"])
            continue
        rows.append(
            [
                m.mode.value,
                _x(m.base_vs_eager),
                _x(m.speedup),
                len(m.kept),
                _x(m.predicted_speedup),
                f"{m.realization:.2f}" if m.realization is not None else "",
                m.versus_base,
                textwrap.shorten(_agreement(m.agreement), 60, placeholder=" ...") if m.kept else "",
            ]
        )
    headers = [
        "mode",
        "alone vs eager",
        "patched vs alone",
        "kept",
        "predicted",
        "realized",
        "by the spreads",
        "output",
    ]
    return tabulate(rows, headers=headers)


def _lines(r: E2EResult, m: dict) -> list[str]:
    lines = [f"output against eager: {_agreement(serial.to_dict(r))}"]
    lines.append(
        f"graph pass, no kernel: {m['graph_only_ms']:.4g} ms ({m['patch_overhead_us_per_call']:+.3g} us per ATen call "
        f"of {r.aten_calls_per_forward} against eager); {sum(r.hits_per_forward.values())} calls a forward went to "
        f"kernels; {r.unmatched_calls} graph calls of the kernels' ops matched no task and stayed PyTorch's"
    )
    if r.traced_as:
        lines.append(f"traced: {r.traced_as}")
    if r.patched_is_eager:
        lines.append("no kernel was left in the model: the patched model is the model as it is, and timed as eager")
    else:
        lines.append(f"the kernels against the graph pass alone: {m['patched_speedup_vs_graph_only']:.2f}x")
    alone = r.graph_only_agreement
    if alone.get("tokens_match") is False or alone.get("max_output_error"):
        lines.append(
            f"the traced graph alone, no kernel, against eager: {_agreement(alone)}"
            " (the model computes otherwise when traced: this much is not the kernels')"
        )
    if r.reinplace_error:
        lines.append(f"the graph ran functional, its writes not made in place again: {r.reinplace_error[:200]}")
    # On a CPU the host does the work: the question is a GPU's.
    on_gpu = str(r.request.get("device", "")).startswith("cuda")
    if on_gpu and m["eager_host_ms"] >= HOST_BOUND * m["eager_ms"]:
        lines.append(
            f"eager is host-bound here: its host takes {m['eager_host_ms']:.4g} ms to issue a forward that takes "
            f"{m['eager_ms']:.4g} ms, so a kernel's GPU saving shows only where it also costs the host less"
        )
    if not r.request.get("compile", True):
        lines.append("torch.compile and torch.compile + kept kernels: not timed (--no-compile)")
    return lines


def _advice(r: E2EResult) -> str | None:
    """Which mode to deploy: the fastest against eager, with its kernels or without."""
    timed = [m for m in r.modes.values() if not m.refused and m.base_vs_eager and m.speedup]
    if not timed:
        return None
    best = max(timed, key=lambda m: m.base_vs_eager * m.speedup)
    kernels = f"with its {len(best.kept)} kept kernels" if best.kept else "without kernels (none gained there)"
    return f"fastest here: {best.mode.value} {kernels}, {best.base_vs_eager * best.speedup:.2f}x eager"


def _kernel_rows(r: E2EResult) -> list[list]:
    figures = {k.task_id: k for k in r.kernels}
    rows = []
    for d in r.decisions:
        k = figures.get(d.task_id)
        kept_in = ", ".join(m.value for m in k.kept_in) if k else ""
        why = textwrap.shorten(d.reason, WHY_CHARS, placeholder=" ...") if d.reason else ""
        isolated, in_model = (_x(k.isolated_speedup), _x(k.in_model_speedup)) if k else ("", "")
        rows.append([d.task_id, d.decision.value, isolated, _x(d.in_place_speedup), in_model, kept_in, why])
    return rows


def describe(found: dict | E2EResult) -> str:
    """The e2e table for the terminal."""
    from tabulate import tabulate

    r = E2EResult.read(found)
    m = summary_metrics(r)
    changed = r.request.get("overrides")
    lines = [
        f"{r.model}: {int(m['kernels_kept'])} kernels kept, {int(m['kernels_rejected'])} not"
        + (f" (workload changed: {' '.join(changed)}; the prediction is the captured workload's)" if changed else ""),
        tabulate(_phase_rows(m)),
        f"patched against eager, by their timing spreads: {r.patched_vs_eager}"
        + "".join(f"; {name}: {said}" for name, said in r.phases_vs_eager.items() if name != "model"),
        *_lines(r, m),
    ]
    if r.modes:
        lines += ["each mode timed beside eager; patched against the same mode with no kernel:", modes_table(r)]
        lines += [a for a in [_advice(r)] if a]
    headers = ["task", "decision", "isolated", "in place", "in model", "kept in", "why"]
    widths = [None, None, None, None, None, None, WHY_WIDTH]
    lines.append(tabulate(_kernel_rows(r), headers=headers, maxcolwidths=widths))
    wall = f" in {r.wall_s:.0f} s" if r.wall_s else ""
    lines.append(f"recorded as MLflow run {r.run_id} (kind e2e){wall}")
    return "\n".join(lines)
