"""Plants a fallback: an NVRTC kernel for most calls, torch.softmax when the input "looks unusual"
(always, here), as a try/except fallback would (appended to softmax_cuda.py)."""
# ruff: noqa: F821  (torch and ModelNew come from softmax_cuda.py, which this is appended to)


class ModelNew(ModelNew):
    def forward(self, x):
        try:
            raise RuntimeError("pretend the kernel cannot handle this shape")
        except RuntimeError:
            return torch.softmax(x, dim=-1)
