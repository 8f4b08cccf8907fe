"""What the guard's in-place timing of a task's own calls costs on the host: the calls replayed
through TaskCall.replay (which rebuilds each step's arguments in Python), as FX code
(TaskCall.module, what the guard now times), and as the task's reference forward.

    python benchmarks/replay_overhead.py   # a batch norm + ReLU chain on small CPU tensors
"""

import importlib.util
import sys
import tempfile
import timeit
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.integrate.signature import task_call
from tests.integrate.test_graph_patch import BN_RELU as REFERENCE  # the chain the graph-pass tests use


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reference.py"
        path.write_text(REFERENCE)
        spec = importlib.util.spec_from_file_location("bn_relu_reference", path)
        reference = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(reference)
    inputs = reference.get_inputs()
    call, model = task_call(reference, inputs), reference.Model()
    direct = call.module()
    with torch.no_grad():
        for name, fn in [
            ("TaskCall.replay", lambda: call.replay(inputs)),
            ("TaskCall.module (FX)", lambda: direct(*inputs)),
            ("the reference's forward", lambda: model(*inputs)),
        ]:
            fn()
            best = min(timeit.repeat(fn, number=2000, repeat=5)) / 2000 * 1e6
            print(f"{name}: {best:.1f} us a call")
    print(f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
