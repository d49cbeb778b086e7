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
import threading
from typing import Callable, Dict, List, Optional, Sequence

from kvtier.client import BlockRef, Client, Completion, SharedRegion
from kvtier.engines.kv_layout import Span

log = logging.getLogger("kvtier.engines")


class StagedTransfer:
    def __init__(self, client: Client, open_namespace: Callable[[Client], str], block_bytes: int,
                 staging_bytes: int = 64 << 20, staging_dir: str = "/dev/shm"):
        if block_bytes < 1:
            raise ValueError("block_bytes must be positive")
        self._client = client
        self._open_namespace = open_namespace
        self.block_bytes = block_bytes
        self._per_batch = max(1, staging_bytes // block_bytes)
        self._staging = SharedRegion(self._per_batch * block_bytes, staging_dir)
        self._staging_view = ctypes.c_char.from_buffer(self._staging.buffer)
        self._staging_address = ctypes.addressof(self._staging_view)
        self._namespace: Optional[str] = None
        self._region: Optional[str] = None
        # One user of the staging region at a time (a background load and a
        # save of the engine's step).
        self.lock = threading.Lock()
        self.stats: Dict[str, int] = {"loaded_blocks": 0, "load_failures": 0, "saved_blocks": 0,
                                      "save_failures": 0, "daemon_errors": 0}

    def _call(self, save: bool, refs: List[BlockRef],
              retention: Optional[int] = None) -> Optional[List[Completion]]:
        for attempt in range(2):
            try:
                if self._namespace is None:
                    self._namespace = self._open_namespace(self._client)
                if self._region is None:
                    self._region = self._client.register_memory(self._staging.path,
                                                                self._staging.size)
                if save:
                    return self._client.save(self._namespace, self._region, refs,
                                             retention_priority=retention)
                return self._client.load(self._namespace, self._region, refs)
            except Exception as e:  # never into the engine
                self.stats["daemon_errors"] += 1
                log.warning("kvtier %s failed (attempt %d): %s", "save" if save else "load",
                            attempt + 1, e)
                self._forget_region()
                self._namespace = None
        return None

    def _forget_region(self) -> None:
        """Drops the registration (best effort: a restarted daemon has none),
        so a retry registers anew and nothing leaks on the daemon."""
        if self._region is None:
            return
        try:
            self._client.unregister_memory(self._region)
        except Exception:
            pass
        self._region = None

    def _copy(self, spans: Sequence[Span], slot: int, to_staging: bool) -> None:
        at = self._staging_address + slot * self.block_bytes
        for address, size in spans:
            if to_staging:
                ctypes.memmove(at, address, size)
            else:
                ctypes.memmove(address, at, size)
            at += size

    def _fits(self, spans: Sequence[Sequence[Span]]) -> bool:
        for block in spans:
            if sum(size for _, size in block) != self.block_bytes:
                log.error("kvtier: a block's spans hold %d bytes, not %d",
                          sum(size for _, size in block), self.block_bytes)
                return False
        return True

    def load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]]) -> int:
        """Loads blocks in order until one fails; returns how many loaded."""
        with self.lock:
            return self._load(keys, spans)

    def _load(self, keys: Sequence[bytes], spans: Sequence[Sequence[Span]]) -> int:
        if len(spans) != len(keys) or not self._fits(spans):
            self.stats["load_failures"] += len(keys)
            return 0
        for start in range(0, len(keys), self._per_batch):
            idx = range(start, min(len(keys), start + self._per_batch))
            refs = [BlockRef(keys[i], slot * self.block_bytes, self.block_bytes)
                    for slot, i in enumerate(idx)]
            done = self._call(False, refs)
            ok = {c.index for c in done or [] if c.ok and c.size == self.block_bytes}
            for slot, i in enumerate(idx):
                if slot not in ok:
                    self.stats["load_failures"] += len(keys) - i
                    return i
                self._copy(spans[i], slot, to_staging=False)
                self.stats["loaded_blocks"] += 1
        return len(keys)

    def save(self, keys: Sequence[bytes], parents: Sequence[bytes],
             spans: Sequence[Sequence[Span]], retention: Optional[int] = None) -> int:
        """Saves blocks in order until one fails (the next ones would lack
        their parent); returns how many are cached. `retention`: the
        blocks' retention priority (0..100), or None for the daemon's."""
        with self.lock:
            return self._save(keys, parents, spans, retention)

    def _save(self, keys: Sequence[bytes], parents: Sequence[bytes],
              spans: Sequence[Sequence[Span]], retention: Optional[int] = None) -> int:
        if len(spans) != len(keys) or len(parents) != len(keys) or not self._fits(spans):
            self.stats["save_failures"] += len(keys)
            return 0
        for start in range(0, len(keys), self._per_batch):
            idx = range(start, min(len(keys), start + self._per_batch))
            for slot, i in enumerate(idx):
                self._copy(spans[i], slot, to_staging=True)
            refs = [BlockRef(keys[i], slot * self.block_bytes, self.block_bytes,
                             parent_key=parents[i]) for slot, i in enumerate(idx)]
            done = self._call(True, refs, retention)
            ok = {c.index for c in done or [] if c.ok}
            for slot, i in enumerate(idx):
                if slot not in ok:
                    self.stats["save_failures"] += len(keys) - i
                    return i
                self.stats["saved_blocks"] += 1
        return len(keys)

    def lookup(self, keys: Sequence[bytes]) -> int:
        """How many leading keys the daemon holds; 0 on a daemon error."""
        with self.lock:
            return self._lookup(keys)

    def _lookup(self, keys: Sequence[bytes]) -> int:
        for attempt in range(2):
            try:
                if self._namespace is None:
                    self._namespace = self._open_namespace(self._client)
                return self._client.lookup(self._namespace, list(keys)).matched
            except Exception as e:
                self.stats["daemon_errors"] += 1
                log.warning("kvtier lookup failed (attempt %d): %s", attempt + 1, e)
                self._namespace = None
        return 0

    def close(self) -> None:
        with self.lock:
            self._close()

    def _close(self) -> None:
        self._forget_region()
        del self._staging_view
        self._staging.close()
