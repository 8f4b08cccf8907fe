"""The graph pass alone, on small modules: a chain is replaced only where the model makes exactly
the task's calls and reads none of their intermediate results; otherwise it says why."""

import importlib.util
import sys
import textwrap

import torch

from harness.integrate import guard
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.signature import task_call
from harness.integrate.traced import Traced

CHAIN = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x0, x1):
        t0 = torch.ops.aten.add.Tensor(x0, x1)
        return torch.ops.aten.relu.default(t0)


def get_inputs():
    return [torch.randn(8, 16), torch.randn(8, 16)]


def get_init_inputs():
    return []
"""


BN_RELU = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, weight, bias, mean, var):
        out = torch.ops.aten.native_batch_norm.default(x, weight, bias, mean, var, False, 0.1, 1e-05)
        return torch.ops.aten.relu.default(out[0])


def get_inputs():
    return [torch.randn(2, 8, 6, 6), torch.randn(8), torch.randn(8), torch.randn(8), torch.rand(8) + 0.5]


def get_init_inputs():
    return []
"""


class BnRelu(torch.nn.Module):
    """A batch norm + ReLU kernel written out in PyTorch (it keeps its input's layout)."""

    def forward(self, x, weight, bias, mean, var):
        scale = torch.rsqrt(var + 1e-5) * weight
        return torch.relu((x - mean[:, None, None]) * scale[:, None, None] + bias[:, None, None])


