"""Plants PyTorch doing the work on another thread, out of sight of a dispatch mode (they are
thread-local): forward hands the computation to a thread and waits for it (appended to
rmsnorm_cpp.py). The profiler, on every thread, sees the ATen ops of the unseen calls."""
# ruff: noqa: F821  (torch and ModelNew come from rmsnorm_cpp.py, which this is appended to)

import threading


class ModelNew(ModelNew):
    def forward(self, x):
        box = []
        worker = threading.Thread(
            target=lambda: box.append(self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)))
        )
        worker.start()
        worker.join()
        return box[0]
