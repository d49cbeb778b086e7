"""The scheduler side of an engine connector: which blocks each step loads
and saves. Engine-agnostic: the adapter passes request views and the step's
scheduled requests, and ships the resulting StepPlan (picklable) to the
workers.

Rules:
- A match counts whole kvtier blocks found now, starting where the engine's
  own cache stopped (which must be a kvtier block boundary), and leaves at
  least the prompt's last token to compute. It has no side effects: the
  engine may ask again.
- Loaded blocks are not saved again; computed blocks are saved once, when
  every token of the kvtier block has been computed and its hash may be
  published.
- A block whose load failed is never saved before it is recomputed: the
  worker drops the step's saves at and past the failure (their KV was
  computed on a bad prefix), and when the engine reports the failed blocks
  the save watermark moves back, so the recomputed blocks are saved in a
  later step. The worker keeps dropping until a plan acknowledges it.
- With asynchronous loads a request with a hit waits, unscheduled, while its
  blocks load in the background; its load goes out in the next plan
  whether it is scheduled or not.

Hybrid models (several layer groups, vLLM's KV cache groups): group 0 is
full attention and the spine: its engine blocks are the ones the engine
rolls back by, and its keys the ones the daemon chains. Every further group
has one engine block per key (ratio 1): a full-attention group moves all of
them, a sliding-window group of w blocks only the window a cut needs (keys
[cut - w, cut) on a load; every block the step computed on a save, the
daemon keeping what some cut uses). The engine's null block (what a
sliding-window group holds outside its window) is never loaded or saved.
A hybrid load is all or nothing: a shorter prefix than planned would need
other window blocks, so any failure fails the whole load.
"""

import logging
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from kvtier.engines.block_keys import (KvtierBlock, kvtier_block_count, kvtier_block_range,
                                      kvtier_blocks)

log = logging.getLogger("kvtier.engines")

# A load's engine block the engine never allocated: no block has this id, so
# the worker fails the load rather than leave the engine reading it.
MISSING = -1


@dataclass
class LoadOp:
    req_id: str
    first_index: int               # kvtier block index of keys[0]
    keys: List[bytes]
    engine_blocks: List[List[int]]  # per kvtier block, its engine block ids
    # Loaded in the background; the worker reports the request finished
    # (the request waits meanwhile and is not scheduled).
    asynchronous: bool = False
    # Hybrid models: per layer group 1.., each key's engine block (None: the
    # group moves nothing for that key). Non-empty: all or nothing.
    group_blocks: List[List[Optional[int]]] = field(default_factory=list)


@dataclass
class SaveOp:
    req_id: str
    first_index: int
    keys: List[bytes]
    parents: List[bytes]
    engine_blocks: List[List[int]]
    # The request's retention priority (0..100), if the engine gave one.
    retention: Optional[int] = None
    # Hybrid models: as LoadOp.group_blocks.
    group_blocks: List[List[Optional[int]]] = field(default_factory=list)


@dataclass
class StepPlan:
    loads: List[LoadOp] = field(default_factory=list)
    saves: List[SaveOp] = field(default_factory=list)
    # Requests whose failed loads the scheduler has taken into account: the
    # worker stops dropping their saves.
    acknowledged: List[str] = field(default_factory=list)
    # Loads the scheduler promised and could not plan (see abandon): the
    # worker reports their engine blocks failed (and taints the requests as
    # for a failed load), and these background loads finished, so the
    # engine recomputes rather than runs on blocks nobody loaded.
    failed_loads: List["FailedLoad"] = field(default_factory=list)
    failed_async: List[str] = field(default_factory=list)


@dataclass
class FailedLoad:
    req_id: str
    first_index: int  # the kvtier block the promised load began at
    engine_blocks: List[int]  # from there on


@dataclass
class RequestView:
    """What the scheduler side reads of an engine request."""
    req_id: str
    block_hashes: Sequence[bytes]
    num_publishable: int  # hashes that may be published (<= len(block_hashes))
    num_tokens: int       # prompt and output tokens so far
    retention: Optional[int] = None  # retention priority for its saves, 0..100


@dataclass
class ScheduledView:
    """One request of a step: its new engine blocks (replacing the old ones
    when `replace`, as for a resumed request) and its computed tokens before
    the step and scheduled in it."""
    req_id: str
    new_block_ids: Sequence[int]
    replace: bool
    num_computed: int
    num_scheduled: int
    # Hybrid models: the new engine blocks of layer groups 1.. (as for group 0).
    new_group_block_ids: Sequence[Sequence[int]] = ()


@dataclass
class _Tracked:
    view: RequestView
    block_ids: List[int] = field(default_factory=list)
    group_ids: List[List[int]] = field(default_factory=list)  # layer groups 1..
    saved: int = 0  # kvtier blocks [0, saved) are cached or being saved


