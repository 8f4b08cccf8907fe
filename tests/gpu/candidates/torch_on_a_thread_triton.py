"""Plants PyTorch's softmax on another thread, out of sight of the dispatch mode (thread-local):
forward launches its Triton kernel, then has a thread compute torch.softmax and returns that
(appended to softmax_triton.py). The profiled unseen calls show ATen's softmax kernel by name."""
# ruff: noqa: F821  (torch and ModelNew come from softmax_triton.py, which this is appended to)

import threading


class ModelNew(ModelNew):
    def forward(self, x):
        super().forward(x)
        box = []
        worker = threading.Thread(target=lambda: box.append(torch.softmax(x, dim=-1)))
        worker.start()
        worker.join()
        return box[0]
