"""StagedTransfer: kvtier blocks between engine memory and the daemon through
a shared-memory staging region the daemon reads and writes.

A block is given as its key and its spans in engine memory (address, bytes;
see kv_layout): a save gathers the spans into the region and Saves, a load
Loads into the region and scatters. Daemon errors never leave this class as
exceptions: a failed load or save is reported by how many leading blocks
went through, and counted. After an error the namespace is opened and the
region registered again on the next call, so a daemon restart costs the
blocks in flight, not the engine.
"""

import ctypes
import logging
from typing import Callable, Optional, Sequence

from kvtier.client import BlockRef, Client, SharedRegion
from kvtier.engines.block_batches import batches, block_sizes, group_block_bytes
from kvtier.engines.daemon_session import DaemonSession
from kvtier.engines.kv_layout import Span

log = logging.getLogger("kvtier.engines")


class StagedTransfer:
    """`group_bytes`: a hybrid namespace's block bytes per layer group (group
    0's is `block_bytes`); calls then name each block's group."""

    def __init__(self, client: Client, open_namespace: Callable[[Client], str], block_bytes: int,
                 staging_bytes: int = 64 << 20, staging_dir: str = "/dev/shm",
                 group_bytes: Optional[Sequence[int]] = None):
        self.group_bytes = group_block_bytes(block_bytes, group_bytes)
        self.block_bytes = block_bytes
        self._slot = max(self.group_bytes)
        self._per_batch = max(1, staging_bytes // self._slot)
        self._staging = SharedRegion(self._per_batch * self._slot, staging_dir)
        self._staging_view = ctypes.c_char.from_buffer(self._staging.buffer)
        self._staging_address = ctypes.addressof(self._staging_view)
        self._session = DaemonSession(
            client, open_namespace,
            lambda c: c.register_memory(self._staging.path, self._staging.size))
        # One user of the staging region at a time (a background load and a
        # save of the engine's step).
        self.lock = self._session.lock
        self.stats = self._session.stats

    def _copy(self, spans: Sequence[Span], slot: int, to_staging: bool) -> None:
        at = self._staging_address + slot * self._slot
        for address, size in spans:
            if to_staging:
                ctypes.memmove(at, address, size)
            else:
                ctypes.memmove(address, at, size)
            at += size

    def load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]],
             groups: Optional[Sequence[int]] = None, synchronise: bool = True) -> int:
        """Loads blocks in order until one fails; returns how many loaded.
        `groups`: each block's layer group (hybrid namespaces). Host
        memory needs no `synchronise`."""
        with self.lock:
            return self._load(keys, spans, groups)

    def _load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]],
              groups: Optional[Sequence[int]] = None) -> int:
        sizes = block_sizes(self.group_bytes, len(keys), spans, groups)
        if sizes is None:
            self.stats["load_failures"] += len(keys)
            return 0
        for idx in batches(keys, self._per_batch):
            if len(idx) > self._per_batch:  # one key's blocks outgrow the staging
                self.stats["load_failures"] += len(keys) - idx.start
                return idx.start
            refs = [BlockRef(keys[i], slot * self._slot, sizes[i],
                             group=groups[i] if groups else 0) for slot, i in enumerate(idx)]
            n = self._session.leading(False, refs, sizes=[sizes[i] for i in idx])
            for slot in range(n):
                self._copy(spans[idx.start + slot], slot, to_staging=False)
            if n < len(refs):
                self.stats["load_failures"] += len(keys) - idx.stop
                return idx.start + n
        return len(keys)

    def save(self, keys: Sequence[bytes], parents: Sequence[bytes],
             spans: Sequence[Sequence[Span]], retention: Optional[int] = None,
             groups: Optional[Sequence[int]] = None) -> int:
        """Saves blocks in order until one fails (the next ones would lack
        their parent); returns how many are cached. `retention`: the
        blocks' retention priority (0..100), or None for the daemon's.
        `groups`: each block's layer group; a key's blocks go in one call."""
        with self.lock:
            return self._save(keys, parents, spans, retention, groups)

    def _save(self, keys: Sequence[bytes], parents: Sequence[bytes],
              spans: Sequence[Sequence[Span]], retention: Optional[int] = None,
              groups: Optional[Sequence[int]] = None) -> int:
        sizes = block_sizes(self.group_bytes, len(keys), spans, groups)
        if sizes is None or len(parents) != len(keys):
            self.stats["save_failures"] += len(keys)
            return 0
        for idx in batches(keys, self._per_batch):
            if len(idx) > self._per_batch:
                self.stats["save_failures"] += len(keys) - idx.start
                return idx.start
            for slot, i in enumerate(idx):
                self._copy(spans[i], slot, to_staging=True)
            refs = [BlockRef(keys[i], slot * self._slot, sizes[i], parent_key=parents[i],
                             group=groups[i] if groups else 0) for slot, i in enumerate(idx)]
            n = self._session.leading(True, refs, retention)
            if n < len(refs):  # the later blocks would lack their parent
                self.stats["save_failures"] += len(keys) - idx.stop
                return idx.start + n
        return len(keys)

    def lookup(self, keys: Sequence[bytes]) -> int:
        """How many leading keys the daemon holds; 0 on a daemon error."""
        with self.lock:
            return self._lookup(keys)

    def _lookup(self, keys: Sequence[bytes]) -> int:
        return self._session.lookup(keys)

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        self._session.forget_region()
        del self._staging_view
        self._staging.close()
