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

Hybrid models: each key's blocks (group 0's, then each further group's the
op names) go to the transfer together, tagged with their group; a hybrid
load that fails anywhere fails whole, and reports its group-0 blocks (the
ones the engine rolls back by) from its first.

Layer-wise loads (start_group_loads): a step's synchronous loads run one
layer group after another on a thread of their own; wait_group(g) returns
once group g of every op is in (or failed), so the engine computes the
first layers while later ones load; end_group_loads() joins them and
returns what failed (whole ops, as for hybrid loads).
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

    def load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]],
             groups: Optional[Sequence[int]] = None, synchronise: bool = True) -> int: ...

    def save(self, keys: Sequence[bytes], parents: Sequence[bytes],
             spans: Sequence[Sequence[Span]], retention: Optional[int] = None,
             groups: Optional[Sequence[int]] = None) -> int: ...

    def close(self) -> None: ...


class _Entries:
    """One op's blocks as a transfer takes them: per key, group 0's block and
    then each further group's, each with its spans and group."""

    def __init__(self) -> None:
        self.keys: List[bytes] = []
        self.parents: List[bytes] = []
        self.spans: List[List[Span]] = []
        self.groups: List[int] = []
        self.ends: List[int] = []  # per key, the end of its entries

    def keys_done(self, entries_done: int) -> int:
        """How many leading keys had every block moved."""
        n = 0
        while n < len(self.ends) and self.ends[n] <= entries_done:
            n += 1
        return n


