"""CUDA IPC through the driver API (libcuda, by ctypes): a worker hands the judge its output tensors
as device memory handles, so gigabytes of GPU outputs are compared where they lie instead of
travelling through a file twice (on the H200: 47 of 54 s of a 6 GB task's
candidate went to writing and reading its outputs).

torch's own CUDA IPC (torch.multiprocessing) keeps a reference count in a /dev/shm file, which a
confined worker may not create; the driver's handles need no file. The importer trusts nothing it
is sent: each tensor must lie inside the allocation its handle opens.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from contextlib import contextmanager

import torch

_HANDLE_BYTES = 64
_LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_byte * _HANDLE_BYTES)]


class IpcFailure(RuntimeError):
    """The driver refused to export or open a handle (say, across users where it does not allow it)."""


_driver: ctypes.CDLL | None = None


def _cu() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuMemGetAddressRange_v2.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_size_t),
            ctypes.c_uint64,
        ]
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        _driver = lib
    return _driver


def _call(rc: int, what: str) -> None:
    if rc != 0:
        raise IpcFailure(f"{what} failed with CUDA driver error {rc}")


def _range(ptr: int) -> tuple[int, int]:
    """The base and size of the allocation holding `ptr` (torch's allocator carves tensors out of
    larger blocks, and a handle names the whole block)."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _call(_cu().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr), "cuMemGetAddressRange")
    return base.value, size.value


def export(t: torch.Tensor) -> dict:
    """A contiguous CUDA tensor as a description another process can open (opened() below). The
    caller keeps the tensor alive, and synchronised, until the importer is done with it."""
    ptr = t.data_ptr()
    base, _ = _range(ptr)
    handle = _Handle()
    _call(_cu().cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    raw = ctypes.string_at(ctypes.addressof(handle), _HANDLE_BYTES)
    return {
        "handle": raw.hex(),
        "offset": ptr - base,
        "dtype": str(t.dtype).removeprefix("torch."),
        "shape": list(t.shape),
    }


class _DeviceBytes:
    """Raw device bytes, as torch.as_tensor reads them (__cuda_array_interface__)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3}


class Allocation:
    """Device memory of its own, from the driver rather than torch's caching allocator: a handle to it
    opens this allocation alone, where one to a tensor of torch's would open the whole block the
    tensor was carved from, and whatever else lies there (the referee hands a candidate its slots
    this way, and nothing of the reference session's beside them)."""

    def __init__(self, nbytes: int):
        torch.cuda.init()
        torch.empty(0, device="cuda")  # the primary context current on this thread, for the driver calls
        ptr = ctypes.c_uint64()
        _call(_cu().cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, 1)), "cuMemAlloc")
        self.ptr, self.nbytes = ptr.value, max(nbytes, 1)
        self.bytes = torch.as_tensor(_DeviceBytes(self.ptr, self.nbytes), device="cuda")

    def free(self) -> None:
        if self.ptr:
            torch.cuda.synchronize()
            self.bytes = None
            _cu().cuMemFree_v2(self.ptr)
            self.ptr = 0


@contextmanager
def opened(entries: list[dict], dtypes: dict[str, torch.dtype]) -> Iterator[list[torch.Tensor]]:
    """The tensors `entries` describe, viewed in place in the exporter's memory while the block
    runs; closed after. ValueError when an entry is malformed or reaches outside its allocation,
    IpcFailure when the driver will not open a handle."""
    torch.cuda.init()
    torch.empty(0, device="cuda")  # the primary context current on this thread, for the driver calls
    mapped: dict[str, tuple[int, int]] = {}
    tensors: list[torch.Tensor] = []
    try:
        for entry in entries:
            key = str(entry["handle"])
            raw = bytes.fromhex(key)
            if len(raw) != _HANDLE_BYTES:
                raise ValueError(f"a handle of {len(raw)} bytes, not {_HANDLE_BYTES}")
            if key not in mapped:  # one open per allocation: several outputs may share a block
                ptr = ctypes.c_uint64()
                handle = _Handle.from_buffer_copy(raw)
                rc = _cu().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, _LAZY_ENABLE_PEER_ACCESS)
                _call(rc, "cuIpcOpenMemHandle")
                mapped[key] = (ptr.value, _range(ptr.value)[1])
            base, size = mapped[key]
            dtype, shape, offset = dtypes[str(entry["dtype"])], [int(n) for n in entry["shape"]], int(entry["offset"])
            if any(n < 0 for n in shape):
                raise ValueError(f"a negative size in {shape}")
            itemsize = torch.empty((), dtype=dtype).element_size()
            nbytes = itemsize * torch.Size(shape).numel()
            if offset < 0 or offset % itemsize or offset + nbytes > size:
                raise ValueError(f"{nbytes} bytes at offset {offset} of an allocation of {size}")
            if not nbytes:
                tensors.append(torch.empty(shape, dtype=dtype, device="cuda"))
                continue
            view = torch.as_tensor(_DeviceBytes(base + offset, nbytes), device="cuda")
            tensors.append(view.view(dtype).reshape(shape))
        yield tensors
    finally:
        tensors.clear()
        torch.cuda.synchronize()  # no kernel of ours still reads the memory we close
        for base, _ in mapped.values():
            _cu().cuIpcCloseMemHandle(base)
