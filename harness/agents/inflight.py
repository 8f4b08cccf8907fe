"""Several expansions in flight: model calls are written in threads while the caller's thread
evaluates the answers that have landed, one at a time (one Evaluator, one device: evaluations are
never concurrent, so timings stay honest and the Evaluator needs no locking of its own)."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from harness.agents.base import AgentContext, answer_or_failure, land, record_prompt, stored_messages
from harness.agents.tree import Action, Dispatch, Node
from harness.errors import ForgeBenchError


class InFlight:
    """Up to `slots` model calls between being sent and landing. Each call is journaled in the tree
    before it is sent and its node is written when its evaluation lands; a search reopened after a
    crash sends the journaled calls that never landed again, first and with their stored request,
    so an answer that reached the disk is reused, never bought twice."""

    def __init__(self, ctx: AgentContext, slots: int):
        if not isinstance(slots, int) or slots < 1:
            raise ForgeBenchError(f"agent.in_flight is {slots!r}; it must be a positive integer (conf/agent/).")
        self.ctx, self.slots = ctx, slots
        self._pool = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="model-call")
        self._calls: dict[int, tuple[Dispatch, Future, float]] = {}
        self._resend = ctx.tree.unlanded()
        self._resent: set[int] = set()  # resent calls land in journal order, so a resume is repeatable
        self._mark = time.monotonic()  # the search's wall time up to here is counted in landed nodes

    def __enter__(self) -> InFlight:
        return self

    def __exit__(self, *exc) -> None:
        # Calls still running finish and cache their answers for a resume; none is started anew.
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __len__(self) -> int:
        return len(self._calls)

    def has_room(self) -> bool:
        return len(self._calls) < self.slots

    def parents(self) -> list[int | None]:
        """The parent of every call in flight (None: a new kernel), for virtual loss."""
        return [record.parent_id for record, _, _ in self._calls.values()]

    def resend(self) -> bool:
        """Send the oldest journaled call that never landed; False when there is none."""
        if not self._resend:
            return False
        record = self._resend.pop(0)
        self._resent.add(record.id)
        self._send(record, stored_messages(self.ctx, record.prompt_id))
        return True

    def siblings(self, parent: Node | None) -> int:
        """Calls in flight that expand the same parent (None: new kernels)."""
        return self.parents().count(parent.id if parent else None)

    def send(self, parent: Node | None, action: Action, messages: list[dict[str, str]], sibling: int = 0) -> Dispatch:
        """Journal and send a call whose prompt was built from the tree as it stands now, with
        `sibling` calls for the same parent already in flight."""
        tree = self.ctx.tree
        node_id = tree.next_id()
        prompt_id = record_prompt(self.ctx, node_id, messages)
        parent_id = parent.id if parent else None
        record = tree.dispatch(Dispatch(node_id, parent_id, action, prompt_id, len(tree), sibling))
        self._send(record, messages)
        return record

    def _send(self, record: Dispatch, messages: list[dict[str, str]]) -> None:
        started = time.monotonic()
        future = self._pool.submit(answer_or_failure, self.ctx, record.prompt_id, messages, started)
        self._calls[record.id] = (record, future, started)

    def land_next(self) -> Node:
        """Wait for an answer (a resent call's in journal order, else the lowest id of those ready),
        evaluate it and persist its node. The node's wall_s is the search's time since the last
        landing (or since its call was sent, if later), so wall_s summed over the tree is the
        search's wall time, not N overlapping calls'."""
        pending_resent = sorted(self._resent & set(self._calls))
        if pending_resent:  # its answer is usually on disk already: waiting for it costs nothing
            node_id = pending_resent[0]
            self._calls[node_id][1].result()
            self._resent.discard(node_id)
        else:
            wait([future for _, future, _ in self._calls.values()], return_when=FIRST_COMPLETED)
            node_id = min(i for i, (_, future, _) in self._calls.items() if future.done())
        record, future, started = self._calls.pop(node_id)
        completion, failure = future.result()
        node = land(
            self.ctx,
            record.id,
            record.parent_id,
            record.action,
            record.prompt_id,
            completion,
            failure,
            max(started, self._mark),
            extra={"seen": record.seen, "sibling": record.sibling},
        )
        self._mark = time.monotonic()
        return node