class ConvNet(torch.nn.Module):
    """Two conv + batch norm + ReLU blocks: the first at the task's shape, the second at another."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8)
        self.c2, self.b2 = torch.nn.Conv2d(8, 8, 3), torch.nn.BatchNorm2d(8)
        for norm in (self.b1, self.b2):
            norm.running_mean.normal_()
            norm.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        return torch.relu(self.b2(self.c2(torch.relu(self.b1(self.c1(x))))))


class AddRelu(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a + b) * 2


class AddReluReused(torch.nn.Module):
    def forward(self, a, b):
        y = a + b
        return torch.relu(y) + y  # the add's result is read outside the chain


class Fused(torch.nn.Module):
    def forward(self, x0, x1):
        return torch.clamp_min(x0 + x1, 0)


def _kernel(tmp_path, source: str = CHAIN, task_id: str = "add_relu", module=None) -> Kernel:
    path = tmp_path / f"{task_id}.py"
    path.write_text(textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(f"{task_id}_reference", path)
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    return Kernel(task_id, task_call(reference, reference.get_inputs()), module or Fused())


def test_a_chain_is_replaced_where_the_model_makes_it(tmp_path):
    kernel, a, b = _kernel(tmp_path), torch.randn(8, 16), torch.randn(8, 16)
    patch = Patch([kernel])
    with torch.no_grad():
        assert torch.equal(patch.compile(AddRelu())(a, b), AddRelu()(a, b))
    assert patch.hits == {"add_relu": 1} and patch.replaced == 1


def test_passes_over_one_trace_do_not_trace_again_nor_change_the_trace(tmp_path):
    # Recording, each kept set and the bare graph pass of an e2e run all run over one Dynamo trace:
    # an LLM request's trace takes minutes. A pass rewrites its own copy of the graph.
    kernel, a, b = _kernel(tmp_path), torch.randn(8, 16), torch.randn(8, 16)
    traced, want = Traced(AddRelu()), AddRelu()(a, b)
    recording, patched, bare = Patch([kernel], record=True), Patch([kernel]), Patch([])
    with torch.no_grad():
        for patch in (recording, patched, bare, patched):
            assert torch.equal(traced.using(patch)(a, b), want)
    assert len(traced.graphs) == 1
    assert len(recording.recorded["add_relu"]) == 1 and patched.hits == {"add_relu": 2} and not bare.hits
    assert bare.replaced == 0 and bare.graph_calls == patched.graph_calls > 0  # each pass saw the same graph, once


def test_a_kernel_switched_off_runs_the_tasks_own_calls_on_the_same_pass(tmp_path):
    kernel, a, b = _kernel(tmp_path, module=AddRelu()), torch.randn(8, 16), torch.randn(8, 16)  # a wrong kernel
    patch = Patch([kernel])
    run = Traced(AddRelu()).using(patch)
    with torch.no_grad():
        assert not torch.equal(run(a, b), AddRelu()(a, b)) and patch.hits == {"add_relu": 1}
        patch.off = {"add_relu"}
        assert torch.equal(run(a, b), AddRelu()(a, b)) and patch.hits == {"add_relu": 1} and not patch.fallbacks
    assert len(patch._passed) == 1  # no second pass


def test_one_patch_over_two_models_runs_each_its_own_graph(tmp_path):
    class AddReluTwice(torch.nn.Module):
        def forward(self, a, b):
            return torch.relu(a + b) * 2

    kernel, a, b = _kernel(tmp_path), torch.randn(8, 16), torch.randn(8, 16)
    patch = Patch([kernel])
    with torch.no_grad():
        assert torch.equal(patch.compile(AddRelu())(a, b), AddRelu()(a, b))
        assert torch.equal(patch.compile(AddReluTwice())(a, b), AddReluTwice()(a, b))
    assert patch.hits == {"add_relu": 2}


def test_a_chain_whose_intermediate_the_model_reads_is_left_and_the_reason_said(tmp_path):
    kernel, a, b = _kernel(tmp_path), torch.randn(8, 16), torch.randn(8, 16)
    recorded, left_open, sites = guard.record(Traced(AddReluReused()), lambda compiled: compiled(a, b), [kernel])
    assert sites == {"add_relu": 1}  # the call is at the task's signature, though no kernel can take it
    assert recorded == {"add_relu": []}
    assert "also reads the result of aten.add.Tensor" in left_open["add_relu"]
    decision = guard.decide(kernel, recorded["add_relu"], {}, torch.device("cpu"), 50.0, left_open.get("add_relu"))
    assert decision.decision == "not_integrable"


def test_another_shape_or_dtype_stays_pytorch_s(tmp_path):
    kernel = _kernel(tmp_path)
    patch = Patch([kernel])
    compiled = patch.compile(AddRelu())
    with torch.no_grad():
        for a, b in [
            (torch.randn(4, 16), torch.randn(4, 16)),
            (torch.randn(8, 16).double(), torch.randn(8, 16).double()),
        ]:
            assert torch.equal(compiled(a, b), AddRelu()(a, b))
    assert not patch.hits and patch.replaced == 0 and patch.unmatched == 2


def test_a_kernel_that_raises_falls_back_to_the_task_s_calls(tmp_path):
    kernel = _kernel(tmp_path)

    class Broken(torch.nn.Module):
        def forward(self, x0, x1):
            raise RuntimeError("no such kernel")

    kernel.module = Broken()
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    patch = Patch([kernel])
    with torch.no_grad():
        assert torch.equal(patch.compile(AddRelu())(a, b), AddRelu()(a, b))
    assert patch.fallbacks == {"add_relu": 1} and "no such kernel" in patch.errors["add_relu"]


def test_under_inductor_a_kernel_gets_the_layout_it_was_matched_with_and_the_rest_compiles_as_usual(tmp_path):
    # Inductor lays convolution outputs out channels-last; a kernel matched on contiguous inputs must
    # get them contiguous (a Triton kernel would read the wrong elements otherwise), and the batch
    # norm no kernel took must be decomposed and fused as plain torch.compile does.
    kernel = _kernel(tmp_path, BN_RELU, "bn_relu", BnRelu())
    model, x = ConvNet().eval(), torch.randn(2, 3, 8, 8)
    patch = Patch([kernel])
    with torch.no_grad():
        got, want = patch.compile(model, inductor=True)(x), model(x)
    assert patch.hits == {"bn_relu": 1} and not patch.fallbacks, patch.errors
    torch.testing.assert_close(got, want)


def test_the_tasks_calls_as_fx_code_give_what_their_replay_gives(tmp_path):
    # What the guard times a kernel against in place: the same calls, made directly.
    for source, task_id in [(CHAIN, "add_relu"), (BN_RELU, "bn_relu")]:
        call = _kernel(tmp_path, source, task_id).call
        inputs = [torch.randn(2, 8, 6, 6), *(torch.rand(8) + 0.5 for _ in range(4))]
        inputs = inputs if task_id == "bn_relu" else [torch.randn(8, 16), torch.randn(8, 16)]
        direct = call.module()
        assert sum(n.op == "call_function" for n in direct.graph.nodes) >= len(call.steps)
        assert torch.equal(direct(*inputs), call.replay(inputs))


class ChunkWrites(torch.nn.Module):
    """Writes its output one chunk at a time (as Qwen3.5's chunked delta rule does), then adds to
    every other column of it: made in place, that add would hand on the strided layout."""

    def forward(self, x, y):
        out = torch.zeros_like(x)
        for i in range(x.shape[1]):
            out[:, i] = x[:, i] * (i + 1)
        return out[:, ::2] + y[:, :4]  # a strided self, a dense result


def test_the_graph_runs_with_its_writes_in_place_again_and_layouts_as_traced():
    # Functional graphs copy all of `out` at each `out[:, i] = ...`; the pass makes those writes
    # again, but leaves out of place a call whose result's layout differs from its input's.
    x, y = torch.randn(16, 8), torch.randn(16, 8)
    traced, bare = Traced(ChunkWrites()), Patch([])
    with torch.no_grad():
        got, want = traced.using(bare)(x, y), ChunkWrites()(x, y)
    assert torch.equal(got, want) and got.stride() == want.stride() == (4, 1)  # in place: (8, 2)
    # Each call goes straight to its operator (direct_calls.py), which names its op.
    ran = [getattr(n.target, "op", n.target) for gm in bare._passed.values() for n in gm.graph.nodes]
    assert bare.reinplace_error is None
    assert not [op for op in ran if "scatter" in str(op)] and torch.ops.aten.copy_.default in ran
    assert torch.ops.aten.add.Tensor in ran  # the layout-changing add stayed out of place


class Upsample(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = torch.nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(torch.nn.functional.interpolate(x, scale_factor=2.0, mode="nearest")) * 2


def test_resampling_and_dropout_are_traced_as_eager_calls_them_not_as_a_gather_and_a_copy():
    # Tracing decomposes a nearest upsample into aranges and an index gather, and an eval dropout
    # into a clone (for Inductor); run as FX code the gather took twice eager's time, and the clone
    # copies what eager does not. The trace keeps eager's calls, and torch's decompositions are back
    # in place after it for everyone else.
    x, model = torch.randn(1, 4, 8, 8), Upsample().eval()
    traced, bare = Traced(model), Patch([])
    with torch.no_grad():
        assert torch.equal(traced.using(bare)(x), model(x))
    ran = {n.target for n in traced.graphs[0].graph.nodes if n.op == "call_function"}
    assert torch.ops.aten.upsample_nearest2d.default in ran and torch.ops.aten._unsafe_index.Tensor not in ran
    assert torch.ops.aten.clone.default not in ran
    for op in (torch.ops.aten.upsample_nearest2d.vec, torch.ops.aten.dropout.default):
        assert torch._C.DispatchKey.CompositeImplicitAutograd in op.py_kernels


# transformers' masking code, as it reads: is_tracing from its own module's globals, and a causal mask
# built only where it sees a trace (masking_utils._ignore_causal_mask_sdpa).
MASKING = """
import torch

def is_tracing(tensor=None):
    return torch.compiler.is_compiling()

def attend(q, k, v, padding_mask=None):
    if padding_mask is None and not is_tracing(padding_mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    n = q.shape[-2]
    mask = torch.ones(n, n, dtype=torch.bool).tril()
    if padding_mask is not None:
        mask = mask & padding_mask[:, None, None, :]
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
"""


def test_a_library_that_masks_only_when_traced_runs_as_eager_does_in_the_traced_graph(monkeypatch):
    import types

    masking, tools = types.ModuleType("transformers.masking_utils"), types.ModuleType("transformers.utils.import_utils")
    exec(MASKING, masking.__dict__)
    tools.is_tracing = masking.is_tracing
    monkeypatch.setitem(sys.modules, "transformers.masking_utils", masking)
    monkeypatch.setitem(sys.modules, "transformers.utils.import_utils", tools)

    class Attention(torch.nn.Module):
        def forward(self, q, k, v, padding_mask=None):
            return masking.attend(q, k, v, padding_mask)

    q, k, v = (torch.randn(2, 2, 16, 8) for _ in range(3))
    traced = Traced(Attention())
    with torch.no_grad():
        for _ in range(2):  # the second call passes Dynamo's guards: no second trace
            assert torch.allclose(traced.using(Patch([]))(q, k, v), Attention()(q, k, v), atol=1e-6)
    assert len(traced.graphs) == 1 and masking.is_tracing is tools.is_tracing  # put back after each call
    calls = {str(n.target) for n in traced.graphs[0].graph.nodes if n.op == "call_function"}
    assert not any("tril" in c or "where" in c for c in calls), calls  # no mask built
    # Given a padding mask, the library builds its mask when traced, as it would under torch.compile.
    padded = Traced(Attention())
    keep = torch.ones(2, 16, dtype=torch.bool)
    with torch.no_grad():
        padded.using(Patch([]))(q, k, v, keep)
    assert any("tril" in str(n.target) for n in padded.graphs[0].graph.nodes)


class KeepsItsOutput(torch.nn.Module):
    """add + ReLU into a buffer it keeps, handed back as is and reused for the same inputs (a
    kernel may do this): whoever writes into its result changes its next answer."""

    def __init__(self):
        super().__init__()
        self.out, self.seen = None, None

    def forward(self, x0, x1):
        key = (x0.data_ptr(), x1.data_ptr(), x0._version, x1._version)
        if self.seen != key:
            self.out, self.seen = torch.clamp_min(x0 + x1, 0), key
        return self.out


def test_the_graph_never_writes_into_a_kernel_s_result(tmp_path):
    # AddRelu's `* 2` reads the kernel's result and nothing reads it again: reinplaced, it would
    # become a write into the buffer the kernel keeps, and the second forward would double it again.
    a, b = torch.randn(8, 16), torch.randn(8, 16)
    patch = Patch([_kernel(tmp_path, module=KeepsItsOutput())])
    run = Traced(AddRelu()).using(patch)
    with torch.no_grad():
        want = AddRelu()(a, b)
        assert torch.equal(run(a, b), want) and torch.equal(run(a, b), want)
    assert patch.hits == {"add_relu": 2}
