"""Fusable neighbours: chains of calls where each consumes what an earlier one produced, recorded
while the model runs, so a norm written as eight ATen calls (cast, pow, mean, add, rsqrt, mul,
cast, mul) or a matmul followed by its bias and activation becomes one fused task beside the
single calls.

Two trackers watch the same calls. NORM_CHAINS grows regions of elementwise, reduction, norm,
softmax and copy calls (a residual add with the norm after it, as fused_add_rms_norm does);
EPILOGUES opens a region at each matmul or convolution and lets only the elementwise ops of an
epilogue (bias, scale, gate, residual, activation) join it, one GEMM per region. A call that may
not join and reads a region's tensor ends that region, and the value it reads is the region's
result: the value that escapes to work a fused kernel would not do. A closed region's other
results are still watched until the forward ends: one read again later (the residual sum, which a
residual add hands both to the norm after it and to the residual stream, as FlashInfer's
fused_add_rmsnorm returns both) is an output of the region's task too. Identical regions group
like identical calls do. A fused task returns its result and those intermediates, computed by the
members they depend on.
"""

from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field

import torch

from harness.capture.record import CallGroup, TensorSpec, ValueRange

# Longer chains (a recurrent scan written in torch ops) split: a task should read as one kernel.
MAX_MEMBERS = 16
# A region whose intermediates the model reads in more places than this is not one kernel's work
# (a table of rotary angles read by every layer): its task returns its result alone, as before.
MAX_OUTPUTS = 4
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
    # What the task returns, in member order: (member, slot) for an intermediate result the model
    # reads outside the region, (member, None) for the region's result as its op returns it. Empty:
    # the last member's result alone (a single-output task, whose id stays what it always was).
    outputs: tuple[tuple[int, int | None], ...] = ()

    @property
    def results(self) -> tuple[tuple[int, int | None], ...]:
        return self.outputs or ((len(self.members) - 1, None),)

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
        what = (signature, self.wiring, self.outputs) if self.outputs else (signature, self.wiring)
        return hashlib.sha1(repr(what).encode()).hexdigest()[:6]

    @property
    def last(self) -> CallGroup:
        return self.members[-1]


@dataclass
class _Member:
    seq: int  # the call's place in the forward: members run in this order, however regions merged
    key: tuple
    group: CallGroup
    wires: tuple  # per tensor input: ("x", tensor identity) or Internal(member=producer's seq, ...)


@dataclass
class _Region:
    members: list[_Member] = field(default_factory=list)
    externals: dict[tuple, tuple[TensorSpec, ValueRange]] = field(default_factory=dict)  # identity -> spec, values
    sink: int | None = None  # once closed: the seq of the member whose result left the region
    escapes: set[tuple[int, int]] = field(default_factory=set)  # (seq, slot) of results read outside it


class StorageNumbers:
    """A number for each storage the model makes, never reused while the model runs. A storage's
    address (its StorageImpl; meta tensors have no data pointer, but they have storages) is reused
    as soon as the storage is freed, so by address a tensor made later would pass for an earlier
    one: a new input for the same input read twice, or for a region's own result. How often that
    happened depended on the allocator, and one SD3.5 region came out wired two ways in two
    captures."""

    def __init__(self) -> None:
        self._live: dict[int, tuple[weakref.ref, int]] = {}  # address -> (its storage, its number)
        self._count = 0

    def __call__(self, t: torch.Tensor) -> int | None:
        """The number of t's storage; None for an empty tensor, which holds no data to pass on."""
        if not t.numel():
            return None
        storage = t.untyped_storage()  # the same object for as long as the storage lives
        address = storage._cdata
        known = self._live.get(address)
        if known is None or known[0]() is not storage:
            self._count += 1
            known = self._live[address] = (weakref.ref(storage), self._count)
        return known[1]


