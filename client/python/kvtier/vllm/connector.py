"""KvtierConnectorV1: vLLM's KVConnectorBase_V1 (and SupportsHMA) over kvtierd.

vLLM builds one instance in the scheduler process and one in each worker;
they share nothing but the picklable KvtierConnectorMetadata (a StepPlan)
going to the workers and KVConnectorOutput coming back. The scheduler side is
kvtier.engines.scheduler_state, the worker side kvtier.engines.worker_io;
this class converts vLLM's types to theirs, and keeps every daemon or layout
failure inside: a miss, a failed load vLLM recomputes, a dropped save.

Keys are vLLM's request.block_hashes (LoRA, multimodal inputs and cache_salt
are in them); reuse across engine restarts needs a stable hash
(--prefix-caching-hash-algo sha256_cbor) and a fixed PYTHONHASHSEED.

Configuration (kv_connector_extra_config):
  kvtier_address            the daemon ("host:port" or "unix:/path"; default
                            unix:/run/kvtier.sock)
  kvtier_block_ratio        vLLM blocks per kvtier block (default 1)
  kvtier_staging_mib        worker staging region size, host KV caches (default 64)
  kvtier_cuda_device        the daemon's ordinal of the worker's GPU (default:
                            the worker's device through CUDA_VISIBLE_DEVICES)
  kvtier_timeout_s          per transfer call (default 10)
  kvtier_lookup_timeout_s   per scheduler lookup (default 0.5; after a failed
                            lookup the scheduler misses for a second)
  kvtier_async_loads        load hits in the background while the request
                            waits (default false: loads run in start_load_kv)
  kvtier_layer_groups       N > 1: layer-wise loads; the layers are stored as N
                            groups (at most 16) and a step's loads bring one
                            group after another while the forward pass runs,
                            wait_for_layer_load waiting for its layer's group
                            (default 1: whole blocks before the forward pass)

Supported: one KV cache group of full attention (FlashAttention and
FlashInfer layouts, NHD or HND) or of MLA (the latent cache, the same on
every TP rank: stored once, by rank 0, in a latent namespace every rank
loads from); hybrid models of full-attention and sliding-window groups
(kv_groups.py: one daemon layer group per vLLM group; a sliding-window
group loads only the window its cut needs and never moves vLLM's null
block; a hybrid load is all or nothing); KV caches on the GPU (registered
once by CUDA IPC; the daemon copies blocks to and from them itself, after
the device's streams are synchronised) or in host memory (through a
shared-memory staging region); synchronous or asynchronous loads; tensor
parallelism; layer-wise loads (kvtier_layer_groups). Not yet: recurrent
(Mamba) groups, pipeline and decode context parallelism, per-layer saves;
the scheduler side refuses what it can see at construction (it then never
reports a hit), and a worker that cannot serve its loads reports them
failed.
"""

import logging
import os
import time
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorBase_V1,
                                                                KVConnectorMetadata,
                                                                KVConnectorRole, SupportsHMA)

from kvtier.client import Client
from kvtier.engines.kv_layout import BlockLayout, LayoutError, TensorGeometry, kvtier_dtype
from kvtier.engines.scheduler_state import (RequestView, ScheduledView, SchedulerState,
                                            StepPlan)
from kvtier.engines.cuda_region import cuda_region
from kvtier.engines.direct_transfer import DirectTransfer
from kvtier.engines.staged_transfer import StagedTransfer
from kvtier.engines.worker_io import BlockTransfer, WorkerIO
from kvtier.namespace_options import KvLayoutSpec, NamespaceOptions
from kvtier.vllm.kv_groups import KvGroups, kv_groups
from kvtier.vllm.stats import KvtierConnectorStats

log = logging.getLogger("kvtier.vllm")

_LOOKUP_BACKOFF_S = 1.0


class KvtierConnectorMetadata(KVConnectorMetadata):
    """One step's loads and saves, for the workers."""

    def __init__(self, plan: StepPlan):
        super().__init__()
        self.plan = plan


