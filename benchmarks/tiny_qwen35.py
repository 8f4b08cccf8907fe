"""A Qwen3.5 text model small enough for the CPU (4 layers, hidden size 64, vocabulary 512), prefill
then two greedy decode steps as conf/capture/qwen35.yaml serves the real one: for trying
`forgebench capture` and `forgebench e2e` on an LLM without a GPU (needs transformers).

    forgebench capture --model benchmarks.tiny_qwen35:build --device cpu --out /tmp/tasks
"""

import torch

from harness.capture.builtin import PrefillThenDecode


def build():
    import transformers

    from benchmarks.integrate_depth import qwen35

    torch.manual_seed(0)
    lm = transformers.AutoModelForCausalLM.from_config(qwen35(4, full_attention_interval=4), attn_implementation="sdpa")
    return PrefillThenDecode(lm, 2), (torch.randint(0, 512, (2, 16)),)
