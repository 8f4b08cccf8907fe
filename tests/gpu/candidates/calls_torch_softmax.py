"""Plants PyTorch doing the work on a GPU: launches its Triton kernel, then returns torch.softmax
(appended to softmax_triton.py)."""
# ruff: noqa: F821  (torch and ModelNew come from softmax_triton.py, which this is appended to)


class ModelNew(ModelNew):
    def forward(self, x):
        super().forward(x)
        return torch.softmax(x, dim=-1)
