"""Plants a C++ syntax error (a missing semicolon) that g++ must report."""

from torch import nn

from harness.platforms.cpu import compile_cpp

lib = compile_cpp('extern "C" void scale(float* y, long n) { for (long i = 0; i < n; ++i) y[i] *= 2.0f }')


class ModelNew(nn.Module):
    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
