"""KvtierHiCacheStorage: SGLang's HiCacheStorage over kvtierd.

SGLang's HiCache controller keeps KV pages in a host pool and asks a storage
backend whether pages exist, to fetch them into host slots and to store them
from there. Pages are keyed by SGLang's chained SHA-256 hex keys (32 bytes
once decoded: kvtier keys as they are); a page's parent is the key before it
in the call, or for the first key the last of extra_info.prefix_keys, or the
key that preceded it in an earlier call, else none (stored as a root: a
later lookup across it stops there, a miss, never wrong bytes).

Both transfer paths are served: batch_get_v1 / batch_set_v1 (host indices
into the registered host pool; with "interface_v1": 1 in the extra config)
and the generic batch_get / batch_set (flat page tensors). A page's bytes
are read from and written to the pool's kv_buffer by its shape and strides
(kvtier.engines.kv_layout), through a staging region
(kvtier.engines.staged_transfer). The host layout and the path (v1 or
generic, whose page byte orders differ) are part of the namespace, so they
never share bytes.

MLA models: a page holds the latent of each layer (the pool's last
dimension), the same on every TP rank, so it lives in one latent namespace
(tp_rank 0 of 1) that every rank reads; rank 0 alone writes it, and the
other ranks' stores report the pages stored without sending them (as the
engine's other backends for MLA do).

Not yet: the v2 pool-transfer interface (hybrid pools).
"""

import logging
from collections import OrderedDict
from typing import Any, Dict, List, Optional, Sequence

from sglang.srt.mem_cache.hicache_storage import HiCacheStorage

from kvtier.client import Client
from kvtier.engines.block_keys import as_key
from kvtier.engines.kv_layout import (BlockLayout, LayoutError, Span, TensorGeometry,
                                     kvtier_dtype)
from kvtier.engines.staged_transfer import StagedTransfer
from kvtier.namespace_options import KvLayoutSpec, NamespaceOptions

log = logging.getLogger("kvtier.sglang")

_MAX_PARENTS = 1 << 16  # remembered key -> previous key, for first keys of later calls


def _key(key: str) -> bytes:
    try:
        raw = bytes.fromhex(key)
    except ValueError:
        raw = key.encode()
    return as_key(raw)


def _geometry(t: Any) -> TensorGeometry:
    return TensorGeometry(t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.element_size())


