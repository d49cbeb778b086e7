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

import concurrent.futures
import logging
import threading
from typing import Dict, List, Sequence, Set, Tuple

from kvtier.engines.kv_layout import BlockLayout, Span
from kvtier.engines.scheduler_state import LoadOp, StepPlan
from kvtier.engines.staged_transfer import StagedTransfer

log = logging.getLogger("kvtier.engines")


class WorkerIO:
    def __init__(self, transfer: StagedTransfer, layout: BlockLayout, ratio: int):
        if transfer.block_bytes != layout.block_bytes * ratio:
            raise ValueError("the transfer's block size is not the layout's")
        self._transfer = transfer
        self._layout = layout
        self._poisoned: Dict[str, int] = {}  # req -> first kvtier block not to save
        self._poison_lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._pending: Dict[str, "concurrent.futures.Future[Set[int]]"] = {}
        self._all_blocks: Dict[str, Set[int]] = {}
        self.stats = transfer.stats
        self.stats["dropped_saves"] = 0

    def _spans(self, engine_blocks: Sequence[int]) -> List[Span]:
        return [s for b in engine_blocks for s in self._layout.spans(b)]

    def load(self, ops: Sequence[LoadOp]) -> Set[int]:
        """Loads the synchronous ops' blocks into the engine's now and starts
        the asynchronous ones in the background (see finished_loads); returns
        the engine block ids that must be recomputed (a failed block and every
        later one of its request)."""
        failed: Set[int] = set()
        for op in ops:
            if op.asynchronous:
                self._all_blocks[op.req_id] = {b for e in op.engine_blocks for b in e}
                self._pending[op.req_id] = self._pool.submit(self._load_op, op)
            else:
                failed |= self._load_op(op)
        return failed

    def _load_op(self, op: LoadOp) -> Set[int]:
        done = self._transfer.load(op.keys, [self._spans(e) for e in op.engine_blocks])
        if done == len(op.keys):
            return set()
        failed: Set[int] = set()
        for blocks in op.engine_blocks[done:]:
            failed.update(blocks)
        index = op.first_index + done
        with self._poison_lock:
            self._poisoned[op.req_id] = min(self._poisoned.get(op.req_id, index), index)
        return failed

    def finished_loads(self) -> Tuple[Set[str], Set[int]]:
        """The requests whose background loads ended (loaded or not), and the
        engine blocks of theirs that must be recomputed."""
        done, failed = set(), set()
        for req_id, future in list(self._pending.items()):
            if future.done():
                del self._pending[req_id]
                blocks = self._all_blocks.pop(req_id, set())
                done.add(req_id)
                try:
                    failed |= future.result()
                except Exception as e:  # unexpected: the whole load is failed
                    log.error("kvtier background load of %s: %s", req_id, e)
                    failed |= blocks
        return done, failed

    def save(self, plan: StepPlan) -> None:
        with self._poison_lock:
            for req in plan.acknowledged:
                self._poisoned.pop(req, None)
            limits = {op.req_id: self._poisoned.get(op.req_id) for op in plan.saves}
        for op in plan.saves:
            limit = limits[op.req_id]
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
        self._pool.shutdown(wait=True)
        self._transfer.close()
