"""Integration cost against depth on the CPU: a Qwen3.5-like and a Gemma-4-like transformers LM of
random weights (hidden size 64), each at 2 and 8 decoder layers, prefill then two decode steps, put
through what `forgebench e2e` does before it times anything: trace, record the activations at the
MLP activation's task, check the kernel on them, confirm it, one patched pass. Prints the CPU
seconds of the calling thread (torch on one thread, which does the work; the process's would count
its other threads too, as a test worker's; least of `--repeats`: a host shared with other work
stretches wall time, not CPU time), the graphs traced, the kernel's hits, and whether the tokens and logits
match eager's (needs transformers):

    python -m benchmarks.integrate_depth [--layers 2 8] [--repeats 3] [--whole-graph]

With `--builtin`, conf/capture/<model>.yaml's model and workload instead (the real hyperparameters:
a batch of 8 prompts of 2048 tokens, 8 decode steps, bf16 on a GPU), kept to its first N layers
(capture.workload.layers), e.g. on the H200:

    python3 -m benchmarks.integrate_depth --builtin --device cuda --models gemma4 --layers 12 60 --repeats 1
"""

from __future__ import annotations

import argparse
import time
import types

import torch

from harness.capture.builtin import PrefillThenDecode
from harness.integrate import guard
from harness.integrate.agreement import agreement
from harness.integrate.graph_patch import Kernel, Patch
from harness.integrate.signature import task_call
from harness.integrate.traced import Traced

BATCH, PROMPT, DECODE_STEPS, INTERMEDIATE = 2, 16, 2, 128


def qwen35(layers: int, full_attention_interval: int = 2):
    """Linear-attention and full-attention layers alternating (the real one: three to one)."""
    import transformers

    return transformers.Qwen3_5TextConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=4,
        linear_num_value_heads=4,
        full_attention_interval=full_attention_interval,
    )


def gemma4(layers: int):
    """Sliding-window and global layers alternating (the real one: five to one), the global ones
    with their own head size and key-value heads, as tasks/gemma4/model.yaml."""
    import transformers

    return transformers.Gemma4TextConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=INTERMEDIATE,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_global_key_value_heads=1,
        head_dim=16,
        global_head_dim=32,
        attention_k_eq_v=True,
        hidden_size_per_layer_input=0,
        num_kv_shared_layers=0,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"] * (layers // 2),
        final_logit_softcapping=30.0,
        hidden_activation="gelu_pytorch_tanh",
    )


CONFIGS = {"qwen35": qwen35, "gemma4": gemma4}
# The task: the MLP's activation at the prefill's shape, one call a layer; its kernel is the op itself
# (what is measured is the integration, not the kernel).
ACTIVATION = {
    "qwen35": (torch.ops.aten.silu.default, {}),
    "gemma4": (torch.ops.aten.gelu.default, {"approximate": "tanh"}),
}


class Activation(torch.nn.Module):
    def __init__(self, op, kwargs: dict):
        super().__init__()
        self.op, self.kwargs = op, kwargs

    def forward(self, x0):
        return self.op(x0, **self.kwargs)


def build(name: str, layers: int, builtin: bool = False, device: str = "cpu"):
    """The model and its prompts: the small config here, or with `builtin` conf/capture/<name>.yaml's
    (the real hyperparameters, batch and prompt length, bf16 on a GPU) kept to its first `layers`."""
    torch.manual_seed(0)
    if builtin:
        from harness.capture.sources import from_builtin

        work = from_builtin(name, torch.device(device), None, [f"capture.workload.layers={layers}"])
        return work.model, work.inputs[0]
    import transformers

    lm = transformers.AutoModelForCausalLM.from_config(CONFIGS[name](layers), attn_implementation="sdpa")
    return PrefillThenDecode(lm.eval(), DECODE_STEPS), torch.randint(0, 512, (BATCH, PROMPT))


def kernel(name: str, model: PrefillThenDecode, prompts: torch.Tensor) -> Kernel:
    """The MLP activation's task at the prefill's shape, and the op itself as its kernel."""
    shape = (*prompts.shape, model.lm.config.intermediate_size)
    reference = types.SimpleNamespace(Model=lambda: Activation(*ACTIVATION[name]), get_init_inputs=list)
    call = task_call(reference, [torch.randn(shape, dtype=model.lm.dtype, device=prompts.device)])
    return Kernel(f"{name}_activation", call, Activation(*ACTIVATION[name]))


def integrate(model: PrefillThenDecode, prompts: torch.Tensor, task: Kernel, reuse_blocks: bool = True) -> dict:
    """Trace, record, check, confirm and one patched pass, as an e2e run's integration phase."""
    torch._dynamo.reset()
    started, wall = time.thread_time(), time.perf_counter()
    traced = Traced(model, reuse_blocks=reuse_blocks)
    forward = lambda compiled: compiled(prompts)
    recorded, _, sites = guard.record(traced, forward, [task])
    wrong = guard.check(task, recorded[task.task_id], {})
    kept = guard.confirm(traced, forward, [task], [guard.Decision(task.task_id, "kept")], {})
    patch = Patch(kept)
    out = traced.using(patch)(prompts)
    if prompts.is_cuda:
        torch.cuda.synchronize()
    seconds, wall = time.thread_time() - started, time.perf_counter() - wall
    return {
        "seconds": seconds,
        "wall_s": wall,
        "graphs": len(traced.graphs),
        "hits": patch.hits.get(task.task_id, 0),
        "sites": sites[task.task_id],
        "kept": not wrong and bool(kept),
        "agreement": agreement(model(prompts), out),
        "traced_as": traced.traced_as,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--whole-graph", action="store_true", help="trace each model whole, not block by block")
    parser.add_argument("--models", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--layers", nargs=2, type=int, default=[2, 8], help="the two depths compared")
    parser.add_argument("--builtin", action="store_true", help="conf/capture/<model>.yaml's model and workload")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    torch.set_num_threads(1)
    first = build("qwen35", 2)
    integrate(*first, kernel("qwen35", *first))  # imports and Dynamo's first use, paid by none
    for name in args.models:
        found = {}
        for layers in args.layers:
            model, prompts = build(name, layers, args.builtin, args.device)
            task = kernel(name, model, prompts)
            runs = [integrate(model, prompts, task, not args.whole_graph) for _ in range(args.repeats)]
            found[layers] = r = min(runs, key=lambda r: r["seconds"])
            print(
                f"{name} {layers} layers: {r['seconds']:.2f} s CPU ({r['wall_s']:.2f} s wall), {r['graphs']} graphs, "
                f"{r['hits']}/{r['sites']} hits, kept {r['kept']}, {r['agreement']}; {r['traced_as']}",
                flush=True,
            )
            del model, prompts, task, runs
        shallow, deep = args.layers
        print(f"{name}: {deep} layers / {shallow} layers = {found[deep]['seconds'] / found[shallow]['seconds']:.2f}")


if __name__ == "__main__":
    main()
