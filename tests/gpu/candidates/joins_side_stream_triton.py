"""Plants work that hides from the timer: the Triton kernel runs on a side stream that forward
joins back before returning, so nothing is left running, but the side stream never waits for the
timed stream and starts during the L2 flush queued ahead of the start event (appended to
softmax_triton.py; benchmarks/side_stream_probe.py measured such a side stream hiding 90% of a
copy and 99% of a matmul on the H200)."""
# ruff: noqa: F821  (torch and ModelNew come from softmax_triton.py, which this is appended to)

side = torch.cuda.Stream()


class ModelNew(ModelNew):
    def forward(self, x):
        timed = torch.cuda.current_stream()
        with torch.cuda.stream(side):
            out = super().forward(x)
        timed.wait_stream(side)
        return out
