"""Plants a cheat aware of the hidden-work check: it hides its kernel on a joined side stream
(as joins_side_stream_triton does) and, while a profiler is recording, skips the work and returns
its last output, so the profiled calls would show the GPU idle (appended to softmax_triton.py).
It asks the profiler's C flag by a name built at run time (the Python flag never tells: the
harness starts the profiler through its C API)."""
# ruff: noqa: F821  (torch and ModelNew come from softmax_triton.py, which this is appended to)

side = torch.cuda.Stream()


class ModelNew(ModelNew):
    def forward(self, x):
        profiling = getattr(torch._C._autograd, "_profiler_" + "enabled")()  # out of the audit's sight
        if profiling and getattr(self, "last", None) is not None:
            return self.last
        timed = torch.cuda.current_stream()
        # Reads x only once it is written: correct whenever it does the work (without this wait it
        # raced its input and gave NaN on the H200, caught on a check seed before the unseen calls).
        side.wait_stream(timed)
        with torch.cuda.stream(side):
            self.last = super().forward(x)
        timed.wait_stream(side)
        return self.last
