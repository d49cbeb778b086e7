"""KvtierConnectorV1: vLLM's KVConnectorBase_V1 (and SupportsHMA) over kvtierd.

vLLM builds one instance in the scheduler process and one in each worker;
they share nothing but the picklable KvtierConnectorMetadata (a StepPlan)
going to the workers and KVConnectorOutput coming back. The scheduler side is
kvtier.engines.scheduler_state, the worker side kvtier.engines.worker_io;
this class converts vLLM's types to theirs.

Keys are vLLM's request.block_hashes (LoRA, multimodal inputs and cache_salt
are in them); reuse across engine restarts needs a stable hash
(--prefix-caching-hash-algo sha256_cbor) and a fixed PYTHONHASHSEED.

Configuration (kv_connector_extra_config):
  kvtier_address      the daemon ("host:port" or "unix:/path"; default
                      unix:/run/kvtier.sock)
  kvtier_block_ratio  vLLM blocks per kvtier block (default 1)
  kvtier_staging_mib  worker staging region size (default 64)
  kvtier_timeout_s    per-call timeout (default 10)
  kvtier_async_loads  load hits in the background while the request waits
                      (default false: loads run in start_load_kv)

Supported: one KV cache group of full attention in host memory
(FlashAttention and FlashInfer layouts, NHD or HND, cross-layer tensors),
synchronous or asynchronous loads.
Not yet: GPU tensors (they need CUDA IPC regions: the connector logs it and
stays a miss), MLA, several KV cache groups (hybrid models), per-layer loads
and saves.
"""

import logging
import os
from typing import Any, Dict, List, Optional, Set, Tuple

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1,
                                                                KVConnectorMetadata,
                                                                KVConnectorRole, SupportsHMA)

from kvtier.client import Client
from kvtier.engines.kv_layout import BlockLayout, LayoutError, TensorGeometry
from kvtier.engines.scheduler_state import (RequestView, ScheduledView, SchedulerState,
                                            StepPlan)
from kvtier.engines.staged_transfer import StagedTransfer
from kvtier.engines.worker_io import WorkerIO
from kvtier.namespace_options import KvLayoutSpec, NamespaceOptions
from kvtier.vllm.stats import KvtierConnectorStats

log = logging.getLogger("kvtier.vllm")

_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32",
           "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


class KvtierConnectorMetadata(KVConnectorMetadata):
    """One step's loads and saves, for the workers."""

    def __init__(self, plan: StepPlan):
        super().__init__()
        self.plan = plan


def _extra(vllm_config: Any, key: str, default: Any) -> Any:
    extra = getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None) or {}
    return extra.get(key, default)


def _namespace_options(vllm_config: Any, kv_cache_config: Any, tp_rank: int,
                       ratio: int) -> NamespaceOptions:
    groups = kv_cache_config.kv_cache_groups
    if len(groups) != 1:
        raise LayoutError(f"{len(groups)} KV cache groups: hybrid models are not supported yet")
    spec = groups[0].kv_cache_spec
    dtype = _DTYPES.get(str(spec.dtype).replace("torch.", ""))
    if dtype is None:
        raise LayoutError(f"KV cache dtype {spec.dtype} is not supported")
    parallel = vllm_config.parallel_config
    algo = getattr(vllm_config.cache_config, "prefix_caching_hash_algo", "sha256")
    seeded = "seeded" if os.environ.get("PYTHONHASHSEED") else "unseeded"
    return NamespaceOptions(
        model_id=str(vllm_config.model_config.model),
        layout=KvLayoutSpec(num_layers=len(groups[0].layer_names),
                            num_kv_heads=spec.num_kv_heads, head_dim=spec.head_size,
                            dtype=dtype, tokens_per_block=spec.block_size * ratio,
                            tp_rank=tp_rank, tp_size=parallel.tensor_parallel_size),
        # What makes equal hashes mean equal KV beyond the layout.
        salt=f"vllm;hash={algo};{seeded};pp={getattr(parallel, 'rank_in_pp', 0)}".encode())


def _request_view(request: Any) -> RequestView:
    hashes = list(request.block_hashes)
    publishable = getattr(request, "num_publishable_block_hashes", len(hashes))
    return RequestView(request.request_id, hashes, min(len(hashes), publishable),
                       request.num_tokens)


