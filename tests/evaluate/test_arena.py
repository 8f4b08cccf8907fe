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
