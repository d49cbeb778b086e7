"""DirectTransfer: kvtier blocks moved by the daemon straight between its
tiers and the engine's own KV memory, registered once as a region (GPU
tensors by CUDA IPC, see cuda_region.py; any memory the daemon can map).

The region is the engine's memory pieces laid end to end, as the daemon
addresses a registered CUDA IPC region (piece i starts at the sum of the
sizes before it). A block's spans (kv_layout) become the segments of one
BlockRef: the daemon gathers them on Save and scatters into them on Load,
with no staging copy. `before_daemon_reads` runs before every Save and Load
(for GPU memory: every stream of the device is synchronised, so the daemon
reads finished KV and overwrites no block a kernel still reads).

Failures are counts, never exceptions, as for StagedTransfer (the same
DaemonSession re-opens and re-registers after a daemon error).
"""

import bisect
import logging
from typing import Callable, List, Optional, Sequence, Tuple

from kvtier.client import BlockRef, Client
from kvtier.engines.block_batches import batches, block_sizes, group_block_bytes
from kvtier.engines.daemon_session import DaemonSession
from kvtier.engines.kv_layout import LayoutError, Span

log = logging.getLogger("kvtier.engines")

MAX_SEGMENTS = 1024  # per block (BlockRef.segments)
_BLOCKS_PER_CALL = 256


class RegionSpace:
    """Engine memory pieces (address, bytes) laid end to end as one region."""

    def __init__(self, pieces: Sequence[Tuple[int, int]]):
        if not pieces:
            raise LayoutError("no memory to register")
        order = sorted(range(len(pieces)), key=lambda i: pieces[i][0])
        self.pieces = list(pieces)
        self.size = 0
        offsets = []
        for address, size in pieces:
            if size < 1:
                raise LayoutError(f"an empty memory piece at {address:#x}")
            offsets.append(self.size)
            self.size += size
        self._starts = [pieces[i][0] for i in order]
        self._ends = [pieces[i][0] + pieces[i][1] for i in order]
        self._offsets = [offsets[i] for i in order]
        for a, b in zip(self._ends, self._starts[1:]):
            if b < a:
                raise LayoutError("registered memory pieces overlap")

    def segments(self, spans: Sequence[Span]) -> List[Tuple[int, int]]:
        """Region (offset, size) pieces of a block's spans, adjacent ones
        merged; LayoutError for a span outside one piece."""
        out: List[Tuple[int, int]] = []
        for address, size in spans:
            k = bisect.bisect_right(self._starts, address) - 1
            if k < 0 or address + size > self._ends[k]:
                raise LayoutError(f"bytes [{address:#x}, +{size}) are outside the registered "
                                  "KV memory")
            offset = self._offsets[k] + address - self._starts[k]
            if out and out[-1][0] + out[-1][1] == offset:
                out[-1] = (out[-1][0], out[-1][1] + size)
            else:
                out.append((offset, size))
        if len(out) > MAX_SEGMENTS:
            raise LayoutError(f"a block is {len(out)} pieces; the daemon takes at most "
                              f"{MAX_SEGMENTS}")
        return out


class DirectTransfer:
    """`group_bytes`: a hybrid namespace's block bytes per layer group (group
    0's is `block_bytes`); calls then name each block's group."""

    def __init__(self, client: Client, open_namespace: Callable[[Client], str],
                 register: Callable[[Client], str], space: RegionSpace, block_bytes: int,
                 before_daemon_reads: Callable[[], None] = lambda: None,
                 group_bytes: Optional[Sequence[int]] = None):
        self.group_bytes = group_block_bytes(block_bytes, group_bytes)
        self.block_bytes = block_bytes
        self._space = space
        self._sync = before_daemon_reads
        self._session = DaemonSession(client, open_namespace, register)
        self.lock = self._session.lock
        self.stats = self._session.stats

    def _refs(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]],
              parents: Optional[Sequence[bytes]],
              groups: Optional[Sequence[int]]) -> Optional[List[BlockRef]]:
        if (parents is not None and len(parents) != len(keys)) or \
                block_sizes(self.group_bytes, len(keys), spans, groups) is None:
            return None
        try:
            return [BlockRef(k, 0, 0, parent_key=parents[i] if parents is not None else b"",
                             segments=self._space.segments(spans[i]),
                             group=groups[i] if groups else 0)
                    for i, k in enumerate(keys)]
        except LayoutError as e:
            log.error("kvtier: %s", e)
            return None

    def _run(self, save: bool, refs: Optional[List[BlockRef]], count: int,
             retention: Optional[int] = None, synchronise: bool = True) -> int:
        failures = "save_failures" if save else "load_failures"
        if refs is None:
            self.stats[failures] += count
            return 0
        try:
            if synchronise:
                self._sync()
        except Exception as e:  # the engine's device is gone: nothing moves
            log.error("kvtier: synchronising the engine's stream: %s", e)
            self.stats[failures] += count
            return 0
        for idx in batches([r.key for r in refs], _BLOCKS_PER_CALL):
            batch = refs[idx.start:idx.stop]
            sizes = None if save else [self.group_bytes[r.group] for r in batch]
            n = self._session.leading(save, batch, retention, sizes=sizes)
            if n < len(batch):  # a save's later blocks would lack their parent
                self.stats[failures] += count - idx.stop
                return idx.start + n
        return count

    def load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]],
             groups: Optional[Sequence[int]] = None, synchronise: bool = True) -> int:
        """Loads blocks in order until one fails; returns how many loaded.
        `groups`: each block's layer group (hybrid namespaces).
        `synchronise` False: the caller synchronised the device since the
        last kernels that could read these blocks were queued."""
        with self.lock:
            return self._run(False, self._refs(keys, spans, None, groups), len(keys),
                             synchronise=synchronise)

    def save(self, keys: Sequence[bytes], parents: Sequence[bytes],
             spans: Sequence[Sequence[Span]], retention: Optional[int] = None,
             groups: Optional[Sequence[int]] = None) -> int:
        """Saves blocks in order until one fails; returns how many are cached.
        `groups`: each block's layer group; a key's blocks go in one call."""
        with self.lock:
            return self._run(True, self._refs(keys, spans, parents, groups), len(keys),
                             retention)

    def check(self, spans: Sequence[Span]) -> str:
        """Why this transfer cannot serve the engine ("" when it can): a
        block of `spans` the daemon would refuse, or a region it refuses."""
        try:
            self._space.segments(spans)
        except LayoutError as e:
            return str(e)
        return self._session.check_region()

    def lookup(self, keys: Sequence[bytes]) -> int:
        with self.lock:
            return self._session.lookup(keys)

    def close(self) -> None:
        with self.lock:
            self._session.forget_region()
