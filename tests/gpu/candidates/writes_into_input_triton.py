"""Plants input mutation: the Triton kernel writes the softmax over x itself and returns x
(appended to softmax_triton.py)."""
# ruff: noqa: F821  (torch, triton, softmax_kernel and ModelNew come from softmax_triton.py)


class ModelNew(ModelNew):
    def forward(self, x):
        rows, cols = x.shape
        softmax_kernel[(rows,)](x, x, cols, BLOCK=triton.next_power_of_2(cols), num_warps=8)
        return x
