"""Fusable neighbours: chains of calls where each consumes what an earlier one produced, recorded
while the model runs, so a norm written as eight ATen calls (cast, pow, mean, add, rsqrt, mul,
cast, mul) or a matmul followed by its bias and activation becomes one fused task beside the
single calls.

Two trackers watch the same calls. NORM_CHAINS grows regions of elementwise, reduction, norm,
softmax and copy calls (a residual add with the norm after it, as fused_add_rms_norm does);
EPILOGUES opens a region at each matmul or convolution and lets only elementwise calls and casts
join it. A call that may not join and reads a region's tensor ends that region: the value escapes
to work the fused kernel would not do. Identical regions group like identical calls do. A fused
task returns the region's last result; intermediates the model also keeps elsewhere (the residual
sum) are not among its outputs, which the task says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import torch

from harness.capture.record import CallGroup, TensorSpec, ValueRange

# Longer chains (a recurrent scan written in torch ops) split: a task should read as one kernel.
MAX_MEMBERS = 16
_MATMULS = frozenset(["matmul", "convolution"])


@dataclass(frozen=True)
class Rule:
    """Which kinds of call (costs.category) may open a region, and which may join an open one
    (only the ops named in `join_ops`, when it is given)."""

    opens: frozenset[str]
    joins: frozenset[str]
    join_ops: frozenset[str] | None = None

    def may_join(self, kind: str, op: str) -> bool:
        return kind in self.joins and (self.join_ops is None or op in self.join_ops)


_POINTWISE_AND_ROWS = frozenset(["elementwise", "reduction", "norm", "copy", "softmax"])
NORM_CHAINS = Rule(opens=_POINTWISE_AND_ROWS, joins=_POINTWISE_AND_ROWS)
# What a GEMM epilogue does: bias, scale, gate, residual and activation. A cast or a pow after a
# matmul starts a norm, which NORM_CHAINS records, so it ends the epilogue.
_EPILOGUE_OPS = ["add", "sub", "mul", "div", "relu", "gelu", "silu", "sigmoid", "tanh", "clamp", "hardswish"]
EPILOGUES = Rule(opens=_MATMULS, joins=frozenset(["elementwise"]), join_ops=frozenset(_EPILOGUE_OPS))


@dataclass(frozen=True)
class Internal:
    """An argument that is an earlier member's output (viewed again when `view` is set)."""

    member: int
    slot: int  # index into that member's returned tensors
    view: tuple | None = None  # (shape, stride, storage_offset) when read through a view


@dataclass
class FusedGroup:
    """Identical regions: their member call groups, how arguments wire up, how many there were."""

    members: list[CallGroup]
    wiring: list[tuple]  # per member, per tensor input: ("x", external index) or Internal
    externals: list[TensorSpec]
    values: list[ValueRange]
    count: int = 1

    @property
    def time_ms(self) -> float | None:
        """The members' eager time per region: what a fused kernel competes with."""
        times = [m.time_ms for m in self.members]
        return None if any(t is None for t in times) else sum(times)

    @property
    def total_ms(self) -> float:
        return self.count * (self.time_ms or 0.0)

    @property
    def ops(self) -> list[str]:
        return [m.op.overloadpacket.__name__ for m in self.members]

    @property
    def digest(self) -> str:
        signature = [(str(m.op), m.args, m.kwargs) for m in self.members]
        return hashlib.sha1(repr((signature, self.wiring)).encode()).hexdigest()[:6]

    @property
    def last(self) -> CallGroup:
        return self.members[-1]


@dataclass
class _Region:
    members: list[tuple[tuple, CallGroup]] = field(default_factory=list)  # (group key, group)
    wiring: list[tuple] = field(default_factory=list)
    externals: dict[tuple, int] = field(default_factory=dict)  # tensor identity -> external index
    external_specs: list[TensorSpec] = field(default_factory=list)
    external_values: list[ValueRange] = field(default_factory=list)


