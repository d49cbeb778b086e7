"""The worker side of an engine connector: the loads and saves of a
StepPlan between the engine's KV tensors and the daemon, over a
BlockTransfer: StagedTransfer for host memory (a shared-memory staging
region), DirectTransfer for GPU memory (the daemon copies to and from the
tensors, registered by CUDA IPC). Failures are counts, never exceptions.

A load that fails taints what is computed on it: until the scheduler
acknowledges the failure (in a later plan, applied before that step's
loads), the worker saves nothing of the failed request at or past the
failed block, and nothing of any request from a block that uses one of the
failed engine blocks (another request may hit them in the engine's own
cache). Synchronous loads run in load(); asynchronous ones on one
background thread, reported by finished_loads().
"""

import concurrent.futures
import logging
import threading
from typing import Dict, Iterable, List, Optional, Protocol, Sequence, Set, Tuple

from kvtier.engines.kv_layout import BlockLayout, Span
from kvtier.engines.scheduler_state import LoadOp, SaveOp, StepPlan

log = logging.getLogger("kvtier.engines")


class BlockTransfer(Protocol):
    """What WorkerIO needs of a transfer (StagedTransfer, DirectTransfer)."""
    block_bytes: int
    lock: threading.Lock
    stats: Dict[str, int]

    def load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]]) -> int: ...

    def save(self, keys: Sequence[bytes], parents: Sequence[bytes],
             spans: Sequence[Sequence[Span]], retention: Optional[int] = None) -> int: ...

    def close(self) -> None: ...


class WorkerIO:
    def __init__(self, transfer: BlockTransfer, layout: BlockLayout, ratio: int):
        if transfer.block_bytes != layout.block_bytes * ratio:
            raise ValueError("the transfer's block size is not the layout's")
        self._transfer = transfer
        self._layout = layout
        self._lock = threading.Lock()  # the taint maps, shared with the background thread
        self._poisoned: Dict[str, int] = {}  # req -> first kvtier block not to save
        self._bad: Dict[str, Set[int]] = {}  # req -> its engine blocks whose load failed
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._pending: Dict[str, "concurrent.futures.Future[Set[int]]"] = {}
        self._all_blocks: Dict[str, Set[int]] = {}
        self.stats = transfer.stats
        with transfer.lock:
            self.stats["dropped_saves"] = 0

    def _spans(self, engine_blocks: Sequence[int]) -> List[Span]:
        return [s for b in engine_blocks for s in self._layout.spans(b)]

    def begin_step(self, plan: StepPlan) -> None:
        """The scheduler has taken these requests' failed loads into account:
        their saves go out again (before this step's loads can fail anew)."""
        with self._lock:
            for req in plan.acknowledged:
                self._poisoned.pop(req, None)
                self._bad.pop(req, None)

    def forget(self, req_ids: Iterable[str]) -> None:
        """Finished or aborted requests: no acknowledgement will come."""
        with self._lock:
            for req in req_ids:
                self._poisoned.pop(req, None)
                self._bad.pop(req, None)

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
        try:
            spans = [self._spans(e) for e in op.engine_blocks]
            done = self._transfer.load(op.keys, spans)
        except Exception as e:  # a layout error: nothing of it is loaded
            log.error("kvtier: load of %s: %s", op.req_id, e)
            done = 0
        if done == len(op.keys):
            return set()
        failed: Set[int] = set()
        for blocks in op.engine_blocks[done:]:
            failed.update(blocks)
        index = op.first_index + done
        with self._lock:
            self._poisoned[op.req_id] = min(self._poisoned.get(op.req_id, index), index)
            self._bad.setdefault(op.req_id, set()).update(failed)
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

    def _savable(self, op: SaveOp, bad: Set[int]) -> int:
        """How many leading blocks of `op` may be saved."""
        with self._lock:
            limit = self._poisoned.get(op.req_id)
        n = len(op.keys) if limit is None else max(0, min(len(op.keys), limit - op.first_index))
        for i in range(n):
            if bad.intersection(op.engine_blocks[i]):
                return i
        return n

    def save(self, plan: StepPlan) -> None:
        with self._lock:
            bad = set().union(*self._bad.values()) if self._bad else set()
        for op in plan.saves:
            n = self._savable(op, bad)
            if n < len(op.keys):
                with self._transfer.lock:
                    self.stats["dropped_saves"] += len(op.keys) - n
            try:
                self._transfer.save(op.keys[:n], op.parents[:n],
                                    [self._spans(e) for e in op.engine_blocks[:n]],
                                    retention=op.retention)
            except Exception as e:  # a layout error: the save is dropped
                log.error("kvtier: save of %s: %s", op.req_id, e)

    def take_stats(self) -> Dict[str, int]:
        with self._transfer.lock:
            out = dict(self.stats)
            for k in self.stats:
                self.stats[k] = 0
        return out

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._transfer.close()
