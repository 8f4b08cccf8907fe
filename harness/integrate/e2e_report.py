"""What an e2e run found, as figures and as the table `forgebench e2e` prints: the metrics its
MLflow record carries (e2e.record) and the text the user reads, from model_run.py's result."""

from __future__ import annotations

import textwrap


def _against_eager(t: dict, key: str) -> float:
    """t[key]'s time over eager's, eager timed beside it (timing.measure_together; a record of
    before the fifteenth session has only the one eager timing)."""
    return t[key]["median_ms"] / t.get(f"eager_beside_{key}", t["eager"])["median_ms"]


def summary_metrics(found: dict) -> dict[str, float]:
    t = found["timings"]
    eager, patched = t["eager"]["median_ms"], t["patched_eager"]["median_ms"]
    # Each variant's figures are its time relative to eager's beside it, over eager's beside the
    # patched model: ratios of one moment each, not absolute times of different moments.
    relative = {key: _against_eager(t, key) * eager for key in ("graph_only", "compile", "patched_compile") if key in t}
    decisions = found["decisions"]
    metrics = {
        "eager_ms": eager,
        "patched_eager_ms": patched,
        "e2e_speedup_vs_eager": eager / patched,
        "predicted_speedup": found["predicted_speedup"],
        "predicted_speedup_in_place": found["predicted_speedup_in_place"],
        "share_of_time_replaced": found["share_of_time_replaced"],
        "kernels_kept": sum(d["decision"] == "kept" for d in decisions),
        "kernels_rejected": sum(d["decision"] != "kept" for d in decisions),
        "graph_only_ms": relative["graph_only"],
        # The kernels' own gain: the patched model against the same graph pass with no kernel.
        "patched_speedup_vs_graph_only": relative["graph_only"] / patched,
        # Host time of one eager forward (timing.Timing.host_ms: the timed calls' or a few issued
        # to an idle queue, whichever was less slowed): near eager_ms, the host sets the pace, and
        # kernels that save GPU time cannot show.
        "eager_host_ms": t["eager"]["host_ms"],
        "patch_overhead_us_per_call": found["patch_overhead_us_per_call"],
    }
    if "compile" in t:
        metrics["compile_ms"] = relative["compile"]
        metrics["e2e_speedup_vs_compile"] = relative["compile"] / patched
    if "patched_compile" in t:
        metrics["patched_compile_ms"] = relative["patched_compile"]
        metrics["patched_compile_speedup_vs_compile"] = relative["compile"] / relative["patched_compile"]
    if "eager_prefill" in t:  # an LLM: its prefill alone, and each decode step by difference
        steps, prefill, patched_prefill = found["decode_steps"], t["eager_prefill"], t["patched_prefill"]
        metrics["prefill_eager_ms"], metrics["prefill_patched_ms"] = prefill["median_ms"], patched_prefill["median_ms"]
        metrics["e2e_prefill_speedup_vs_eager"] = prefill["median_ms"] / patched_prefill["median_ms"]
        metrics["decode_step_eager_ms"] = (eager - prefill["median_ms"]) / steps
        metrics["decode_step_patched_ms"] = (patched - patched_prefill["median_ms"]) / steps
        if metrics["decode_step_patched_ms"] > 0:
            metrics["e2e_decode_speedup_vs_eager"] = metrics["decode_step_eager_ms"] / metrics["decode_step_patched_ms"]
    for key in ("max_output_error", "mean_output_error"):
        if found.get(key) is not None:
            metrics[key] = found[key]
    if found.get("tokens_match") is not None:
        metrics["tokens_match"] = float(found["tokens_match"])
    return metrics


# The decisions table's "why": a reason wrapped at this width, whole up to this many characters (cut
# at a fixed width, "...: not faster" read "...: no"); a longer one is cut at a word's end, and
# decisions.json has it whole.
WHY_CHARS, WHY_WIDTH = 300, 72

# A forward whose host time is this close to its time is paced by the host (eager ResNet-50 on the
# H200: 9.9 ms of host time for a 9.1 ms forward, docs/benchmarks.md, tenth session).
HOST_BOUND = 0.9


def _agreement(found: dict) -> str:
    """model_run.agreement's findings in words: the error of the float outputs (an LLM's prefill
    logits), and for an LLM whether every step's token is eager's."""
    said = []
    if "max_output_error" in found:
        said.append(f"max error {found['max_output_error']:.3g}, mean {found.get('mean_output_error', 0):.3g}")
    if found.get("tokens_match") is not None:
        said.append(f"tokens match: {found['tokens_match']}")
    if found.get("output_mismatch"):
        said.append(found["output_mismatch"])
    return "; ".join(said) or "no output compared"