def _identity(t: torch.Tensor) -> tuple:
    return (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


class FusionTracker:
    """Follows dataflow between recorded calls by storage and collects fused regions."""

    def __init__(self, kind_of, rule: Rule) -> None:
        self._kind_of = kind_of  # CallGroup -> category (costs.category, passed in to avoid a cycle)
        self._rule = rule
        self._open: dict[int, _Region] = {}
        # storage address -> region, member, slot and the identity of the tensor produced there. Not
        # the tensor itself: holding every intermediate of an open region would pin gigabytes.
        self._owner: dict[int, tuple[int, int, int, tuple]] = {}
        self._next_id = 0
        self.groups: dict[tuple, FusedGroup] = {}

    def observe(self, key: tuple, group: CallGroup, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        """One recorded call: join, open or close regions, then note who produced its outputs."""
        refs = [self._owner.get(t.untyped_storage().data_ptr()) for t in inputs]
        touched = sorted({ref[0] for ref in refs if ref is not None})
        kind = self._kind_of(group)
        opens = kind in self._rule.opens and not group.mutates
        if not self._rule.may_join(kind, group.op.overloadpacket.__name__) or group.mutates:
            for region_id in touched:
                self._close(region_id)
            region_id = self._start() if opens else None
        elif not touched:
            region_id = self._start() if opens else None
        else:
            region_id = self._merge(touched)
            if len(self._open[region_id].members) >= MAX_MEMBERS:
                self._close(region_id)
                region_id = self._start()
        for t in outputs:
            self._owner.pop(t.untyped_storage().data_ptr(), None)  # a reused address is someone else's now
        if region_id is None:
            return
        region = self._open[region_id]
        member = len(region.members)
        region.wiring.append(tuple(self._wire(region, region_id, t, group, i) for i, t in enumerate(inputs)))
        region.members.append((key, group))
        for slot, t in enumerate(outputs):
            if t.storage_offset() == 0:
                self._owner[t.untyped_storage().data_ptr()] = (region_id, member, slot, _identity(t))

    def finish(self) -> None:
        for region_id in list(self._open):
            self._close(region_id)

    def _start(self) -> int:
        self._next_id += 1
        self._open[self._next_id] = _Region()
        return self._next_id

    def _wire(self, region: _Region, region_id: int, t: torch.Tensor, group: CallGroup, position: int):
        owner = self._owner.get(t.untyped_storage().data_ptr())
        if owner is not None and owner[0] == region_id:
            _, member, slot, produced = owner
            same = _identity(t) == produced
            return Internal(member, slot, None if same else (tuple(t.shape), tuple(t.stride()), t.storage_offset()))
        identity = _identity(t)
        if identity not in region.externals:
            region.externals[identity] = len(region.external_specs)
            region.external_specs.append(TensorSpec.of(t))
            region.external_values.append(group.values[position])
        return ("x", region.externals[identity])

    def _merge(self, ids: list[int]) -> int:
        """Fold later regions into the first: their members follow, their wiring renumbered."""
        target = self._open[ids[0]]
        for other_id in ids[1:]:
            other = self._open.pop(other_id)
            offset, renumber = len(target.members), {}
            for identity, index in other.externals.items():
                if identity not in target.externals:
                    target.externals[identity] = len(target.external_specs)
                    target.external_specs.append(other.external_specs[index])
                    target.external_values.append(other.external_values[index])
                renumber[index] = target.externals[identity]
            for wires in other.wiring:
                target.wiring.append(
                    tuple(
                        ("x", renumber[w[1]]) if isinstance(w, tuple) else Internal(w.member + offset, w.slot, w.view)
                        for w in wires
                    )
                )
            target.members.extend(other.members)
            for storage, (region_id, member, slot, t) in list(self._owner.items()):
                if region_id == other_id:
                    self._owner[storage] = (ids[0], member + offset, slot, t)
        return ids[0]

    def _close(self, region_id: int) -> None:
        region = self._open.pop(region_id)
        for storage, owner in list(self._owner.items()):
            if owner[0] == region_id:
                del self._owner[storage]
        kinds = [self._kind_of(g) for _, g in region.members]
        computes = [k for k in kinds[1:] if k != "copy"] + ([kinds[0]] if kinds[0] != "copy" else [])
        epilogue = [k for k in kinds[1:] if k != "copy"]
        if len(kinds) < 2 or not computes or (kinds[0] in _MATMULS and not epilogue):
            return  # a lone call is a task already; casts alone or a matmul with no epilogue fuse nothing
        key = (tuple(k for k, _ in region.members), tuple(region.wiring), tuple(region.external_specs))
        if key in self.groups:
            self.groups[key].count += 1
        else:
            members = [g for _, g in region.members]
            self.groups[key] = FusedGroup(
                members, list(region.wiring), list(region.external_specs), list(region.external_values)
            )