class KvtierHiCacheStorage(HiCacheStorage):
    def __init__(self, storage_config: Any, kwargs: Optional[Dict[str, Any]] = None):
        self._config = storage_config
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        extra.update(kwargs or {})
        self._extra = extra
        self._client = Client(str(extra.get("kvtier_address", "unix:/run/kvtier.sock")),
                              timeout=float(extra.get("kvtier_timeout_s", 10)),
                              max_reconnect_backoff_ms=1000)
        self._transfer: Optional[StagedTransfer] = None
        self._page_spans = None
        self._parents: "OrderedDict[bytes, bytes]" = OrderedDict()  # an LRU
        self.mem_pool_host: Any = None
        self._writes = True  # False on an MLA model's TP ranks > 0: rank 0 writes
        self.disabled_reason = "no host pool registered"

    # -- setup

    def register_mem_pool_host(self, mem_pool_host: Any) -> None:
        self.mem_pool_host = mem_pool_host
        if self._transfer is not None:  # a pool registered again
            self._transfer.close()
            self._transfer = None
        try:
            self._setup(mem_pool_host)
            self.disabled_reason = ""
        except Exception as e:  # SGLang runs on without the backend
            self.disabled_reason = str(e)
            log.error("kvtier HiCache backend disabled: %s", e)

    def _setup(self, pool: Any) -> None:
        dtype = kvtier_dtype(pool.dtype)
        if dtype is None:
            raise LayoutError(f"host pool dtype {pool.dtype} is not supported")
        ps, size = int(pool.page_size), int(pool.size)
        g = _geometry(pool.kv_buffer)
        if size in g.shape:  # a dimension of token slots: a page is ps of them
            slots = BlockLayout([g], size)
            self._page_spans = lambda first_slot: slots.run_spans(first_slot, ps)
            page_bytes = slots.block_bytes * ps
        else:  # a dimension of pages (page_first_direct)
            pages = BlockLayout([g], size // ps)
            self._page_spans = lambda first_slot: pages.spans(first_slot // ps)
            page_bytes = pages.block_bytes
        c = self._config
        mla = bool(getattr(c, "is_mla_model", False))
        # MLA: one latent per token and layer (kv_lora_rank + rope dims, the
        # pool's last dimension), the same on every rank.
        heads, dim = (1, int(g.shape[-1])) if mla else (int(pool.head_num), int(pool.head_dim))
        self._writes = not mla or int(c.tp_rank) == 0
        options = NamespaceOptions(
            model_id=str(getattr(c, "model_name", None) or "sglang"),
            layout=KvLayoutSpec(num_layers=int(pool.layer_num), num_kv_heads=heads,
                                head_dim=dim, dtype=dtype, tokens_per_block=ps,
                                tp_rank=0 if mla else int(c.tp_rank),
                                tp_size=1 if mla else int(c.tp_size), latent=mla),
            salt=(f"sglang;layout={getattr(pool, 'layout', 'layer_first')};"
                  f"io={'v1' if self._extra.get('interface_v1') else 'flat'};"
                  f"pp={getattr(c, 'pp_rank', 0)};cp={getattr(c, 'attn_cp_rank', 0)}").encode())
        self._transfer = StagedTransfer(
            self._client, lambda client: client.open_namespace_with(options).id, page_bytes,
            int(self._extra.get("kvtier_staging_mib", 64)) << 20)

    # -- parents

    def _parents_of(self, keys: List[bytes], extra_info: Any) -> List[bytes]:
        prefix = getattr(extra_info, "prefix_keys", None) if extra_info is not None else None
        first = _key(prefix[-1]) if prefix else self._parents.get(keys[0], b"")
        parents = [first] + keys[:-1]
        for k, p in zip(keys, parents):
            if p:
                self._parents[k] = p
                self._parents.move_to_end(k)
        while len(self._parents) > _MAX_PARENTS:
            self._parents.popitem(last=False)
        return parents

    # -- existence

    def batch_exists(self, keys: List[str], extra_info: Any = None) -> int:
        if self._transfer is None or not keys:
            return 0
        kv = [_key(k) for k in keys]
        self._parents_of(kv, extra_info)
        return self._transfer.lookup(kv)

    def exists(self, key: str) -> bool:
        return self.batch_exists([key]) == 1

    # -- zero-copy path: host indices into the registered pool

    def _transfer_v1(self, what: str, keys: List[str], host_indices: Any,
                     extra_info: Any) -> List[bool]:
        """A v1 get or set: the pages at host_indices[i * page_size]."""
        if self._transfer is None:
            return [False] * len(keys)
        if what == "set" and not self._writes:
            return [True] * len(keys)  # an MLA latent: rank 0 stores it
        try:
            ps = int(self.mem_pool_host.page_size)
            spans = [self._page_spans(int(host_indices[i * ps])) for i in range(len(keys))]
        except Exception as e:
            log.error("kvtier batch_%s_v1: %s", what, e)
            return [False] * len(keys)
        kv = [_key(k) for k in keys]
        if what == "get":
            done = self._transfer.load(kv, spans)
        else:
            done = self._transfer.save(kv, self._parents_of(kv, extra_info), spans)
        return [i < done for i in range(len(keys))]

    def batch_get_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Any = None) -> List[bool]:
        return self._transfer_v1("get", keys, host_indices, extra_info)

    def batch_set_v1(self, keys: List[str], host_indices: Any,
                     extra_info: Any = None) -> List[bool]:
        return self._transfer_v1("set", keys, host_indices, extra_info)

    # -- generic path: flat page tensors

    def _flat(self, t: Any) -> List[Span]:
        if hasattr(t, "is_contiguous") and not t.is_contiguous():
            raise LayoutError("a flat page tensor is not contiguous")
        return [(t.data_ptr(), t.numel() * t.element_size())]

    def batch_get(self, keys: List[str], target_locations: Optional[Sequence[Any]] = None,
                  target_sizes: Optional[Any] = None) -> List[Any]:
        if self._transfer is None or target_locations is None:
            return [None] * len(keys)
        try:
            spans = [self._flat(t) for t in target_locations]
        except Exception as e:
            log.error("kvtier batch_get: %s", e)
            return [None] * len(keys)
        done = self._transfer.load([_key(k) for k in keys], spans)
        return [t if i < done else None for i, t in enumerate(target_locations)]

    def get(self, key: str, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> Any:
        return self.batch_get([key], None if target_location is None else [target_location])[0]

    def batch_set(self, keys: List[str], values: Optional[Sequence[Any]] = None,
                  target_locations: Optional[Any] = None,
                  target_sizes: Optional[Any] = None) -> bool:
        if self._transfer is None or values is None:
            return False
        if not self._writes:
            return True  # an MLA latent: rank 0 stores it
        try:
            spans = [self._flat(v) for v in values]
        except Exception as e:
            log.error("kvtier batch_set: %s", e)
            return False
        kv = [_key(k) for k in keys]
        return self._transfer.save(kv, self._parents_of(kv, None), spans) == len(keys)

    def set(self, key: str, value: Optional[Any] = None, target_location: Optional[Any] = None,
            target_sizes: Optional[Any] = None) -> bool:
        return self.batch_set([key], None if value is None else [value])

    # -- the rest

    def clear(self) -> None:
        self._parents.clear()  # the daemon's blocks stay: other engines may share them

    def get_stats(self) -> None:
        """None: SGLang's storage metrics want its own StorageMetrics type;
        the transfer counts are in transfer_stats()."""
        return None

    def transfer_stats(self) -> Dict[str, int]:
        """Blocks loaded and saved, failures, daemon errors."""
        return {} if self._transfer is None else dict(self._transfer.stats)

    def close(self) -> None:
        if self._transfer is not None:
            self._transfer.close()
            self._transfer = None
        self._client.close()
