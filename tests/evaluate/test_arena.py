"""The referee's regions seen as a call's tensors (harness/evaluate/arena.py)."""

from __future__ import annotations

import torch

from harness.evaluate import arena


def test_each_slot_is_a_tensor_of_its_own_storage_over_the_regions_memory():
    # A captured cache's slice (every other column) and a plain tensor, two calls' worth in one region.
    inputs = [torch.randn(64, 256)[:, ::2], torch.randn(64, 128)]
    layout = arena.layout_of(inputs, [inputs[1]])
    region = torch.zeros(2 * layout.input_bytes, dtype=torch.uint8)
    for call in range(2):
        views = arena.views(region, layout.inputs, base=call * layout.input_bytes)
        for view, given, slot in zip(views, inputs, layout.inputs):
            assert view.shape == given.shape and view.stride() == given.stride()
            # An op that clones its input's storage (aten.copy of a view) clones this span alone,
            # not every slot of the region: on the H200 that read eager 19x slower.
            assert view.untyped_storage().nbytes() == slot.extent * view.element_size()
            view.copy_(given)
        again = arena.views(region, layout.inputs, base=call * layout.input_bytes)  # written into the region
        assert all(torch.equal(v, g) for v, g in zip(again, inputs))
    assert torch.equal(torch.ops.aten.copy.default(views[0], inputs[0]), inputs[0])


def test_a_slow_tasks_pooled_draws_keep_a_strided_inputs_layout(monkeypatch):
    from types import SimpleNamespace

    from harness.evaluate.session_run import _Draws

    # Every draw counts as slow, so the pool of fresh draws is used from the fourth on.
    monkeypatch.setattr(_Draws, "FRESH_DRAW_MS", -1.0)
    reference = SimpleNamespace(get_inputs=lambda: [torch.randn(64, 256)[:, ::2]])
    draws = _Draws(reference, torch.device("cpu"))
    first = draws.draw(seed=1, scale=1.0)[0]
    for seed in range(2, 8):
        drawn = draws.draw(seed=seed, scale=1.0)[0]
        assert drawn.stride() == first.stride() and drawn.untyped_storage().nbytes() <= 64 * 256 * 4
    assert len(draws.pool) == _Draws.POOL
