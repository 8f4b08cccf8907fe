"""Plants an early exit on a GPU: forward launches its kernel, then calls os._exit(0)
(appended to softmax_triton.py)."""
# ruff: noqa: F821  (ModelNew comes from softmax_triton.py, which this is appended to)

import os


class ModelNew(ModelNew):
    def forward(self, x):
        super().forward(x)
        os._exit(0)
