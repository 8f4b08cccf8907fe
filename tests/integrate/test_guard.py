"""The guard's last step on fixed timings: which kept kernels the whole model, and each phase it is
reported by, is not slower with (guard.settle), and the spread of a phase got by difference."""

from harness.integrate import guard
from tests.integrate.test_graph_patch import CHAIN, _kernel


def _spread(ms: float) -> dict:
    return {"median_ms": ms, "p20_ms": ms * 0.98, "p80_ms": ms * 1.02}


def test_a_model_slower_with_its_kernels_loses_the_one_that_saved_least_until_it_is_not(tmp_path):
    # Each kernel faster in place, the model slower with all three (a host-bound model): the one that
    # saved least goes first, then the next, until the model is no slower than eager. A kept kernel
    # that never ran in the forward is not blamed.
    kernels = [_kernel(tmp_path, CHAIN, f"k{i}") for i in range(4)]
    decisions = [guard.Decision(k.task_id, "kept", op_ms=1.0, kernel_ms=kernel_ms) for k, kernel_ms in
                 zip(kernels, [0.5, 0.9, 0.2, 0.1])]  # fmt: skip
    hits = {"k0": 1, "k1": 1, "k2": 1}  # k3 shadowed: it ran nowhere
    model_ms = {4: 12.0, 3: 11.0, 2: 9.8}  # by kernels in place; eager takes 10 ms

    def patched(kept):
        ran = {k.task_id: hits[k.task_id] for k in kept if k.task_id in hits}
        return {"model": guard.Run(None, None, ran, _spread(model_ms[len(kept)]), _spread(10.0))}

    kept, runs = guard.settle(kernels, decisions, patched, lambda ks: ks)
    timing = runs["model"][3]
    assert [k.task_id for k in kept] == ["k2", "k3"] and timing["median_ms"] == 9.8
    by_id = {d.task_id: d for d in decisions}
    assert [by_id[t].decision for t in ("k0", "k1", "k2", "k3")] == ["slower_in_model"] * 2 + ["kept"] * 2
    assert "saved the least there in place (100 us a forward)" in by_id["k1"].reason  # 1.0 - 0.9 ms, once


def test_with_only_kernels_that_never_ran_left_the_pass_itself_is_what_is_slower(tmp_path):
    kernel = _kernel(tmp_path)
    decisions = [guard.Decision("add_relu", "kept", op_ms=1.0, kernel_ms=0.5)]
    calls = []

    def patched(kept):
        calls.append(len(kept))
        return {"model": guard.Run(None, None, {}, _spread(12.0), _spread(10.0))}

    kept, _ = guard.settle([kernel], decisions, patched, lambda ks: ks)
    assert kept == [kernel] and decisions[0].decision == "kept" and calls == [1]


def test_every_reported_phase_is_held_to_eagers_time_not_only_the_whole_forward(tmp_path):
    # An LLM's request is no slower with both kernels, but its prefill is: the kernel that ran in
    # the prefill goes, though the decode kernel saved less over the whole request.
    kernels = [_kernel(tmp_path, CHAIN, t) for t in ("at_prefill", "at_decode")]
    decisions = [guard.Decision(k.task_id, "kept", op_ms=1.0, kernel_ms=0.5) for k in kernels]
    eager = {"model": _spread(100.0), "prefill": _spread(40.0)}
    eager["decode"] = guard.difference(eager["model"], eager["prefill"])

    def patched(kept):
        ids = {k.task_id for k in kept}
        prefill = _spread(44.0 if "at_prefill" in ids else 40.0)
        whole = _spread(99.0 if "at_prefill" in ids else 95.0)
        runs = {
            "model": guard.Run(None, None, {t: 4 for t in ids}, whole, eager["model"]),
            "prefill": guard.Run(None, None, {t: 4 for t in ids & {"at_prefill"}}, prefill, eager["prefill"]),
        }
        decode = guard.difference(whole, prefill)
        runs["decode"] = guard.Run(None, None, {t: 4 for t in ids & {"at_decode"}}, decode, eager["decode"])
        return runs

    kept, runs = guard.settle(kernels, decisions, patched, lambda ks: ks)
    assert [k.task_id for k in kept] == ["at_decode"] and runs["prefill"][3]["median_ms"] == 40.0
    assert decisions[0].decision == "slower_in_model" and "the prefill took 44 ms" in decisions[0].reason
    assert decisions[1].decision == "kept"


