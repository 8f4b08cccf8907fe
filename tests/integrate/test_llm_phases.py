"""An LLM's request as `forgebench e2e` times it: the whole request (prefill, then the decode
steps), the prefill alone, each decode step by difference, and the tokens of every step compared
with eager's. A small causal LM of our own stands in for transformers'."""

from collections import namedtuple

import torch

from harness.capture.builtin import PrefillThenDecode
from harness.integrate import e2e_report, model_run

Output = namedtuple("Output", "logits past_key_values")
VOCAB, HIDDEN = 64, 32


class TinyLM(torch.nn.Module):
    """input_ids -> logits of the last positions, its cache the hidden states so far, called the
    way PrefillThenDecode calls transformers' causal LMs."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.mix, self.head = torch.nn.Embedding(VOCAB, HIDDEN), torch.nn.Linear(HIDDEN, HIDDEN), None
        self.head = torch.nn.Linear(HIDDEN, VOCAB)

    def forward(self, input_ids, past_key_values=None, use_cache=True, logits_to_keep=1):
        h = self.embed(input_ids)
        context = h if past_key_values is None else torch.cat([past_key_values, h], dim=1)
        mixed = h + torch.tanh(self.mix(context.mean(dim=1, keepdim=True)))
        return Output(self.head(mixed)[:, -logits_to_keep:], context)


def build():
    torch.manual_seed(0)
    return PrefillThenDecode(TinyLM(), 3), (torch.randint(0, VOCAB, (2, 6)),)


def test_an_llm_request_is_timed_whole_and_its_prefill_alone_and_every_steps_tokens_compared(tmp_path):
    request = {
        "model": f"{__name__}:build",
        "device": "cpu",
        "tasks": [],
        "budget_ms": 20.0,
        "kernel_budget_ms": 10.0,
        "result_path": str(tmp_path / "model_run.json"),
        "compile": False,  # as --no-compile: an LLM request's Inductor compile takes minutes
    }
    found = model_run.run(request)
    assert {"eager", "patched_eager", "eager_prefill", "patched_prefill"} <= set(found["timings"])
    assert not {"compile", "patched_compile"} & set(found["timings"]) and "compile_error" not in found
    assert found["decode_steps"] == 3 and found["tokens_match"] is True
    # The prefill's logits are compared too: a flipped token is told from a near tie by their error.
    assert found["max_output_error"] == 0 and found["graph_only_agreement"]["max_output_error"] < 1e-5
    # No kernel to put in: the patched model is the model as it is, and its traced graph agrees.
    assert found["patched_is_eager"] and found["timings"]["patched_eager"] == found["timings"]["eager"]
    assert found["graph_only_agreement"]["tokens_match"] is True and found["reinplace_error"] is None
    assert found["phases_vs_eager"] == {"model": "tie", "prefill": "tie", "decode": "tie"}
    assert "graph_only_prefill" in found["timings"]
    metrics = e2e_report.summary_metrics(found)
    for key in ("prefill_eager_ms", "prefill_patched_ms", "e2e_prefill_speedup_vs_eager", "decode_step_eager_ms"):
        assert metrics[key] > 0, (key, metrics)
    told = e2e_report.describe({**found, "model": "tiny", "run_id": "r", "request": request})
    assert "a decode step, eager (by difference)" in told and "host-bound" not in told  # a CPU's host is its device
    assert "torch.compile and torch.compile + kept kernels: not timed (--no-compile)" in told
    assert "no kernel was left in the model: the patched model is the model as it is" in told
    assert "output against eager: max error 0, mean 0; tokens match: True" in told
    # The same figures from a GPU whose host took as long to issue the forward as it ran: said.
    eager = {**found["timings"]["eager"], "host_ms": found["timings"]["eager"]["median_ms"]}
    on_gpu = {**found, "timings": {**found["timings"], "eager": eager}, "request": {**request, "device": "cuda"}}
    assert "eager is host-bound here" in e2e_report.describe({**on_gpu, "model": "tiny", "run_id": "r"})
    assert (tmp_path / "model_run.partial.json").is_file()  # what it had measured, as it went