class KvtierConnectorV1(KVConnectorBase_V1, SupportsHMA):
    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._config = vllm_config
        self._kv_cache_config = kv_cache_config
        self._ratio = int(_extra(vllm_config, "kvtier_block_ratio", 1))
        address = str(_extra(vllm_config, "kvtier_address", "unix:/run/kvtier.sock"))
        self._client = Client(address, timeout=float(_extra(vllm_config, "kvtier_timeout_s", 10)),
                              max_reconnect_backoff_ms=1000)
        self._block_size = kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size
        self._scheduler: Optional[SchedulerState] = None
        self._worker: Optional[WorkerIO] = None
        self._views: Dict[str, RequestView] = {}
        self._load_errors: Set[int] = set()
        self._namespace: Optional[str] = None
        self.disabled_reason = ""
        self._async = bool(_extra(vllm_config, "kvtier_async_loads", False))
        if role == KVConnectorRole.SCHEDULER:
            self._scheduler = SchedulerState(self._lookup, self._block_size, self._ratio,
                                             self._async)

    # -- scheduler side

    def _open(self, client: Client, tp_rank: int = 0) -> str:
        options = _namespace_options(self._config, self._kv_cache_config, tp_rank, self._ratio)
        return client.open_namespace_with(options).id

    def _lookup(self, keys: List[bytes]) -> int:
        if self._namespace is None:
            self._namespace = self._open(self._client)
        try:
            return self._client.lookup(self._namespace, keys).matched
        except Exception:
            self._namespace = None  # re-open after a daemon restart
            raise

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        assert self._scheduler is not None
        view = _request_view(request)
        self._views[view.req_id] = view
        tokens = self._scheduler.match(view, num_computed_tokens)
        return tokens, self._async and tokens > 0

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        assert self._scheduler is not None
        view = _request_view(request)
        self._views[view.req_id] = view
        block_ids = blocks.get_block_ids()[0]
        self._scheduler.allocated(view, block_ids, num_external_tokens)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        assert self._scheduler is not None
        scheduled: List[ScheduledView] = []
        n = scheduler_output.num_scheduled_tokens
        for r in scheduler_output.scheduled_new_reqs:
            scheduled.append(ScheduledView(r.req_id, list(r.block_ids[0]), True,
                                           r.num_computed_tokens, n.get(r.req_id, 0)))
        cached = scheduler_output.scheduled_cached_reqs
        resumed = set(getattr(cached, "resumed_req_ids", None) or ())
        flags = getattr(cached, "resumed_from_preemption", None)
        for i, req_id in enumerate(cached.req_ids):
            new_ids = cached.new_block_ids[i]
            replace = req_id in resumed or bool(flags and flags[i])
            scheduled.append(ScheduledView(req_id, list(new_ids[0]) if new_ids else [], replace,
                                           cached.num_computed_tokens[i], n.get(req_id, 0)))
        return KvtierConnectorMetadata(self._scheduler.build(scheduled, self._views))

    def update_connector_output(self, connector_output: Any) -> None:
        if self._scheduler is not None:
            self._scheduler.failed(set(getattr(connector_output, "invalid_block_ids", None)
                                       or ()))

    def request_finished(self, request: Any,
                         block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        if self._scheduler is not None:
            self._scheduler.finished(request.request_id)
        self._views.pop(request.request_id, None)
        return False, None

    def request_finished_all_groups(
            self, request: Any,
            block_ids: Tuple[List[int], ...]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        return self.request_finished(request, list(block_ids[0]) if block_ids else [])

    # -- worker side

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        try:
            tensors = list(kv_caches.values())
            if any(getattr(t, "is_cuda", False) for t in tensors):
                raise LayoutError("GPU KV caches need CUDA IPC regions, not supported yet")
            seen, geometry = set(), []
            for t in tensors:
                if t.data_ptr() in seen:  # layers sharing one tensor
                    continue
                seen.add(t.data_ptr())
                geometry.append(TensorGeometry(t.data_ptr(), tuple(t.shape), tuple(t.stride()),
                                               t.element_size()))
            layout = BlockLayout(geometry, self._kv_cache_config.num_blocks)
            rank = int(_extra(self._config, "kvtier_tp_rank", _tp_rank()))
            transfer = StagedTransfer(self._client, lambda c: self._open(c, rank),
                                      layout.block_bytes * self._ratio,
                                      int(_extra(self._config, "kvtier_staging_mib", 64)) << 20)
            self._worker = WorkerIO(transfer, layout, self._ratio)
        except Exception as e:  # the engine runs on, without the cache
            self.disabled_reason = str(e)
            log.error("kvtier connector disabled: %s", e)

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        meta = self._connector_metadata
        if self._worker is None or not isinstance(meta, KvtierConnectorMetadata):
            return
        self._load_errors |= self._worker.load(meta.plan.loads)

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None  # loads complete in start_load_kv

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        return None  # whole blocks are saved in wait_for_save

    def wait_for_save(self) -> None:
        meta = self._connector_metadata
        if self._worker is None or not isinstance(meta, KvtierConnectorMetadata):
            return
        self._worker.save(meta.plan)

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        """(finished sending, finished receiving): saves complete within the
        step; background loads that ended since the last call (their failed
        blocks are reported by get_block_ids_with_load_errors in the same
        pass)."""
        if self._worker is None:
            return None, None
        done, failed = self._worker.finished_loads()
        self._load_errors |= failed
        return None, done or None

    def get_block_ids_with_load_errors(self) -> Set[int]:
        out, self._load_errors = self._load_errors, set()
        return out

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[Dict[str, Any]] = None
                                 ) -> Optional[KvtierConnectorStats]:
        return KvtierConnectorStats(data=dict(data or {}))

    def get_kv_connector_stats(self) -> Optional[KvtierConnectorStats]:
        """The worker's counts since the last call (None when nothing moved)."""
        if self._worker is None:
            return None
        stats = KvtierConnectorStats(data=self._worker.take_stats())
        return None if stats.is_empty() else stats

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._client.close()


def _tp_rank() -> int:
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank
        return int(get_tensor_model_parallel_rank())
    except Exception:
        return 0