def describe(found: dict) -> str:
    """The e2e table for the terminal."""
    from tabulate import tabulate

    m = summary_metrics(found)
    rows = [["eager", f"{m['eager_ms']:.4g} ms", "1.00x"]]
    if "compile_ms" in m:
        rows.append(["torch.compile", f"{m['compile_ms']:.4g} ms", f"{m['eager_ms'] / m['compile_ms']:.2f}x"])
    rows.append(["eager + kept kernels", f"{m['patched_eager_ms']:.4g} ms", f"{m['e2e_speedup_vs_eager']:.2f}x"])
    if "patched_compile_ms" in m:
        ratio = m["eager_ms"] / m["patched_compile_ms"]
        rows.append(["torch.compile + kept kernels", f"{m['patched_compile_ms']:.4g} ms", f"{ratio:.2f}x"])
    if "prefill_eager_ms" in m:
        rows.append(["prefill, eager", f"{m['prefill_eager_ms']:.4g} ms", ""])
        prefill = f"{m['e2e_prefill_speedup_vs_eager']:.2f}x"
        rows.append(["prefill, kept kernels", f"{m['prefill_patched_ms']:.4g} ms", prefill])
        rows.append(["a decode step, eager (by difference)", f"{m['decode_step_eager_ms']:.4g} ms", ""])
        decode = f"{m['e2e_decode_speedup_vs_eager']:.2f}x" if "e2e_decode_speedup_vs_eager" in m else ""
        rows.append(["a decode step, kept kernels", f"{m['decode_step_patched_ms']:.4g} ms", decode])
    rows.append(["predicted (Amdahl, isolated speedups)", "", f"{m['predicted_speedup']:.2f}x"])
    rows.append(["predicted (Amdahl, in-place speedups)", "", f"{m['predicted_speedup_in_place']:.2f}x"])
    changed = found.get("request", {}).get("overrides")
    lines = [
        f"{found['model']}: {int(m['kernels_kept'])} kernels kept, {int(m['kernels_rejected'])} not"
        + (f" (workload changed: {' '.join(changed)}; the prediction is the captured workload's)" if changed else ""),
        tabulate(rows),
        *(
            ["torch.compile and the graph pass alone were each timed beside eager: shown at their ratio to it"]
            if any(k.startswith("eager_beside_") for k in found["timings"])
            else []
        ),
        f"patched against eager, by their timing spreads: {found['patched_vs_eager']}"
        + "".join(f"; {name}: {said}" for name, said in found.get("phases_vs_eager", {}).items() if name != "model"),
    ]
    lines.append(f"output against eager: {_agreement(found)}")
    lines.append(
        f"graph pass, no kernel: {m['graph_only_ms']:.4g} ms ({m['patch_overhead_us_per_call']:+.3g} us per ATen call "
        f"of {found['aten_calls_per_forward']} against eager); {sum(found['hits_per_forward'].values())} calls a "
        f"forward went to kernels; {found['unmatched_calls']} graph calls of the kernels' ops matched no task and "
        "stayed PyTorch's"
    )
    if found.get("patched_is_eager"):
        lines.append("no kernel was left in the model: the patched model is the model as it is, and timed as eager")
    else:
        lines.append(f"the kernels against the graph pass alone: {m['patched_speedup_vs_graph_only']:.2f}x")
    alone = found.get("graph_only_agreement") or {}
    if alone.get("tokens_match") is False or alone.get("max_output_error"):
        lines.append(
            f"the traced graph alone, no kernel, against eager: {_agreement(alone)}"
            " (the model computes otherwise when traced: this much is not the kernels')"
        )
    if found.get("reinplace_error"):
        lines.append(f"the graph ran functional, its writes not made in place again: {found['reinplace_error'][:200]}")
    # On a CPU the host does the work: the question is a GPU's.
    on_gpu = str(found.get("request", {}).get("device", "")).startswith("cuda")
    if on_gpu and m["eager_host_ms"] >= HOST_BOUND * m["eager_ms"]:
        lines.append(
            f"eager is host-bound here: its host takes {m['eager_host_ms']:.4g} ms to issue a forward that takes "
            f"{m['eager_ms']:.4g} ms, so a kernel's GPU saving shows only where it also costs the host less"
        )
    if not found["request"].get("compile", True):
        lines.append("torch.compile and torch.compile + kept kernels: not timed (--no-compile)")
    if "patched_compile_ms" in m:
        verdict = found.get("patched_compile_vs_compile", "")
        advice = {
            "slower": ": under torch.compile, leave the kernels out (apply installs them in eager code)",
            "tie": ": under torch.compile they gain nothing",
        }.get(verdict, "")
        lines.append(
            f"torch.compile + kept kernels against torch.compile, by their timing spreads: {verdict} "
            f"({m['patched_compile_speedup_vs_compile']:.2f}x){advice}"
        )
    if "patched_compile_error" in found:
        lines.append(f"torch.compile + kept kernels: did not compose here ({found['patched_compile_error'][:200]})")
    decisions = []
    for d in found["decisions"]:
        in_place = f"{d['in_place_speedup']:.2f}x" if d.get("in_place_speedup") else ""
        why = textwrap.shorten(d["reason"], WHY_CHARS, placeholder=" ...") if d["reason"] else ""
        decisions.append([d["task_id"], d["decision"], in_place, why])
    widths = [None, None, None, WHY_WIDTH]
    lines.append(tabulate(decisions, headers=["task", "decision", "in place", "why"], maxcolwidths=widths))
    lines.append(f"recorded as MLflow run {found.get('run_id')} (kind e2e)")
    return "\n".join(lines)