def test_a_phase_slower_with_no_kernel_in_it_takes_every_kernel_out(tmp_path):
    # The graph pass alone makes the prefill slower; no kernel ran there, so dropping one at a time
    # cannot help it: all go at once, and the model runs as it is.
    kernels = [_kernel(tmp_path, CHAIN, t) for t in ("a", "b")]
    decisions = [guard.Decision(k.task_id, "kept", op_ms=1.0, kernel_ms=0.5) for k in kernels]
    eager = {"model": _spread(100.0), "prefill": _spread(40.0)}
    seen = []

    def patched(kept):
        seen.append(len(kept))
        hits = {k.task_id: 2 for k in kept}
        return {
            "model": guard.Run(None, None, hits, _spread(90.0), eager["model"]),
            "prefill": guard.Run(None, None, {}, _spread(45.0), eager["prefill"]),
        }

    kept, _ = guard.settle(kernels, decisions, patched, lambda ks: ks)
    assert kept == [] and seen == [2, 0]
    assert all(d.decision == "slower_in_model" and "ran no kernel there" in d.reason for d in decisions)


def test_each_kept_set_is_weighed_against_eager_timed_beside_it_not_earlier(tmp_path):
    # The host slowed between two weighings (on the H200's host eager ResNet-50 went from 4.2 to
    # 7.2 ms a forward within a minute): a patched run of 12 ms is a tie with the 12 ms eager timed
    # beside it, not slower than the 10 ms eager of an earlier moment; and a patched run slower
    # than its own eager is slower, however eager did before.
    kernel = _kernel(tmp_path)
    for eager_ms, expected in ((12.0, "kept"), (8.0, "slower_in_model")):
        decisions = [guard.Decision("add_relu", "kept", op_ms=1.0, kernel_ms=0.5)]

        def patched(kept, eager_ms=eager_ms):
            ran = {k.task_id: 1 for k in kept}
            return {"model": guard.Run(None, None, ran, _spread(12.0 if kept else eager_ms), _spread(eager_ms))}

        guard.settle([kernel], decisions, patched, lambda ks: ks)
        assert decisions[0].decision == expected, (eager_ms, decisions[0])


def test_a_phase_timed_on_its_own_pass_keeps_kernels_only_when_not_slower_at_the_median(tmp_path):
    # 10.15 ms against 10 ms is a tie by the spreads (2% each side), but no gain: on a pass of its
    # own the kernel goes. A phase got by difference (no pass of its own, its spread the two
    # timings' widest) is held to the spreads only.
    kernel = _kernel(tmp_path)
    for own_pass, expected in ((object(), "slower_in_model"), (None, "kept")):
        decisions = [guard.Decision("add_relu", "kept", op_ms=1.0, kernel_ms=0.5)]

        def patched(kept, own_pass=own_pass):
            ran = {k.task_id: 1 for k in kept}
            return {"model": guard.Run(own_pass, None, ran, _spread(10.15 if kept else 10.0), _spread(10.0))}

        guard.settle([kernel], decisions, patched, lambda ks: ks)
        assert decisions[0].decision == expected, (own_pass, decisions[0])


def test_a_phase_where_no_kernel_ran_is_held_to_the_spreads_only(tmp_path):
    # The prefill ran no kernel: its pass costs a little, within the spreads, and the decode
    # kernel that gains over the whole request stays.
    kernel = _kernel(tmp_path, CHAIN, "at_decode")
    decisions = [guard.Decision("at_decode", "kept", op_ms=1.0, kernel_ms=0.5)]

    def patched(kept):
        hits = {k.task_id: 2 for k in kept}
        return {
            "model": guard.Run(object(), None, hits, _spread(95.0), _spread(100.0)),
            "prefill": guard.Run(object(), None, {}, _spread(40.2), _spread(40.0)),
        }

    kept, _ = guard.settle([kernel], decisions, patched, lambda ks: ks)
    assert [k.task_id for k in kept] == ["at_decode"] and decisions[0].decision == "kept"


def test_a_difference_of_timings_takes_the_widest_spread():
    d = guard.difference(
        {"median_ms": 10.0, "p20_ms": 9.0, "p80_ms": 11.0}, {"median_ms": 4.0, "p20_ms": 3.5, "p80_ms": 4.5}
    )
    assert d == {"median_ms": 6.0, "p20_ms": 4.5, "p80_ms": 7.5}
