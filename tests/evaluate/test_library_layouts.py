"""What the library baselines read off a task: which op its calls make, and how the FlashInfer
adapter hands the task's tensors to FlashInfer without a copy (the libraries' kernels run on the
H200 only: tests/gpu/test_gpu_platforms.py times them on captured tasks)."""

import pytest
import torch

from harness.evaluate.baselines import Sample
from harness.evaluate.baselines._calls import compute_calls, kind_of
from harness.evaluate.baselines.flashinfer import _halves, _rows
from harness.reference import load_reference_module
from harness.tasks import resolve_one


@pytest.mark.parametrize(
    ("task_id", "kind"),
    [
        ("rmsnorm_bf16_qwen", "rms_norm"),
        ("qwen35_fused11_add_to_copy_8x1x4096_7447d5", "residual_rms_norm"),
        ("sd35_fused8_to_copy_mul_2x24x333x64_ab63a3", "rms_norm"),
        ("sd35_native_layer_norm_2x333x1536_fe94e1", "layer_norm"),
        ("qwen35_fused2_silu_mul_8x1x12288_84e47e", "gated"),
        ("gemma4_fused2_gelu_mul_8x1x21504_ba362f", "gated"),
        ("softmax_fp16_attn", "softmax"),
        # Gemma 4's captured norm region ends at the rsqrt factor, which no library returns.
        ("gemma4_fused16_to_copy_pow_8x1x1_30e901", None),
        ("gemma4_mul_8x1x5376_24cd0d", None),
    ],
)
def test_the_op_a_task_makes_is_read_from_its_calls(task_id, kind):
    reference = load_reference_module(resolve_one(task_id).reference_path, f"kind_{task_id}")
    torch.manual_seed(0)
    model = reference.Model(*reference.get_init_inputs())
    sample = Sample(model, reference.get_inputs(), torch.device("cpu"))
    assert kind_of(compute_calls(sample), sample) == kind


def test_a_per_head_view_of_a_token_major_buffer_is_rows_of_the_head_dim_and_back():
    # SD3.5's q/k norm input: [B, H, S, D] with strides of a [B, S, H, D] buffer.
    buffer = torch.randn(2, 333, 24, 64)
    heads = buffer.permute(0, 2, 1, 3)
    rows, back = _rows(heads)
    assert rows.shape == (2 * 333 * 24, 64) and rows.data_ptr() == buffer.data_ptr()
    normed = torch.nn.functional.rms_norm(rows, [64])  # a contiguous result of the rows' shape
    assert torch.equal(back(normed), torch.nn.functional.rms_norm(heads, [64]))


def test_rows_with_a_gap_between_them_are_taken_with_their_stride():
    padded = torch.randn(8, 2051)[:, :2048]  # each row 3 elements short of the next
    rows, _ = _rows(padded)
    assert rows.shape == (8, 2048) and rows.stride() == (2051, 1)


def test_a_layout_flashinfer_cannot_read_is_refused():
    assert _rows(torch.randn(64, 32).t()) is None  # the last dimension is not contiguous
    assert _rows(torch.randn(7)) is None
    # Outer dimensions that no single stride spans: (a, b, hidden) fits, and nothing fits a 4-D slice.
    sliced = torch.randn(4, 10, 64)[:, :5]
    rows, _ = _rows(sliced)
    assert rows.shape == (4, 5, 64) and _rows(sliced, ranks=(2,)) is None
    assert _rows(torch.randn(4, 10, 6, 64)[:, :5, :3]) is None


def test_gate_and_up_are_halves_only_when_they_are_one_tensors_two_halves():
    merged = torch.randn(16, 2 * 128)
    gate, up = merged.chunk(2, dim=-1)
    assert _halves(gate, up) == ((16, 256), (256, 1))
    assert _halves(up, gate) is None  # the wrong way round
    assert _halves(torch.randn(16, 128), torch.randn(16, 128)) is None  # two projections' outputs