def _extra(vllm_config: Any, key: str, default: Any) -> Any:
    extra = getattr(vllm_config.kv_transfer_config, "kv_connector_extra_config", None) or {}
    return extra.get(key, default)


def _layer_groups(vllm_config: Any) -> int:
    return int(_extra(vllm_config, "kvtier_layer_groups", 1))


def _namespace_options(vllm_config: Any, kv_cache_config: Any, tp_rank: int,
                       ratio: int) -> NamespaceOptions:
    """The namespace of one TP rank; LayoutError for what is not supported."""
    groups = kv_groups(kv_cache_config, ratio, _layer_groups(vllm_config))
    spec = kv_cache_config.kv_cache_groups[0].kv_cache_spec
    dtype = kvtier_dtype(spec.dtype)
    if dtype is None:
        raise LayoutError(f"KV cache dtype {spec.dtype} is not supported")
    mla = _is_mla(vllm_config, spec)
    if mla and int(spec.num_kv_heads) != 1:
        raise LayoutError(f"an MLA cache with {spec.num_kv_heads} heads (expected one latent)")
    if mla and groups.layer_groups:
        raise LayoutError("MLA with layer groups (a hybrid model or kvtier_layer_groups) is "
                          "not supported yet")
    parallel = vllm_config.parallel_config
    for name in ("pipeline_parallel_size", "decode_context_parallel_size"):
        if int(getattr(parallel, name, 1) or 1) > 1:
            raise LayoutError(f"{name} > 1 is not supported yet")
    algo = getattr(vllm_config.cache_config, "prefix_caching_hash_algo", "sha256")
    seeded = "seeded" if os.environ.get("PYTHONHASHSEED") else "unseeded"
    # An MLA latent is the same on every TP rank: one namespace for all.
    return NamespaceOptions(
        model_id=str(vllm_config.model_config.model),
        layout=KvLayoutSpec(num_layers=groups.num_layers,
                            num_kv_heads=spec.num_kv_heads, head_dim=spec.head_size,
                            dtype=dtype, tokens_per_block=spec.block_size * ratio,
                            tp_rank=0 if mla else tp_rank,
                            tp_size=1 if mla else parallel.tensor_parallel_size, latent=mla,
                            groups=groups.layer_groups),
        # What makes equal hashes mean equal KV beyond the layout.
        salt=f"vllm;hash={algo};{seeded}".encode())


def _is_mla(vllm_config: Any, spec: Any) -> bool:
    """An MLA cache: vLLM's MLAAttentionSpec (one latent head per token)."""
    return (type(spec).__name__ == "MLAAttentionSpec"
            or bool(getattr(vllm_config.model_config, "use_mla", False)))


def _retention(request: Any) -> Optional[int]:
    """The request's "kvtier_retention_priority" (0..100) from its
    kv_transfer_params (vLLM takes them from sampling_params.extra_args);
    None, with a warning, for anything else."""
    params = getattr(request, "kv_transfer_params", None)
    if not isinstance(params, dict) or "kvtier_retention_priority" not in params:
        return None
    p = params["kvtier_retention_priority"]
    if isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= 100:
        return p
    log.warning("request %s: kvtier_retention_priority %r is not an integer in 0..100; ignored",
                request.request_id, p)
    return None


def _request_view(request: Any) -> RequestView:
    hashes = request.block_hashes
    publishable = getattr(request, "num_publishable_block_hashes", len(hashes))
    return RequestView(request.request_id, hashes, min(len(hashes), publishable),
                       request.num_tokens, _retention(request))


