"""DaemonSession: one engine worker's namespace and registered region on
kvtierd, re-established after any daemon error.

Save, Load and Lookup run through call()/lookup(), which try twice: a
failure (the daemon restarted, its namespace or region is gone) drops the
registration (best effort) and the namespace, and the retry opens and
registers again. Errors never leave as exceptions: a call that failed twice
returns None (lookup: 0) and is counted in `stats["daemon_errors"]`.

Owner serializes: callers hold `lock` (the transfers do).
"""

import logging
import threading
from typing import Callable, Dict, List, Optional, Sequence

import grpc

from kvtier.client import BlockRef, Client, Completion, KvtierError

log = logging.getLogger("kvtier.engines")


class DaemonSession:
    def __init__(self, client: Client, open_namespace: Callable[[Client], str],
                 register: Callable[[Client], str]):
        self.client = client
        self._open_namespace = open_namespace
        self._register = register
        self._namespace: Optional[str] = None
        self._region: Optional[str] = None
        self.lock = threading.Lock()
        self.stats: Dict[str, int] = {"loaded_blocks": 0, "load_failures": 0, "saved_blocks": 0,
                                      "save_failures": 0, "daemon_errors": 0}

    def call(self, save: bool, refs: List[BlockRef],
             retention: Optional[int] = None) -> Optional[List[Completion]]:
        """A Save (or Load) of `refs` from (into) the region; None if the
        daemon failed it twice."""
        for attempt in range(2):
            try:
                if self._namespace is None:
                    self._namespace = self._open_namespace(self.client)
                if self._region is None:
                    self._region = self._register(self.client)
                if save:
                    return self.client.save(self._namespace, self._region, refs,
                                            retention_priority=retention)
                return self.client.load(self._namespace, self._region, refs)
            except Exception as e:  # never into the engine
                self.stats["daemon_errors"] += 1
                log.warning("kvtier %s failed (attempt %d): %s", "save" if save else "load",
                            attempt + 1, e)
                self.forget_region()
                self._namespace = None
        return None

    def leading(self, save: bool, refs: List[BlockRef], retention: Optional[int] = None,
                sizes: Optional[Sequence[int]] = None) -> int:
        """One Save (Load) of `refs`: how many leading blocks went through (a
        loaded block i must be `sizes[i]` bytes when given). Counts them and
        the failed rest of the call."""
        done = self.call(save, refs, retention)
        ok = {c.index for c in done or []
              if c.ok and (sizes is None or (c.index < len(sizes) and c.size == sizes[c.index]))}
        n = 0
        while n < len(refs) and n in ok:
            n += 1
        self.stats["saved_blocks" if save else "loaded_blocks"] += n
        self.stats["save_failures" if save else "load_failures"] += len(refs) - n
        return n

    def lookup(self, keys: Sequence[bytes]) -> int:
        """How many leading keys the daemon holds; 0 on a daemon error."""
        for attempt in range(2):
            try:
                if self._namespace is None:
                    self._namespace = self._open_namespace(self.client)
                return self.client.lookup(self._namespace, list(keys)).matched
            except Exception as e:
                self.stats["daemon_errors"] += 1
                log.warning("kvtier lookup failed (attempt %d): %s", attempt + 1, e)
                self._namespace = None
        return 0

    def check_region(self) -> str:
        """Registers the region now: "" when the daemon took it or could not
        be reached (a later call retries), else why it refused it (e.g. a
        daemon without CUDA, or one on another node, for GPU memory)."""
        with self.lock:
            if self._region is not None:
                return ""
            try:
                self._region = self._register(self.client)
            except KvtierError as e:
                if e.code in (grpc.StatusCode.FAILED_PRECONDITION,
                              grpc.StatusCode.INVALID_ARGUMENT,
                              grpc.StatusCode.PERMISSION_DENIED,
                              grpc.StatusCode.UNIMPLEMENTED):
                    return f"the daemon refused the KV memory: {e}"
            except Exception:
                pass
            return ""

    def forget_region(self) -> None:
        """Drops the registration (best effort: a restarted daemon has none),
        so a retry registers anew and nothing leaks on the daemon."""
        if self._region is None:
            return
        try:
            self.client.unregister_memory(self._region)
        except Exception:
            pass
        self._region = None
