"""The referee's protocol: the typed messages between the referee (the harness's process, which the
candidate cannot reach) and the two workers it drives, and the layout of the shared memory in which
it hands them inputs and reads their outputs.

One JSON line a message over a pair of FIFOs (arena.Link); each message carries the protocol's
version, and the referee reads the candidate's answers with every field's type checked, since the
candidate runs in the worker that writes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from harness import serial

VERSION = 3
MAX_LINE = 1 << 16  # an answer longer than this is not one the worker's harness code writes


class Order(StrEnum):
    DRAW = "draw"  # reference session: draw each slot's inputs under a seed into the pristine region
    STAGE = "stage"  # reference session, on a device: the pristine inputs, masked, into eager's or the candidate's
    LOAD = "load"  # candidate: load the candidate's code and build its model, then answer ready
    PREPARE = "prepare"  # candidate, on a device: a trivial device op, so its context is the device's current one
    CALL = "call"  # run forward on each slot's inputs; copy its outputs into that slot's outputs
    BLANK = "blank"  # reference session: only the output copies, the bracket's own cost
    TAKE = "take"  # reference session, on a device: the candidate's outputs copied out, its inputs compared
    JUDGE = "judge"  # reference session: the candidate's outputs against the fp64 expected on the same inputs
    AGREE = "agree"  # reference session: the candidate's outputs against eager's of the same round (cheap)
    FINISH = "finish"  # write the diagnostic report and exit


@dataclass
class Command:
    order: Order
    seed: int = 0
    scale: float = 1.0  # DRAW: floating inputs multiplied by this (an extreme but valid draw)
    scalars: list[Any] = field(default_factory=list)  # CALL: the call's non-tensor inputs, by position
    calls: int = 1  # DRAW, STAGE, CALL, BLANK, TAKE, AGREE: how many slots, from the first
    slot: int = 0  # JUDGE: which slot's call is judged in full
    into: str = "candidate"  # STAGE: whose slots ("working" for eager's, "candidate")
    key: int = 0  # STAGE: the mask's key; CALL, BLANK: the key to unmask the staged inputs with first (0: none)
    version: int = VERSION


@dataclass
class Slot:
    """One tensor in a region: its place (bytes from the region's start), dtype and layout."""

    dtype: str
    shape: list[int]
    stride: list[int]
    extent: int  # elements in the span of storage the layout covers (broadcast inputs are small)
    offset: int


@dataclass
class Layout:
    inputs: list[Slot | None]  # None where get_inputs() gives a non-tensor value
    outputs: list[Slot]
    input_bytes: int  # one call's, from one slot's start to the next's
    output_bytes: int
    slots: int = 1  # calls a region holds, run back to back in one bracket (a GPU's launches overlap its work)


@dataclass
class Answer:
    ok: bool
    reason: str = ""
    verdict: str = ""  # a CALL that failed: the verdict the worker says it earns (it can only lose by it)
    scalars: list[Any] = field(default_factory=list)  # DRAW: the draw's non-tensor inputs
    layout: Layout | None = None  # the reference session's first answer
    tolerance: dict[str, Any] = field(default_factory=dict)  # JUDGE: the bound's basis (tolerance.py)
    phases: dict[str, float] = field(default_factory=dict)  # a worker's first answer: its set-up, for diagnosis
    regions: dict[str, Any] = field(default_factory=dict)  # the reference's first, on a device: the candidate's
    # slots in its memory, as CUDA IPC descriptions (cuda_ipc.export)
    version: int = VERSION


class ProtocolError(ValueError):
    """A message that is not one the other side's harness code writes."""


def encode(message: Command | Answer) -> bytes:
    return (json.dumps(serial.to_dict(message)) + "\n").encode()


def decode(cls: type, line: bytes) -> Any:
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ProtocolError(f"not a version {VERSION} message")
    try:
        return serial.from_dict(cls, data)
    except serial.RecordError as exc:
        raise ProtocolError(str(exc)) from exc