class WorkerIO:
    """`group_layouts`: a hybrid model's layouts of layer groups 1.."""

    def __init__(self, transfer: BlockTransfer, layout: BlockLayout, ratio: int,
                 group_layouts: Sequence[BlockLayout] = ()):
        if transfer.block_bytes != layout.block_bytes * ratio:
            raise ValueError("the transfer's block size is not the layout's")
        if group_layouts and ratio != 1:
            raise ValueError("layer groups need one engine block per kvtier block")
        self._transfer = transfer
        self._layout = layout
        self._group_layouts = list(group_layouts)
        self._lock = threading.Lock()  # the taint maps, shared with the background thread
        self._poisoned: Dict[str, int] = {}  # req -> first kvtier block not to save
        self._bad: Dict[str, Set[int]] = {}  # req -> its engine blocks whose load failed
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._group_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._group_events: List[threading.Event] = []
        self._group_job: Optional["concurrent.futures.Future[Set[int]]"] = None
        self._group_ops: List[LoadOp] = []
        self._pending: Dict[str, "concurrent.futures.Future[Set[int]]"] = {}
        self._all_blocks: Dict[str, Set[int]] = {}
        self.stats = transfer.stats
        with transfer.lock:
            self.stats["dropped_saves"] = 0

    def _spans(self, engine_blocks: Sequence[int]) -> List[Span]:
        return [s for b in engine_blocks for s in self._layout.spans(b)]

    def _entries(self, keys: Sequence[bytes], engine_blocks: Sequence[Sequence[int]],
                 group_blocks: Sequence[Sequence[Optional[int]]],
                 parents: Optional[Sequence[bytes]] = None) -> _Entries:
        if len(group_blocks) > len(self._group_layouts):
            raise ValueError(f"an op names {len(group_blocks)} further layer groups; "
                             f"the worker has {len(self._group_layouts)}")
        e = _Entries()
        for i, key in enumerate(keys):
            parent = parents[i] if parents is not None else b""
            e.keys.append(key)
            e.parents.append(parent)
            e.spans.append(self._spans(engine_blocks[i]))
            e.groups.append(0)
            for g, row in enumerate(group_blocks):
                if row[i] is not None:
                    e.keys.append(key)
                    e.parents.append(parent)
                    e.spans.append(self._group_layouts[g].spans(row[i]))
                    e.groups.append(g + 1)
            e.ends.append(len(e.keys))
        return e

    def _move(self, save: bool, keys: Sequence[bytes], engine_blocks: Sequence[Sequence[int]],
              group_blocks: Sequence[Sequence[Optional[int]]],
              parents: Optional[Sequence[bytes]] = None,
              retention: Optional[int] = None) -> int:
        """Loads (saves) the op's blocks; how many leading keys went through."""
        if not group_blocks:  # one group: the transfer's plain form
            spans = [self._spans(e) for e in engine_blocks]
            if save:
                return self._transfer.save(keys, parents or [], spans, retention=retention)
            return self._transfer.load(keys, spans)
        e = self._entries(keys, engine_blocks, group_blocks, parents)
        if save:
            done = self._transfer.save(e.keys, e.parents, e.spans, retention=retention,
                                       groups=e.groups)
        else:
            done = self._transfer.load(e.keys, e.spans, groups=e.groups)
        return e.keys_done(done)

    def begin_step(self, plan: StepPlan) -> None:
        """The scheduler has taken these requests' failed loads into account:
        their saves go out again (before this step's loads can fail anew)."""
        with self._lock:
            for req in plan.acknowledged:
                self._poisoned.pop(req, None)
                self._bad.pop(req, None)
            # Loads promised but never planned: failed from their first block.
            for f in plan.failed_loads:
                self._poisoned[f.req_id] = min(self._poisoned.get(f.req_id, f.first_index),
                                               f.first_index)
                self._bad.setdefault(f.req_id, set()).update(f.engine_blocks)

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
            done = self._move(False, op.keys, op.engine_blocks, op.group_blocks)
        except Exception as e:  # a layout error: nothing of it is loaded
            log.error("kvtier: load of %s: %s", op.req_id, e)
            done = 0
        if done == len(op.keys):
            return set()
        if op.group_blocks:  # a shorter cut would need other window blocks
            done = 0
        return self._failed(op, done)

    def _failed(self, op: LoadOp, done: int) -> Set[int]:
        """Records that `op` loaded only its first `done` keys: the request
        and the blocks are tainted; returns the engine blocks to recompute."""
        failed: Set[int] = set()
        for blocks in op.engine_blocks[done:]:
            failed.update(blocks)
        bad = set(failed)
        for row in op.group_blocks:
            bad.update(b for b in row if b is not None)
        index = op.first_index + done
        with self._lock:
            self._poisoned[op.req_id] = min(self._poisoned.get(op.req_id, index), index)
            self._bad.setdefault(op.req_id, set()).update(bad)
        return failed

    def start_group_loads(self, ops: Sequence[LoadOp]) -> None:
        """Starts synchronous `ops` layer group by layer group (see the
        module docstring); the previous step's must have ended."""
        if self._group_job is not None:
            raise RuntimeError("the previous step's layer-wise loads were not ended")
        events = [threading.Event() for _ in range(1 + len(self._group_layouts))]
        ops = list(ops)
        job = self._group_pool.submit(self._load_by_group, ops, events)
        # Published only once the job that sets them runs.
        self._group_job, self._group_events, self._group_ops = job, events, ops

    def _load_by_group(self, ops: Sequence[LoadOp], events: Sequence[threading.Event]) -> Set[int]:
        failed_ops: Set[int] = set()
        first = True
        try:
            for g, event in enumerate(events):
                for k, op in enumerate(ops):
                    if k in failed_ops:
                        continue
                    try:
                        if g == 0:
                            spans = [self._spans(e) for e in op.engine_blocks]
                        else:
                            spans = [self._group_layouts[g - 1].spans(b)
                                     for b in op.group_blocks[g - 1]]
                        # The device is synchronised once, before the first.
                        done = self._transfer.load(op.keys, spans, groups=[g] * len(op.keys),
                                                   synchronise=first)
                        first = first and done == 0
                    except Exception as e:  # a layout error, a missing block id
                        log.error("kvtier: layer group %d load of %s: %s", g, op.req_id, e)
                        done = 0
                    if done < len(op.keys):
                        failed_ops.add(k)
                event.set()
        finally:
            for event in events:
                event.set()
        failed: Set[int] = set()
        for k in sorted(failed_ops):
            failed |= self._failed(ops[k], 0)
        return failed

    def wait_group(self, group: int, timeout: Optional[float] = None) -> bool:
        """Waits until layer group `group` of this step's layer-wise loads
        is in (or failed); at once when none run. False on a timeout."""
        events = self._group_events
        if not events:
            return True
        return events[min(group, len(events) - 1)].wait(timeout)

    def end_group_loads(self, fail_all: bool = False) -> Set[int]:
        """Joins this step's layer-wise loads; the engine blocks to recompute
        (every op's with `fail_all`: the engine may have read a layer before
        it was in)."""
        job, ops = self._group_job, self._group_ops
        self._group_job, self._group_events, self._group_ops = None, [], []
        if job is None:
            return set()
        failed: Set[int] = set()
        try:
            failed = job.result()
        except Exception as e:  # unexpected: every op fails whole
            log.error("kvtier: layer-wise loads: %s", e)
            fail_all = True
        if fail_all:
            for op in ops:
                failed |= self._failed(op, 0)
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
            if bad.intersection(op.engine_blocks[i]) or \
                    any(row[i] in bad for row in op.group_blocks if row[i] is not None):
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
                self._move(True, op.keys[:n], op.engine_blocks[:n],
                           [row[:n] for row in op.group_blocks], op.parents[:n], op.retention)
            except Exception as e:  # a layout error: the save is dropped
                log.error("kvtier: save of %s: %s", op.req_id, e)

    def take_stats(self) -> Dict[str, int]:
        with self._transfer.lock:
            out = dict(self.stats)
            for k in self.stats:
                self.stats[k] = 0
        return out

    def close(self) -> None:
        self.end_group_loads()
        self._group_pool.shutdown(wait=True)
        self._pool.shutdown(wait=True)
        self._transfer.close()
