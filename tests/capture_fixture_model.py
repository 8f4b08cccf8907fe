"""A small model the project has never seen, for `forgebench capture --model tests.capture_fixture_model:build`:
an embedding, two identical pre-norm MLP blocks (so their calls group), an RMSNorm written as torch
ops in bf16 as LLMs write it (a chain of calls that fuses) and a softmax head."""

import torch
import torch.nn as nn

VOCAB, HIDDEN, TOKENS, BATCH = 512, 64, 32, 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(HIDDEN)
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class RMSNorm(nn.Module):
    def __init__(self, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(HIDDEN))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, HIDDEN)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = RMSNorm()
        self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, tokens: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        x = self.norm(x.to(torch.bfloat16)).float()
        return torch.softmax(self.head(x) * scale, dim=-1)


def build():
    torch.manual_seed(0)
    return TinyLM(), {"tokens": torch.randint(0, VOCAB, (BATCH, TOKENS)), "scale": 0.5}
