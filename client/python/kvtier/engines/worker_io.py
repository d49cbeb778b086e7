"""The worker side of an engine connector: the loads and saves of a
StepPlan, between the engine's KV tensors (host memory) and the daemon,
through a shared-memory staging region the daemon reads and writes.

Failures never leave this class as exceptions: a daemon error turns a load
into failed blocks (the engine recomputes them) and a save into a miss, and
both are counted. After an error the namespace is opened and the region
registered again on the next call, so a daemon restart costs the requests in
flight, not the engine. A request whose load failed has its saves at and
past the failed block dropped until the scheduler acknowledges the failure.

GPU KV caches need the CUDA IPC path (registering the tensors themselves);
this class handles host tensors only.
"""

import ctypes
import logging
from typing import Callable, Dict, List, Optional, Sequence, Set

from kvtier.client import BlockRef, Client, Completion, SharedRegion
from kvtier.engines.kv_layout import BlockLayout
from kvtier.engines.scheduler_state import LoadOp, StepPlan

log = logging.getLogger("kvtier.engines")


class WorkerIO:
    def __init__(self, client: Client, open_namespace: Callable[[Client], str],
                 layout: BlockLayout, ratio: int, staging_bytes: int = 64 << 20,
                 staging_dir: str = "/dev/shm"):
        self._client = client
        self._open_namespace = open_namespace
        self._layout = layout
        self._ratio = ratio
        self.block_bytes = layout.block_bytes * ratio  # one kvtier block
        self._per_batch = max(1, staging_bytes // self.block_bytes)
        self._staging = SharedRegion(self._per_batch * self.block_bytes, staging_dir)
        self._staging_view = ctypes.c_char.from_buffer(self._staging.buffer)
        self._staging_address = ctypes.addressof(self._staging_view)
        self._namespace: Optional[str] = None
        self._region: Optional[str] = None
        self._poisoned: Dict[str, int] = {}  # req -> first kvtier block not to save
        self.stats: Dict[str, int] = {
            "loaded_blocks": 0, "load_failures": 0, "saved_blocks": 0, "save_failures": 0,
            "dropped_saves": 0, "daemon_errors": 0}

    # -- the daemon, with one retry after re-opening and re-registering

    def _call(self, save: bool, refs: List[BlockRef]) -> Optional[List[Completion]]:
        for attempt in range(2):
            try:
                if self._namespace is None:
                    self._namespace = self._open_namespace(self._client)
                if self._region is None:
                    self._region = self._client.register_memory(self._staging.path,
                                                                self._staging.size)
                op = self._client.save if save else self._client.load
                return op(self._namespace, self._region, refs)
            except Exception as e:  # never into the engine
                self.stats["daemon_errors"] += 1
                log.warning("kvtier %s failed (attempt %d): %s", "save" if save else "load",
                            attempt + 1, e)
                self._namespace = self._region = None
        return None

    # -- bytes between the engine's tensors and the staging region

    def _copy(self, engine_blocks: Sequence[int], slot: int, to_staging: bool) -> None:
        at = self._staging_address + slot * self.block_bytes
        for b in engine_blocks:
            for address, size in self._layout.spans(b):
                if to_staging:
                    ctypes.memmove(at, address, size)
                else:
                    ctypes.memmove(address, at, size)
                at += size

    # -- the plan

    def load(self, ops: Sequence[LoadOp]) -> Set[int]:
        """Loads every op's blocks into the engine's; returns the engine block
        ids that must be recomputed (a failed block and every later one of
        its request)."""
        failed: Set[int] = set()
        for op in ops:
            bad = self._load_op(op)
            if bad is None:
                continue
            for blocks in op.engine_blocks[bad:]:
                failed.update(blocks)
            self.stats["load_failures"] += len(op.keys) - bad
            index = op.first_index + bad
            self._poisoned[op.req_id] = min(self._poisoned.get(op.req_id, index), index)
        return failed

    def _load_op(self, op: LoadOp) -> Optional[int]:
        """The first block of `op` that did not load, or None."""
        for start in range(0, len(op.keys), self._per_batch):
            idx = list(range(start, min(len(op.keys), start + self._per_batch)))
            refs = [BlockRef(op.keys[i], slot * self.block_bytes, self.block_bytes)
                    for slot, i in enumerate(idx)]
            done = self._call(False, refs)
            ok = {c.index for c in done or [] if c.ok and c.size == self.block_bytes}
            for slot, i in enumerate(idx):
                if slot not in ok:
                    return i
                self._copy(op.engine_blocks[i], slot, to_staging=False)
                self.stats["loaded_blocks"] += 1
        return None

    def save(self, plan: StepPlan) -> None:
        for req in plan.acknowledged:
            self._poisoned.pop(req, None)
        for op in plan.saves:
            limit = self._poisoned.get(op.req_id)
            n = len(op.keys)
            if limit is not None:
                n = max(0, min(n, limit - op.first_index))
                self.stats["dropped_saves"] += len(op.keys) - n
            for start in range(0, n, self._per_batch):
                idx = list(range(start, min(n, start + self._per_batch)))
                for slot, i in enumerate(idx):
                    self._copy(op.engine_blocks[i], slot, to_staging=True)
                refs = [BlockRef(op.keys[i], slot * self.block_bytes, self.block_bytes,
                                 parent_key=op.parents[i]) for slot, i in enumerate(idx)]
                done = self._call(True, refs)
                ok = sum(1 for c in done or [] if c.ok)
                self.stats["saved_blocks"] += ok
                self.stats["save_failures"] += len(idx) - ok
                if ok < len(idx):
                    break  # later blocks need their parents

    def take_stats(self) -> Dict[str, int]:
        out = dict(self.stats)
        for k in self.stats:
            self.stats[k] = 0
        return out

    def close(self) -> None:
        if self._region is not None:
            try:
                self._client.unregister_memory(self._region)
            except Exception as e:
                log.info("kvtier: unregistering the staging region: %s", e)
            self._region = None
        del self._staging_view
        self._staging.close()
