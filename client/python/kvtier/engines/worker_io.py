"""The worker side of an engine connector: the loads and saves of a
StepPlan between the engine's KV tensors (host memory) and the daemon, over
a StagedTransfer (staged_transfer.py: failures are counts, never
exceptions).

A request whose load failed has its saves at and past the failed block
dropped until the scheduler acknowledges the failure (the KV computed in
that step on top of the failed blocks is wrong).

GPU KV caches need the CUDA IPC path (registering the tensors themselves);
this class handles host tensors only.
"""

from typing import Dict, List, Sequence, Set

from kvtier.engines.kv_layout import BlockLayout, Span
from kvtier.engines.scheduler_state import LoadOp, StepPlan
from kvtier.engines.staged_transfer import StagedTransfer


class WorkerIO:
    def __init__(self, transfer: StagedTransfer, layout: BlockLayout, ratio: int):
        if transfer.block_bytes != layout.block_bytes * ratio:
            raise ValueError("the transfer's block size is not the layout's")
        self._transfer = transfer
        self._layout = layout
        self._poisoned: Dict[str, int] = {}  # req -> first kvtier block not to save
        self.stats = transfer.stats
        self.stats["dropped_saves"] = 0

    def _spans(self, engine_blocks: Sequence[int]) -> List[Span]:
        return [s for b in engine_blocks for s in self._layout.spans(b)]

    def load(self, ops: Sequence[LoadOp]) -> Set[int]:
        """Loads every op's blocks into the engine's; returns the engine block
        ids that must be recomputed (a failed block and every later one of
        its request)."""
        failed: Set[int] = set()
        for op in ops:
            done = self._transfer.load(op.keys, [self._spans(e) for e in op.engine_blocks])
            if done == len(op.keys):
                continue
            for blocks in op.engine_blocks[done:]:
                failed.update(blocks)
            index = op.first_index + done
            self._poisoned[op.req_id] = min(self._poisoned.get(op.req_id, index), index)
        return failed

    def save(self, plan: StepPlan) -> None:
        for req in plan.acknowledged:
            self._poisoned.pop(req, None)
        for op in plan.saves:
            limit = self._poisoned.get(op.req_id)
            n = len(op.keys)
            if limit is not None:
                n = max(0, min(n, limit - op.first_index))
                self.stats["dropped_saves"] += len(op.keys) - n
            self._transfer.save(op.keys[:n], op.parents[:n],
                                [self._spans(e) for e in op.engine_blocks[:n]])

    def take_stats(self) -> Dict[str, int]:
        out = dict(self.stats)
        for k in self.stats:
            self.stats[k] = 0
        return out

    def close(self) -> None:
        self._transfer.close()
