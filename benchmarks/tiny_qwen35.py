"""A Qwen3.5 text model small enough for the CPU (4 layers, hidden size 64, vocabulary 512), prefill
then two greedy decode steps as conf/capture/qwen35.yaml serves the real one: for trying
`forgebench capture` and `forgebench e2e` on an LLM without a GPU (needs transformers).

    forgebench capture --model benchmarks.tiny_qwen35:build --device cpu --out /tmp/tasks
"""

import torch

from harness.capture.builtin import PrefillThenDecode


def build():
    import transformers

    torch.manual_seed(0)
    config = transformers.Qwen3_5TextConfig(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_num_key_heads=4,
        linear_num_value_heads=4,
        full_attention_interval=4,
    )
    lm = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return PrefillThenDecode(lm, 2), (torch.randint(0, 512, (2, 16)),)
