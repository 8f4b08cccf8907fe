"""Plants work that escapes the timer: the Triton kernel is launched on a side stream and forward
returns without waiting for it (appended to softmax_triton.py)."""
# ruff: noqa: F821  (torch and ModelNew come from softmax_triton.py, which this is appended to)

side = torch.cuda.Stream()


class ModelNew(ModelNew):
    def forward(self, x):
        with torch.cuda.stream(side):
            return super().forward(x)