class KvtierConnectorV1(KVConnectorBase_V1, SupportsHMA):
    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        super().__init__(vllm_config, role, kv_cache_config)
        self._config = vllm_config
        self._kv_cache_config = kv_cache_config
        scheduler = role == KVConnectorRole.SCHEDULER
        self.disabled_reason = ""
        # Defaults a bad configuration falls back to (the connector disabled).
        self._ratio, self._async, self._block_size = 1, False, 16
        address, timeout = "unix:/run/kvtier.sock", 10.0
        try:
            self._ratio = int(_extra(vllm_config, "kvtier_block_ratio", 1))
            if self._ratio < 1:
                raise ValueError(f"kvtier_block_ratio {self._ratio} must be >= 1")
            self._async = bool(_extra(vllm_config, "kvtier_async_loads", False))
            address = str(_extra(vllm_config, "kvtier_address", address))
            timeout = float(_extra(vllm_config, "kvtier_lookup_timeout_s", 0.5)) if scheduler \
                else float(_extra(vllm_config, "kvtier_timeout_s", 10))
            self._block_size = int(kv_cache_config.kv_cache_groups[0].kv_cache_spec.block_size)
        except Exception as e:
            self._ratio = max(1, self._ratio) if isinstance(self._ratio, int) else 1
            self.disabled_reason = f"configuration: {e}"
        self._client = Client(address, timeout=timeout, max_reconnect_backoff_ms=1000)
        self._scheduler: Optional[SchedulerState] = None
        self._worker: Optional[WorkerIO] = None
        self._requests: Dict[str, Any] = {}  # scheduler side: the live requests
        self._load_errors: Set[int] = set()
        self._failed_async: Set[str] = set()  # background loads a disabled worker never ran
        self._namespace: Optional[str] = None
        self._lookup_retry_at = 0.0
        self._saves = True  # False on the TP ranks > 0 of an MLA model
        self._groups = KvGroups()
        try:  # what the scheduler can see now; the workers find the rest
            if self.disabled_reason:
                raise LayoutError(self.disabled_reason)
            _namespace_options(vllm_config, kv_cache_config, 0, self._ratio)
            self._groups = kv_groups(kv_cache_config, self._ratio, _layer_groups(vllm_config))
        except Exception as e:  # the engine runs on, without the cache
            self.disabled_reason = str(e) or type(e).__name__
            log.error("kvtier connector disabled: %s", self.disabled_reason)
        # Layer-wise loads: per layer, its daemon layer group; the layers the
        # engine waited for in this step.
        self._layer_group = {name: g for g, names in enumerate(self._groups.layer_names)
                             for name in names}
        self._layerwise = self._groups.layerwise
        self._group_loads_running = False
        self._waited: Set[str] = set()
        if scheduler:
            self._scheduler = SchedulerState(self._lookup, self._block_size, self._ratio,
                                             self._async, self._groups.windows)

    # -- scheduler side

    def _open(self, client: Client, tp_rank: int = 0) -> str:
        options = _namespace_options(self._config, self._kv_cache_config, tp_rank, self._ratio)
        return client.open_namespace_with(options).id

    def _lookup(self, keys: List[bytes]) -> int:
        if self.disabled_reason:
            return 0
        if time.monotonic() < self._lookup_retry_at:
            raise RuntimeError("the daemon failed a lookup less than a second ago")
        try:
            if self._namespace is None:
                self._namespace = self._open(self._client)
            return self._client.lookup(self._namespace, keys).matched
        except Exception:
            self._namespace = None  # re-open after a daemon restart
            self._lookup_retry_at = time.monotonic() + _LOOKUP_BACKOFF_S
            raise

    def get_num_new_matched_tokens(self, request: Any,
                                   num_computed_tokens: int) -> Tuple[Optional[int], bool]:
        assert self._scheduler is not None
        self._requests[request.request_id] = request
        tokens = self._scheduler.match(_request_view(request), num_computed_tokens)
        return tokens, self._async and tokens > 0

    def update_state_after_alloc(self, request: Any, blocks: Any,
                                 num_external_tokens: int) -> None:
        assert self._scheduler is not None
        self._requests[request.request_id] = request
        try:
            ids = blocks.get_block_ids()
            # The null block stands in a sliding-window group for blocks
            # outside its window: never loaded or saved.
            nulls = {b.block_id for group in (getattr(blocks, "blocks", None) or ())
                     for b in group if getattr(b, "is_null", False)}
            self._scheduler.allocated(_request_view(request), ids[0], num_external_tokens,
                                      self._further(ids), nulls)
        except Exception as e:  # a promised load cannot be planned: it fails
            log.error("kvtier: request %s after allocation: %s", request.request_id, e)
            ids0: Optional[List[int]] = None
            try:
                ids0 = list(blocks.get_block_ids()[0])
            except Exception:
                pass
            try:
                self._scheduler.allocation_failed(request.request_id, ids0, num_external_tokens)
            except Exception as e2:
                log.error("kvtier: request %s: %s", request.request_id, e2)

    def bind_gpu_block_pool(self, gpu_block_pool: Any) -> None:
        """The engine's block pool: its null block is never loaded or saved
        (also learned from KVCacheBlocks.is_null)."""
        try:
            null = getattr(gpu_block_pool, "null_block", None)
            if null is not None and self._scheduler is not None:
                self._scheduler.null_ids.add(int(null.block_id))
        except Exception as e:
            log.warning("kvtier: reading the engine's null block: %s", e)

    def build_connector_meta(self, scheduler_output: Any) -> KVConnectorMetadata:
        assert self._scheduler is not None
        try:
            scheduled: List[ScheduledView] = []
            n = scheduler_output.num_scheduled_tokens
            for r in scheduler_output.scheduled_new_reqs:
                scheduled.append(ScheduledView(r.req_id, list(r.block_ids[0]), True,
                                               r.num_computed_tokens, n.get(r.req_id, 0),
                                               self._further(r.block_ids)))
            cached = scheduler_output.scheduled_cached_reqs
            resumed = set(getattr(cached, "resumed_req_ids", None) or ())
            flags = getattr(cached, "resumed_from_preemption", None)
            for i, req_id in enumerate(cached.req_ids):
                new_ids = cached.new_block_ids[i]
                replace = req_id in resumed or bool(flags and flags[i])
                scheduled.append(ScheduledView(req_id, list(new_ids[0]) if new_ids else [],
                                               replace, cached.num_computed_tokens[i],
                                               n.get(req_id, 0),
                                               self._further(new_ids) if new_ids else []))
            # The requests as they are now: hashes of generated blocks included.
            views = {s.req_id: _request_view(self._requests[s.req_id])
                     for s in scheduled if s.req_id in self._requests}
            return KvtierConnectorMetadata(self._scheduler.build(scheduled, views))
        except Exception as e:  # never a failed step; promised loads fail
            log.error("kvtier: building the step's metadata: %s", e)
            try:
                return KvtierConnectorMetadata(self._scheduler.abandon())
            except Exception as e2:
                log.error("kvtier: abandoning the step's loads: %s", e2)
                return KvtierConnectorMetadata(StepPlan())

    def _further(self, block_ids: Any) -> List[List[int]]:
        """The block ids of daemon layer groups 1.. from vLLM's per-group
        ids: a hybrid's own groups, or group 0's for every layer-wise group."""
        return [list(block_ids[e]) for e in self._groups.engine_group[1:]]

    def update_connector_output(self, connector_output: Any) -> None:
        if self._scheduler is not None:
            self._scheduler.failed(set(getattr(connector_output, "invalid_block_ids", None)
                                       or ()))

    def request_finished(self, request: Any,
                         block_ids: List[int]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        if self._scheduler is not None:
            self._scheduler.finished(request.request_id)
        self._requests.pop(request.request_id, None)
        return False, None

    def request_finished_all_groups(
            self, request: Any,
            block_ids: Tuple[List[int], ...]) -> Tuple[bool, Optional[Dict[str, Any]]]:
        return self.request_finished(request, list(block_ids[0]) if block_ids else [])

    # -- worker side

    def register_kv_caches(self, kv_caches: Dict[str, Any]) -> None:
        try:
            if self.disabled_reason:
                raise LayoutError(self.disabled_reason)
            names = self._groups.layer_names
            several = len(names) > 1
            missing = [n for g in names for n in g if n not in kv_caches]
            if several and missing:
                raise LayoutError(f"no KV cache for layers {missing[:4]}")
            # One layout per daemon layer group (layers of a hybrid's groups
            # may share a tensor: a block id belongs to one group at a time).
            per_group = [_distinct(kv_caches[name] for name in g) for g in names] \
                if several else [_distinct(kv_caches.values())]
            tensors = _distinct(t for ts in per_group for t in ts)
            on_gpu = {bool(getattr(t, "is_cuda", False)) for t in tensors}
            if len(on_gpu) != 1:
                raise LayoutError("KV caches partly on the GPU and partly in host memory")
            layouts = [BlockLayout([TensorGeometry(t.data_ptr(), tuple(t.shape),
                                                   tuple(t.stride()), t.element_size())
                                    for t in ts], self._kv_cache_config.num_blocks)
                       for ts in per_group]
            layout = layouts[0]
            rank = int(_extra(self._config, "kvtier_tp_rank", _tp_rank()))
            spec = self._kv_cache_config.kv_cache_groups[0].kv_cache_spec
            # MLA: every rank loads the one latent copy, rank 0 stores it.
            self._saves = rank == 0 or not _is_mla(self._config, spec)
            block_bytes = layout.block_bytes * self._ratio
            group_bytes = [block_bytes] + [g.block_bytes for g in layouts[1:]]
            transfer: BlockTransfer
            if on_gpu == {True}:  # the daemon copies to and from the GPU itself
                device = _extra(self._config, "kvtier_cuda_device", None)
                try:
                    region = cuda_region(tensors, None if device is None else int(device))
                except LayoutError:
                    raise
                except Exception as e:
                    raise LayoutError(f"GPU KV caches cannot be shared by CUDA IPC: {e}")
                direct = DirectTransfer(self._client, lambda c: self._open(c, rank),
                                        region.register, region.space, block_bytes, region.sync,
                                        group_bytes)
                # A daemon that cannot open the memory (no CUDA, another node)
                # or a block of too many pieces: disabled now, not every step.
                refused = direct.check([s for b in range(self._ratio) for s in layout.spans(b)])
                if refused:
                    raise LayoutError(f"GPU KV caches: {refused}")
                transfer = direct
            else:
                transfer = StagedTransfer(self._client, lambda c: self._open(c, rank), block_bytes,
                                          int(_extra(self._config, "kvtier_staging_mib", 64)) << 20,
                                          group_bytes=group_bytes)
            self._worker = WorkerIO(transfer, layout, self._ratio, layouts[1:])
        except Exception as e:  # the engine runs on, without the cache
            self.disabled_reason = str(e)
            log.error("kvtier connector disabled: %s", e)

    def _plan(self) -> Optional[StepPlan]:
        meta = self._connector_metadata
        return meta.plan if isinstance(meta, KvtierConnectorMetadata) else None

    def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
        plan = self._plan()
        if plan is None:
            return
        # Loads the scheduler promised and could not plan.
        for f in plan.failed_loads:
            self._load_errors.update(f.engine_blocks)
        self._failed_async.update(plan.failed_async)
        if self._worker is None:
            # A disabled worker loads nothing: vLLM must recompute what the
            # scheduler counted on.
            self._fail_all(plan)
            return
        self._end_group_loads()  # a step that never reached wait_for_save
        try:
            self._worker.begin_step(plan)
            sync = [op for op in plan.loads if not op.asynchronous]
            if self._layerwise and sync:  # this step's loads, layer group by group
                self._waited = set()
                self._worker.start_group_loads(sync)
                self._group_loads_running = True
                self._load_errors |= self._worker.load(
                    [op for op in plan.loads if op.asynchronous])
            else:
                self._load_errors |= self._worker.load(plan.loads)
        except Exception as e:
            log.error("kvtier: loads failed: %s", e)
            self._fail_all(plan)

    def _fail_all(self, plan: StepPlan) -> None:
        for op in plan.loads:
            for blocks in op.engine_blocks:
                self._load_errors.update(blocks)
            if op.asynchronous:
                self._failed_async.add(op.req_id)

    def wait_for_layer_load(self, layer_name: str) -> None:
        """Layer-wise loads: returns once the layer's group is in (a layer
        the groups do not name waits for all). Otherwise loads completed in
        start_load_kv (or run in the background)."""
        if self._worker is not None and self._group_loads_running:
            self._waited.add(layer_name)
            self._worker.wait_group(self._layer_group.get(layer_name, len(self._layer_group)))

    def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                      **kwargs: Any) -> None:
        # Whole blocks, every layer, are saved in wait_for_save: the daemon
        # judges a Save whole and keeps no block a cut cannot restore.
        return None

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: Any) -> bool:
        """Layer-wise loads need wait_for_layer_load called before each
        attention layer, which full CUDA graphs would skip."""
        try:
            return int((extra_config or {}).get("kvtier_layer_groups", 1)) > 1
        except (TypeError, ValueError, AttributeError):
            return False

    def _end_group_loads(self) -> None:
        """Joins the step's layer-wise loads. A step whose forward pass did
        not wait for every layer may have read blocks still loading: its
        loads are reported failed and layer-wise loads are turned off."""
        if self._worker is None or not self._group_loads_running:
            return
        self._group_loads_running = False
        unwaited = set(self._layer_group) - self._waited
        try:
            self._load_errors |= self._worker.end_group_loads(fail_all=bool(unwaited))
        except Exception as e:
            log.error("kvtier: ending layer-wise loads: %s", e)
        if unwaited:
            self._layerwise = False
            log.error("kvtier: the engine ran a step without wait_for_layer_load for %d of %d "
                      "layers (e.g. %s); its loads are reported failed and layer-wise loads are "
                      "off from now on (whole blocks load before the forward pass)",
                      len(unwaited), len(self._layer_group), sorted(unwaited)[0])

    def wait_for_save(self) -> None:
        self._end_group_loads()  # the step's failures are known before its saves
        plan = self._plan()
        if self._worker is None or plan is None or not self._saves:
            return
        try:
            self._worker.save(plan)
        except Exception as e:  # a save is a cache fill: dropping it costs a miss
            log.error("kvtier: saves failed: %s", e)

    def get_finished(self, finished_req_ids: Set[str]
                     ) -> Tuple[Optional[Set[str]], Optional[Set[str]]]:
        """(finished sending, finished receiving): saves complete within the
        step; background loads that ended since the last call (their failed
        blocks are reported by get_block_ids_with_load_errors in the same
        pass)."""
        self._end_group_loads()
        done = set(self._failed_async)
        self._failed_async.clear()
        if self._worker is not None:
            try:
                self._worker.forget(finished_req_ids)
                ended, failed = self._worker.finished_loads()
                done |= ended
                self._load_errors |= failed
            except Exception as e:
                log.error("kvtier: checking background loads: %s", e)
        return None, done or None

    def get_block_ids_with_load_errors(self) -> Set[int]:
        self._end_group_loads()
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


def _distinct(tensors: Iterable[Any]) -> List[Any]:
    """The tensors, each storage once (layers sharing a tensor count once)."""
    out, seen = [], set()
    for t in tensors:
        if t.data_ptr() not in seen:
            seen.add(t.data_ptr())
            out.append(t)
    return out


def _tp_rank() -> int:
    try:
        from vllm.distributed.parallel_state import get_tensor_model_parallel_rank
        return int(get_tensor_model_parallel_rank())
    except Exception:
        return 0
