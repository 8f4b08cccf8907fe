"""Whether a task fits this machine's memory at its shapes, found on the meta device (nothing is
allocated), so a task too large is skipped up front with a sentence instead of killing a worker.

KernelBench level 1 publishes shapes for a GPU (23_Softmax: two 4096 x 393216 fp32 tensors,
6.4 GB); the reference's worker holds the inputs of every check and timing seed and a working
copy, and the bound of each output in fp64 (tolerance.py), all at once.
"""

from __future__ import annotations

from harness.errors import ForgeBenchError
from harness.tasks import Task

# Input sets the reference's worker holds at once: 3 check seeds, 3 timing seeds and the working
# copy, the outputs and their fp64 reference beside them; a little more than that for slack.
_COPIES_HELD = 10


class TaskTooLarge(ForgeBenchError):
    """The task's inputs at its shapes do not fit the memory this machine has free."""


def _nbytes(value) -> int:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(_nbytes(v) for v in value)
    return 0


def call_bytes(task: Task) -> int | None:
    """Bytes of one call's inputs and outputs, from the reference built and run on the meta device
    (None when it does not run there)."""
    import torch

    from harness.reference import load_reference_module

    try:
        module = load_reference_module(task.reference_path, f"forgebench_footprint_{task.id}")
        with torch.device("meta"), torch.no_grad():
            inputs = module.get_inputs()
            outputs = module.Model(*module.get_init_inputs())(*inputs)
    except Exception:  # a reference that does not run on meta: no estimate, no skip
        return None
    return _nbytes(inputs) + _nbytes(outputs)


def _free_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as meminfo:
            fields = dict(line.split(":", 1) for line in meminfo)
        return int(fields["MemAvailable"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None


def check_fits(task: Task, asynchronous_device: bool) -> None:
    """Raise TaskTooLarge, with the sizes, when a CPU task cannot fit the memory free now. (A GPU
    task's tensors live in device memory, which the parent does not open a context to measure.)"""
    if asynchronous_device:
        return
    if "gpu-sized" in task.tags:  # its dtypes and shapes are a GPU's (bf16 on a CPU: minutes a call)
        raise TaskTooLarge(
            f"task '{task.id}' is sized for a GPU (tag gpu-sized): skipped on this CPU platform; run it with "
            "--platform=triton or cuda on a GPU machine"
        )
    need, free = call_bytes(task), _free_bytes()
    if need is None or free is None or need * _COPIES_HELD <= free:
        return
    raise TaskTooLarge(
        f"task '{task.id}' needs about {need * _COPIES_HELD / 1e9:.1f} GB at its shapes (a call's inputs and "
        f"outputs are {need / 1e9:.2f} GB, held for every check and timing seed), and this machine has "
        f"{free / 1e9:.1f} GB free: run it on a larger machine or a GPU platform, or pick smaller tasks"
    )
