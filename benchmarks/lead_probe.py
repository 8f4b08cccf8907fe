"""Why tests/gpu's lead test failed once (on the H200: without the GPU lead, 256 small launches
timed at 0.72 of their host time, where the test asks 0.8): each timed call's event time beside its
own host time, then the host times `measure` reports (a few calls issued to an idle queue after the
timed ones), with and without the lead, side by side in one process.

    python benchmarks/lead_probe.py [ROUNDS]
"""

import statistics
import sys

import torch

from harness import devices
from harness.evaluate import timing


def many_launches(x):
    for _ in range(256):
        x = x * 1.0001
    return x


def main(rounds: int) -> None:
    device = devices.of(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    timing.bind_clocks(device)
    inputs = [[torch.randn(4096, device=device.torch_device())]]
    print("lead  median_ms  host_ms(measure)  ratio  | no lead, each call's event/host: median, min, max")
    for _ in range(rounds):
        for lead in (False, True):
            t = timing.measure(many_launches, inputs, device, budget_ms=100, warmup_ms=20, gpu_lead=lead)
            # The same protocol's timed calls, each with its own host time.
            runner = timing._Runner(many_launches, inputs, timing.clone_inputs(inputs[0]), device, timing.L2_FLUSH)
            runner.run(20)
            events = runner.run(50)
            ratios = [e / h for e, h in zip(events, runner.host_ms) if h > 0]
            print(
                f"{lead!s:5} {t.median_ms:9.3f}  {t.host_ms:16.3f}  {t.median_ms / t.host_ms:5.2f}  | "
                f"{statistics.median(ratios):.2f} {min(ratios):.2f} {max(ratios):.2f}"
            )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