class SchedulerState:
    """`lookup(keys)` returns how many leading keys the daemon holds (for a
    hybrid namespace: the longest cut every group can restore), raising on a
    daemon error, which counts as a miss. `windows`: per layer group 1.., 0
    for full attention or its sliding window in blocks."""

    def __init__(self, lookup: Callable[[List[bytes]], int], engine_block_tokens: int,
                 ratio: int, async_loads: bool = False, windows: Sequence[int] = ()):
        if engine_block_tokens < 1 or ratio < 1:
            raise ValueError("engine_block_tokens and ratio must be >= 1")
        if windows and ratio != 1:
            raise ValueError("layer groups need one engine block per kvtier block")
        if any(w < 0 for w in windows):
            raise ValueError("a window is a number of blocks")
        self._windows = list(windows)
        self.null_ids: Set[int] = set()  # the engine's null block(s): never moved
        self._lookup = lookup
        self._bs = engine_block_tokens
        self._ratio = ratio
        self._kb_tokens = engine_block_tokens * ratio
        self.async_loads = async_loads
        self._tracked: Dict[str, _Tracked] = {}
        self._loads: Dict[str, Tuple[int, int]] = {}  # req -> (first kvtier block, count)
        self._acks: List[str] = []
        self._fail = StepPlan()  # failures for the next plan (allocation_failed)
        # Requests whose block lists this side may have wrong (an
        # allocation it could not read, a plan it could not build): never
        # saved again; and those whose promised load awaits their blocks.
        self._broken: Set[str] = set()
        self._fail_later: Dict[str, int] = {}
        self._local: Dict[str, int] = {}  # req -> the engine's own hit, from match
        self.lookup_errors = 0

    def _blocks(self, view: RequestView) -> List[KvtierBlock]:
        return kvtier_blocks(view.block_hashes, self._ratio, view.num_publishable)

    def match(self, view: RequestView, num_computed: int) -> int:
        """External tokens the daemon can supply past `num_computed` (the
        engine's own hit)."""
        self._local[view.req_id] = num_computed
        if num_computed % self._kb_tokens:
            return 0  # the engine's own hit ends inside a kvtier block
        # At most the blocks that leave a token to compute. Only these are
        # looked up, so the daemon's answer is itself a cut it can restore
        # (for a hybrid, a shorter cut may lack its window).
        limit = min(len(self._blocks(view)), (view.num_tokens - 1) // self._kb_tokens)
        first = num_computed // self._kb_tokens
        if first >= limit:
            return 0
        try:
            hit = self._lookup([b.key for b in self._blocks(view)[:limit]])
        except Exception as e:  # a daemon error is a miss, never the engine's problem
            self.lookup_errors += 1
            log.warning("kvtier lookup failed, treating as a miss: %s", e)
            return 0
        return max(0, min(hit, limit) - first) * self._kb_tokens

    def allocated(self, view: RequestView, block_ids: Sequence[int], num_external: int,
                  group_block_ids: Sequence[Sequence[int]] = (),
                  null_ids: Iterable[int] = ()) -> None:
        """The engine allocated `block_ids` (all of the request's; of layer
        groups 1.. `group_block_ids`, with `null_ids` its null block) and will
        take `num_external` tokens from the daemon past its own hit (the last
        match's)."""
        self.null_ids.update(null_ids)
        num_computed = self._local.pop(view.req_id, 0)
        t = self._tracked.setdefault(view.req_id, _Tracked(view))
        t.view = view
        t.block_ids = list(block_ids)
        t.group_ids = self._group_lists(group_block_ids)
        # The engine's own hit was computed, and saved, by an earlier request.
        t.saved = max(t.saved, num_computed // self._kb_tokens)
        if num_external <= 0:
            return
        first = num_computed // self._kb_tokens
        count = num_external // self._kb_tokens
        self._loads[view.req_id] = (first, count)
        t.saved = max(t.saved, first + count)  # loaded blocks are cached already

    def build(self, scheduled: Sequence[ScheduledView],
              views: Dict[str, RequestView]) -> StepPlan:
        plan = self._next_plan()
        # Pending loads leave self._loads only once the plan is whole, so a
        # plan that fails half-way leaves abandon() every promised load.
        loads = dict(self._loads)
        for s in scheduled:
            t = self._tracked.get(s.req_id)
            if t is None:
                view = views.get(s.req_id)
                if view is None:
                    continue  # a request this side never saw: nothing to do
                t = self._tracked[s.req_id] = _Tracked(view)
            if s.req_id in views:
                t.view = views[s.req_id]
            new_groups = self._group_lists(s.new_group_block_ids)
            if s.replace:
                t.block_ids = list(s.new_block_ids)
                t.group_ids = new_groups
            else:
                t.block_ids.extend(s.new_block_ids)
                if not t.group_ids:
                    t.group_ids = [[] for _ in self._windows]
                for ids, new in zip(t.group_ids, new_groups):
                    ids.extend(new)
            if s.req_id in self._fail_later:  # its blocks are known now
                first = self._fail_later.pop(s.req_id)
                plan.failed_loads.append(FailedLoad(s.req_id, first,
                                                    t.block_ids[first * self._ratio:]))
            load = loads.pop(s.req_id, None)
            if load is not None and load[1] > 0:
                plan.loads.append(self._op(LoadOp, t, load[0], load[0] + load[1]))
            done_tokens = s.num_computed + s.num_scheduled
            upto = min(self._count(t.view), done_tokens // self._kb_tokens,
                       len(t.block_ids) // self._ratio)
            if upto > t.saved and s.req_id not in self._broken:
                plan.saves.append(self._op(SaveOp, t, t.saved, upto))
                t.saved = upto
        # Asynchronous loads: their requests wait, unscheduled, until the
        # workers report them finished.
        for req_id, (first, count) in loads.items():
            t = self._tracked.get(req_id)
            if t is not None and count > 0:
                plan.loads.append(self._op(LoadOp, t, first, first + count))
        self._loads.clear()
        return plan

    def _group_lists(self, ids: Sequence[Sequence[int]]) -> List[List[int]]:
        lists = [list(g) for g in ids]
        return lists + [[] for _ in range(len(self._windows) - len(lists))]

    def _group_blocks(self, t: _Tracked, begin: int, end: int,
                      load: bool) -> List[List[Optional[int]]]:
        """Per layer group 1.., the engine block of each key in [begin, end)
        it moves: a load's window of a sliding-window group is the last
        `window` keys; never the null block. A load's block the engine did
        not allocate is MISSING, which fails the load (the engine would read
        it); a save skips it."""
        out = []
        for window, ids in zip(self._windows, t.group_ids or [[] for _ in self._windows]):
            first = max(begin, end - window) if (load and window) else begin
            row: List[Optional[int]] = []
            for i in range(begin, end):
                if i < first or (i < len(ids) and ids[i] in self.null_ids):
                    row.append(None)
                elif i < len(ids):
                    row.append(ids[i])
                else:
                    row.append(MISSING if load else None)
            out.append(row)
        return out

    def _count(self, view: RequestView) -> int:
        return kvtier_block_count(len(view.block_hashes), self._ratio, view.num_publishable)

    def _op(self, kind, t: _Tracked, begin: int, end: int):
        blocks = kvtier_block_range(t.view.block_hashes, self._ratio, begin,
                                    min(end, self._count(t.view)))
        engine = [t.block_ids[b.index * self._ratio:(b.index + 1) * self._ratio] for b in blocks]
        groups = self._group_blocks(t, begin, begin + len(blocks), kind is LoadOp)
        if kind is LoadOp:
            return LoadOp(t.view.req_id, begin, [b.key for b in blocks], engine,
                          self.async_loads, groups)
        return SaveOp(t.view.req_id, begin, [b.key for b in blocks], [b.parent for b in blocks],
                      engine, t.view.retention, groups)

    def abandon(self) -> StepPlan:
        """A plan for a step whose real plan could not be built: every load
        the engine was promised is reported failed (the blocks it took
        them into, from their first), background ones finished; and as the
        step's new blocks were not all recorded, no request tracked now is
        saved again."""
        plan = self._next_plan()
        for req_id, (first, _) in self._loads.items():
            t = self._tracked.get(req_id)
            plan.failed_loads.append(FailedLoad(
                req_id, first, t.block_ids[first * self._ratio:] if t is not None else []))
            if self.async_loads:
                plan.failed_async.append(req_id)
        self._loads.clear()
        self._broken.update(self._tracked)
        return plan

    def allocation_failed(self, req_id: str, block_ids: Optional[Sequence[int]],
                          num_external: int) -> None:
        """The adapter could not read the engine's allocation for `req_id`
        (`block_ids`: its blocks, or None if unknown): the request is never
        saved, and a load promised to it (`num_external` > 0) is reported
        failed in the next plan (once its blocks are known)."""
        first = self._local.pop(req_id, 0) // self._kb_tokens
        self._loads.pop(req_id, None)
        self._broken.add(req_id)
        if num_external <= 0:
            return
        if block_ids is None:
            self._fail_later[req_id] = first
        else:
            self._fail.failed_loads.append(
                FailedLoad(req_id, first, list(block_ids[first * self._ratio:])))
        if self.async_loads:
            self._fail.failed_async.append(req_id)

    def _next_plan(self) -> StepPlan:
        plan = StepPlan(acknowledged=self._acks, failed_loads=self._fail.failed_loads,
                        failed_async=self._fail.failed_async)
        self._acks, self._fail = [], StepPlan()
        return plan

    def failed(self, engine_block_ids: Set[int]) -> None:
        """The engine reports blocks whose load failed: the requests using them
        save again from the first failed block once it is recomputed."""
        if not engine_block_ids:
            return
        for req_id, t in self._tracked.items():
            for i, b in enumerate(t.block_ids):
                if b in engine_block_ids:
                    t.saved = min(t.saved, i // self._ratio)
                    self._acks.append(req_id)
                    break

    def finished(self, req_id: str) -> None:
        self._tracked.pop(req_id, None)
        self._broken.discard(req_id)
        self._fail_later.pop(req_id, None)
        self._loads.pop(req_id, None)
        self._local.pop(req_id, None)

    def tracked(self) -> int:
        return len(self._tracked)

    def saved_upto(self, req_id: str) -> Optional[int]:
        t = self._tracked.get(req_id)
        return None if t is None else t.saved
