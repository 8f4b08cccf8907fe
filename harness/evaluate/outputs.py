"""Forward outputs on disk as raw bytes behind a JSON header: written by a worker, read by the judge.

torch.save pickles and checksums every byte; a GPU task's outputs are a gigabyte per candidate, so
they travel as plain bytes. The reader trusts nothing in the file: a candidate can overwrite it.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float64,
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int64,
        torch.int32,
        torch.int16,
        torch.int8,
        torch.uint8,
        torch.bool,
    )
}
_HEADER = struct.Struct("<Q")  # the header's length in bytes
_MAX_HEADER = 1 << 20
_ALIGN = 64


def _padding(nbytes: int) -> int:
    """Zero bytes after a tensor, so the next starts aligned and is viewed in place as its dtype."""
    return -nbytes % _ALIGN


class UnreadableOutputs(ValueError):
    """The outputs file is not what a worker writes (torn, forged or truncated)."""


def not_plain(t: torch.Tensor) -> str | None:
    """Why a returned tensor is not a plain one whose values are in its storage, or None.

    A subclass (with __torch_function__ or __torch_dispatch__), a wrapper or a lazily negated or
    conjugated view can produce its values only when read, so the timed calls would skip work the
    harness then does when it reads the result."""
    if type(t) is not torch.Tensor:
        return f"forward returned a {type(t).__module__}.{type(t).__qualname__}; outputs must be plain torch.Tensor"
    if t.layout != torch.strided or t.is_nested:
        return f"forward returned a tensor of layout {t.layout}; outputs must be plain strided tensors"
    if t.is_neg() or t.is_conj() or torch._C._functorch.is_functorch_wrapped_tensor(t):
        return "forward returned a lazily evaluated view; outputs must hold their values"
    return None


def leaves(output: Any) -> list[torch.Tensor] | str:
    """A call's output as its tensors, or a sentence saying why it is not plain tensors."""
    if isinstance(output, torch.Tensor):
        reason = not_plain(output)
        return reason if reason else [output]
    if isinstance(output, (list, tuple)):
        found: list[torch.Tensor] = []
        for item in output:
            inner = leaves(item)
            if isinstance(inner, str):
                return inner
            found += inner
        return found
    return f"forward returned {type(output).__name__}; expected a tensor or a tuple of tensors"


def keep(output: Any) -> list[torch.Tensor] | str:
    """A private copy of a call's output tensors, on their device (the caller may reuse its buffers)."""
    found = leaves(output)
    return found if isinstance(found, str) else [t.detach().clone() for t in found]


def describe(calls: list[list[torch.Tensor] | str], entry: Callable[[torch.Tensor], dict]) -> list[dict]:
    """Each call as {"tensors": [entry(t) for its contiguous tensors]}, or {"error": why} where it
    has none or holds a dtype the reader does not know: the header of a file, or of a handover."""
    described: list[dict] = []
    for call in calls:
        if isinstance(call, str):
            described.append({"error": call})
            continue
        unknown = [t.dtype for t in call if str(t.dtype).removeprefix("torch.") not in DTYPES]
        if unknown:
            described.append({"error": f"forward returned a tensor of dtype {unknown[0]}"})
            continue
        described.append({"tensors": [entry(t.contiguous()) for t in call]})
    return described


def write(path: Path, calls: list[list[torch.Tensor] | str]) -> None:
    """Each call's tensors (or why it has none), as one header and the tensors' bytes in order."""
    tensors: list[torch.Tensor] = []
    offset = 0

    def entry(t: torch.Tensor) -> dict:
        nonlocal offset
        flat = t.reshape(-1)
        nbytes = flat.numel() * flat.element_size()
        described = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "offset": offset}
        tensors.append(flat)
        offset += nbytes + _padding(nbytes)
        return described

    entries = describe(calls, entry)
    header = json.dumps({"calls": entries, "bytes": offset}).encode()
    with open(path, "wb") as f:
        f.write(_HEADER.pack(len(header)))
        f.write(header)
        for flat in tensors:
            nbytes = flat.numel() * flat.element_size()
            if nbytes:
                f.write(memoryview(flat.view(torch.uint8).cpu().numpy()))
            f.write(bytes(_padding(nbytes)))


def read(path: Path, device: torch.device) -> list[list[torch.Tensor] | str]:
    """What write() wrote, each tensor on `device`; UnreadableOutputs when the file is not that."""
    import numpy as np

    try:
        with open(path, "rb") as f:
            (length,) = _HEADER.unpack(f.read(_HEADER.size))
            if length > _MAX_HEADER:
                raise UnreadableOutputs(f"its header claims {length} bytes")
            header = json.loads(f.read(length))
            data = np.fromfile(f, dtype=np.uint8)
    except (OSError, struct.error, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UnreadableOutputs(f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(header, dict) or header.get("bytes") != data.size:
        raise UnreadableOutputs(f"it holds {data.size} bytes of tensors; its header says otherwise")
    raw = torch.from_numpy(data)
    calls: list[list[torch.Tensor] | str] = []
    try:
        for entry in header["calls"]:
            if "error" in entry:
                calls.append(str(entry["error"]))
                continue
            call = []
            for t in entry["tensors"]:
                dtype, shape, offset = DTYPES[t["dtype"]], [int(n) for n in t["shape"]], int(t["offset"])
                numel = 1
                for n in shape:
                    if n < 0:
                        raise ValueError(f"negative size {n}")
                    numel *= n
                nbytes = numel * torch.empty((), dtype=dtype).element_size()
                if offset < 0 or offset % _ALIGN or offset + nbytes > raw.numel():
                    raise ValueError(f"a tensor at byte {offset} runs past the file's end")
                if not nbytes:
                    call.append(torch.empty(shape, dtype=dtype, device=device))
                    continue
                call.append(raw[offset : offset + nbytes].view(dtype).reshape(shape).to(device))
            calls.append(call)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise UnreadableOutputs(f"{type(exc).__name__}: {exc}") from exc
    return calls