def _identity(t: torch.Tensor, number: int | None) -> tuple:
    return (number, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def _within(t: torch.Tensor, number: int | None, produced: tuple) -> bool:
    """Whether every element `t` (in storage `number`) views is one the tensor with identity
    `produced` holds. Only a dense result (no gaps between its elements) covers its span; a strided
    one covers itself."""
    _, offset, shape, stride, dtype = produced
    made = TensorSpec(shape, dtype, stride)
    if t.dtype != dtype:
        return False
    if made.span != made.numel:
        return _identity(t, number) == produced
    return offset <= t.storage_offset() and t.storage_offset() + TensorSpec.of(t).span <= offset + made.span


class FusionTracker:
    """Follows dataflow between recorded calls by storage and collects fused regions."""

    def __init__(self, kind_of, rule: Rule) -> None:
        self._kind_of = kind_of  # CallGroup -> category (costs.category, passed in to avoid a cycle)
        self._rule = rule
        self._open: dict[int, _Region] = {}
        # storage number -> region, producing call's seq, slot and the identity of the tensor
        # produced there. Not the tensor itself: holding every intermediate would pin gigabytes.
        self._owner: dict[int, tuple[int, int, int, tuple]] = {}
        # The same for closed regions (storage number -> region, seq, slot): a later read is an escape.
        self._closed_owner: dict[int, tuple[_Region, int, int]] = {}
        self._closed: list[_Region] = []
        self._number = StorageNumbers()
        self._next_id = 0
        self._seq = 0
        self.groups: dict[tuple, FusedGroup] = {}

    def observe(self, key: tuple, group: CallGroup, inputs: list[torch.Tensor], outputs: list[torch.Tensor]) -> None:
        """One recorded call: join, open or close regions, then note who produced its outputs."""
        self._seq += 1
        numbers = [self._number(t) for t in inputs]
        read: dict[int, int] = {}  # region -> the latest of its members this call reads
        slots: dict[int, set[tuple[int, int]]] = {}  # region -> (seq, slot) of each result it reads
        for number in numbers:
            if number in self._owner:
                region_id, seq, slot = self._owner[number][:3]
                read[region_id] = max(seq, read.get(region_id, 0))
                slots.setdefault(region_id, set()).add((seq, slot))
            elif number in self._closed_owner:
                closed, seq, slot = self._closed_owner[number]
                closed.escapes.add((seq, slot))
        touched = sorted(read)
        kind = self._kind_of(group)
        opens = kind in self._rule.opens and not group.mutates
        joins = self._rule.may_join(kind, group.op.overloadpacket.__name__) and not group.mutates
        # An epilogue belongs to one GEMM: a call reading two GEMMs' results ends both regions.
        if joins and len(touched) > 1 and self._rule.join_ops is not None:
            joins = False
        if not joins:
            for region_id in touched:  # what this call reads is the value that left the region
                self._close(region_id, sink=read[region_id], escapes=slots[region_id])
            region_id = self._start() if opens else None
        elif not touched:
            region_id = self._start() if opens else None
        else:
            region_id = self._merge(touched)
            if len(self._open[region_id].members) >= MAX_MEMBERS:
                self._close(region_id)
                region_id = self._start() if opens else None
        # Wire the inputs before forgetting who made the outputs: an in-place call (relu_ on a
        # norm's result) writes where its input lives, and that input is a member's result.
        if region_id is not None:
            region = self._open[region_id]
            wires = tuple(
                self._wire(region, region_id, t, a, group, i) for i, (t, a) in enumerate(zip(inputs, numbers))
            )
            region.members.append(_Member(self._seq, key, group, wires))
        for slot, t in enumerate(outputs):
            number = self._number(t)
            self._owner.pop(number, None)  # an in-place call's result is its own now
            self._closed_owner.pop(number, None)
            if region_id is not None and number is not None and t.storage_offset() == 0:
                self._owner[number] = (region_id, self._seq, slot, _identity(t, number))

    def finish(self) -> None:
        """Close what is open, and group every region: only now is it known which of their
        results the rest of the forward read."""
        for region_id in list(self._open):
            self._close(region_id)
        for region in self._closed:
            self._group(region)
        self._closed.clear()
        self._closed_owner.clear()

    def _start(self) -> int:
        self._next_id += 1
        self._open[self._next_id] = _Region()
        return self._next_id

    def _wire(self, region: _Region, region_id: int, t: torch.Tensor, number, group: CallGroup, position: int):
        owner = self._owner.get(number) if number is not None else None
        # A view reaching past what the member produced (another slice of a cache it wrote into)
        # reads memory the region did not make: to the reference it is an input.
        if owner is not None and owner[0] == region_id and _within(t, number, owner[3]):
            _, seq, slot, produced = owner
            same = _identity(t, number) == produced
            return Internal(seq, slot, None if same else (tuple(t.shape), tuple(t.stride()), t.storage_offset()))
        identity = _identity(t, number)
        region.externals.setdefault(identity, (TensorSpec.of(t), group.values[position]))
        return ("x", identity)

    def _merge(self, ids: list[int]) -> int:
        """Fold later regions into the first (members keep their seq, so their order survives)."""
        target = self._open[ids[0]]
        for other_id in ids[1:]:
            other = self._open.pop(other_id)
            target.members.extend(other.members)
            for identity, spec in other.externals.items():
                target.externals.setdefault(identity, spec)
            for number, (region_id, seq, slot, identity) in list(self._owner.items()):
                if region_id == other_id:
                    self._owner[number] = (ids[0], seq, slot, identity)
        return ids[0]

    def _close(self, region_id: int, sink: int | None = None, escapes: set[tuple[int, int]] = frozenset()) -> None:
        """End a region; its result is the member `sink` (the value a non-joining call read), else
        the last. Its results stay watched (`escapes`: those the closing call read besides `sink`)."""
        region = self._open.pop(region_id)
        region.sink = sink if sink is not None else max(m.seq for m in region.members)
        region.escapes = {e for e in escapes if e[0] != region.sink}
        for number, owner in list(self._owner.items()):
            if owner[0] == region_id:
                del self._owner[number]
                self._closed_owner[number] = (region, owner[1], owner[2])
        self._closed.append(region)

    def _group(self, region: _Region) -> None:
        """A closed region as a fused group: the members its outputs depend on, its outputs (the
        result, and the intermediates read outside it), grouped with identical regions."""
        ordered = sorted(region.members, key=lambda m: m.seq)
        escapes = sorted(e for e in region.escapes if e[0] != region.sink)
        if len(escapes) + 1 > MAX_OUTPUTS:
            escapes = []
        members = _live(ordered, region.sink, {seq for seq, _ in escapes})
        kinds = [self._kind_of(m.group) for m in members]
        computes = [k for k in kinds if k != "copy"]
        epilogue = [k for k in kinds[1:] if k != "copy"]
        if len(kinds) < 2 or not computes or (kinds[0] in _MATMULS and not epilogue):
            return  # a lone call is a task already; casts alone or a matmul with no epilogue fuse nothing
        position = {m.seq: i for i, m in enumerate(members)}
        externals: list[tuple] = []
        wiring = []
        for m in members:
            wires = []
            for w in m.wires:
                if isinstance(w, Internal):
                    wires.append(Internal(position[w.member], w.slot, w.view))
                    continue
                if w[1] not in externals:
                    externals.append(w[1])
                wires.append(("x", externals.index(w[1])))
            wiring.append(tuple(wires))
        specs = [region.externals[e][0] for e in externals]
        results = [(position[seq], slot) for seq, slot in escapes] + [(position[region.sink], None)]
        outputs = tuple(sorted(results, key=lambda r: (r[0], r[1] is None, r[1] or 0))) if escapes else ()
        key = (tuple(m.key for m in members), tuple(wiring), tuple(specs), outputs)
        if key in self.groups:
            self.groups[key].count += 1
        else:
            values = [region.externals[e][1] for e in externals]
            self.groups[key] = FusedGroup([m.group for m in members], wiring, specs, values, outputs=outputs)


def _live(members: list[_Member], sink: int | None, escaped: set[int] = frozenset()) -> list[_Member]:
    """The sink (by default the last member), the members whose results escape, and the members
    they depend on: work that feeds nothing the task returns would be dead code a kernel could skip
    (and would inflate the bytes the task says it must move)."""
    if not members:
        return []
    needed = {members[-1].seq if sink is None else sink} | set(escaped)
    for m in reversed(members):
        if m.seq in needed:
            needed.update(w.member for w in m.wires if isinstance(w, Internal))
    return [m for m in members if m.seq in needed]
