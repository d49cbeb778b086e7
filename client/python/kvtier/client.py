"""Client: every KvCache RPC of kvtierd, with Save and Load through a
SharedRegion (a 0600 file in /dev/shm that the engine maps and registers).

Errors raise KvtierError carrying the daemon's gRPC status code. Save and Load
return one Completion per block; a Load completion with code OK means the
bytes are in the region and verified, anything else means the block was not
loaded and must be recomputed. Thread-safe like the gRPC channel under it.
"""

import concurrent.futures
import mmap
import os
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Type, Union

import grpc

from kvtier.namespace_options import KvLayoutSpec, NamespaceOptions
from kvtier.v1 import kvcache_pb2, kvcache_pb2_grpc, types_pb2

_DTYPES = {
    "bf16": types_pb2.DTYPE_BF16, "fp16": types_pb2.DTYPE_FP16, "fp32": types_pb2.DTYPE_FP32,
    "fp8_e4m3": types_pb2.DTYPE_FP8_E4M3, "fp8_e5m2": types_pb2.DTYPE_FP8_E5M2,
}
_GROUP_KINDS = {
    "full_attention": types_pb2.LayerGroup.LAYER_GROUP_FULL_ATTENTION,
    "sliding_window": types_pb2.LayerGroup.LAYER_GROUP_SLIDING_WINDOW,
    "recurrent": types_pb2.LayerGroup.LAYER_GROUP_RECURRENT,
}
_TIERS = {types_pb2.TIER_KIND_GPU: "gpu", types_pb2.TIER_KIND_HOST: "host",
          types_pb2.TIER_KIND_NVME: "nvme", types_pb2.TIER_KIND_PEER: "peer"}


class KvtierError(Exception):
    """A failed call: `code` is a grpc.StatusCode."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(f"{code.name}: {message}")
        self.code = code
        self.message = message


@dataclass
class Namespace:
    id: str
    block_bytes: int
    created: bool
    plans_enabled: bool
    plans_note: str
    encoding: str = ""  # in words; "" when blocks are stored as given
    stored_block_bytes: int = 0
    group_block_bytes: List[int] = field(default_factory=list)  # a hybrid's, per group


@dataclass
class GroupLoad:
    """What one group of a hybrid namespace loads for the Lookup's cut: the
    blocks of keys[first_key:first_key + len(sizes)]."""
    group: int
    first_key: int
    sizes: List[int]
    tiers: List[str]
    persisted: List[bool] = field(default_factory=list)  # per block: survives a daemon crash


@dataclass
class LookupResult:
    matched: int
    tiers: List[str]
    lease_id: str
    fetch_blocks: Optional[int]  # the plan's cut; None without a plan
    plan: Optional[kvcache_pb2.FetchPlan] = None
    persisted: List[bool] = field(default_factory=list)  # per block: survives a daemon crash
    # Hybrid namespaces: `matched` is the longest cut every group can
    # restore, and this says per group what to load for it.
    groups: List[GroupLoad] = field(default_factory=list)
    # A hybrid's plan, when it chose a shorter restorable cut than `matched`
    # (0 < fetch_blocks < matched): what each group loads for it.
    plan_groups: List[GroupLoad] = field(default_factory=list)


@dataclass
class BlockRef:
    key: bytes
    offset: int
    size: int
    parent_key: bytes = b""  # Save only
    # Instead of offset/size: the block's pieces in order, [(offset, size)...],
    # e.g. one per layer for an engine that keeps a tensor per layer.
    segments: Optional[List[Tuple[int, int]]] = None
    group: int = 0  # hybrid namespaces: the block's layer group


@dataclass
class Completion:
    index: int
    key: bytes
    code: grpc.StatusCode
    message: str
    size: int

    @property
    def ok(self) -> bool:
        return self.code == grpc.StatusCode.OK


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class SharedRegion:
    """A shared-memory file this process creates (mode 0600) and maps; pass
    `path` and `size` to Client.register_memory. `buffer` is a writable
    memoryview of it. Its pages are allocated at creation (OSError, e.g.
    ENOSPC, when the file system cannot hold it, rather than SIGBUS on a
    later write). close() unmaps and removes the file; so does the
    interpreter's exit if close() was never called."""

    def __init__(self, size: int, directory: str = "/dev/shm"):
        fd, self.path = tempfile.mkstemp(prefix="kvtier-", dir=directory)
        try:
            os.fchmod(fd, 0o600)
            os.posix_fallocate(fd, 0, size)
            self._map = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.unlink(self.path)
            raise
        finally:
            os.close(fd)
        self.size = size
        self.buffer = memoryview(self._map)
        self._remove = weakref.finalize(self, _remove_file, self.path)

    def close(self) -> None:
        self.buffer.release()
        self._map.close()
        self._remove()

    def __enter__(self) -> "SharedRegion":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                   grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Adds 'authorization: Bearer TOKEN' to every call of a channel."""

    def __init__(self, token: str):
        self._header = ("authorization", "Bearer " + token)

    def _details(self, details):
        metadata = list(details.metadata or []) + [self._header]
        return details._replace(metadata=metadata)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation, details, requests):
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation, details, requests):
        return continuation(self._details(details), requests)


# Lookups sent with `keys` to a daemon that could not read packed keys
# before packed keys are tried again (one refused try per that many).
KEYS_LOOKUPS_BEFORE_RETRY = 1000


def _packed_key_width(keys: Sequence[bytes]) -> int:
    """The width of `keys` when every one has the same, of 1..32 bytes
    (the daemon checks the rest); 0 otherwise, or without keys."""
    if not keys:
        return 0
    width = len(keys[0])
    if not 1 <= width <= 32 or any(len(k) != width for k in keys):
        return 0
    return width


class Client:
    """A connection to kvtierd; close() (or leaving a `with Client(...) as c:`
    block) closes the channel.

    With security on (docs/operations.md#security): `tls_ca` (PEM file) turns on
    TLS, `tls_cert`/`tls_key` add a client certificate (mutual TLS),
    `tls_server_name` overrides the name checked in the daemon's certificate, and
    `token` is sent as a bearer token with every call.

    `max_reconnect_backoff_ms` (> 0) caps how long the channel waits between
    attempts to reach a daemon that went away (gRPC's default grows to two
    minutes); engine connectors keep it short, so a restarted daemon is used
    again within that time.
    """

    def __init__(self, address: str, timeout: float = 30.0,
                 max_message_bytes: int = 64 << 20, token: str = "", tls_ca: str = "",
                 tls_cert: str = "", tls_key: str = "", tls_server_name: str = "",
                 max_reconnect_backoff_ms: int = 0):
        options = [("grpc.max_send_message_length", max_message_bytes),
                   ("grpc.max_receive_message_length", max_message_bytes)]
        if max_reconnect_backoff_ms > 0:
            # Not grpc.min_reconnect_backoff_ms: gRPC takes it as the least
            # time a connection attempt gets to finish its handshake, and a
            # short one fails calls whenever a busy daemon answers a new
            # connection late (seen at 100 ms under ThreadSanitizer).
            options += [("grpc.initial_reconnect_backoff_ms", min(100, max_reconnect_backoff_ms)),
                        ("grpc.max_reconnect_backoff_ms", max_reconnect_backoff_ms)]
        if bool(tls_cert) != bool(tls_key):
            raise ValueError("a client certificate needs both tls_cert and tls_key")
        if tls_ca:
            def read(path: str) -> bytes:
                with open(path, "rb") as f:
                    return f.read()
            creds = grpc.ssl_channel_credentials(
                root_certificates=read(tls_ca),
                private_key=read(tls_key) if tls_key else None,
                certificate_chain=read(tls_cert) if tls_cert else None)
            if tls_server_name:
                options.append(("grpc.ssl_target_name_override", tls_server_name))
            self._channel = grpc.secure_channel(address, creds, options=options)
        elif tls_cert:
            raise ValueError("a client certificate needs TLS: give tls_ca too")
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        if token:
            self._channel = grpc.intercept_channel(self._channel, _BearerToken(token))
        self._stub = kvcache_pb2_grpc.KvCacheStub(self._channel)
        # Lookups to send with `keys` before packed keys are tried again: set
        # when the daemon refused a packed Lookup and took the same one with
        # `keys` (it predates LookupRequest.packed_keys). A daemon upgraded
        # at the same address is found within that many Lookups.
        self._keys_lookups_left = 0
        self._timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self.close()

    def _call(self, method: Callable[..., Any], request: Any,
              timeout: Optional[float] = None) -> Any:
        """`timeout`: seconds; None for the client's own."""
        try:
            return method(request, timeout=self._timeout if timeout is None else timeout)
        except grpc.RpcError as e:
            raise KvtierError(e.code(), e.details()) from None

    def open_namespace(self, model_id: Union[str, NamespaceOptions], num_layers: int = 0,
                       num_kv_heads: int = 0, head_dim: int = 0, dtype: str = "bf16",
                       tokens_per_block: int = 16, tp_rank: int = 0, tp_size: int = 1,
                       salt: bytes = b"", cost_model: str = "", model_config_json: str = "",
                       encoding: str = "", engine_layout: str = "",
                       k_group_tokens: int = 0) -> Namespace:
        """Opens (or re-opens) a namespace: open_namespace(NamespaceOptions(...)),
        or the same fields as arguments (model_id, num_layers, num_kv_heads,
        head_dim, ...).

        encoding="fp8" stores blocks as fp8 e4m3 with scales (lossy; part of
        the namespace's identity); engine_layout says how a block's bytes are
        ordered ("vllm-nhd" by default) and k_group_tokens the K scale group.
        """
        if isinstance(model_id, NamespaceOptions):
            return self.open_namespace_with(model_id)
        return self.open_namespace_with(NamespaceOptions(
            model_id=model_id,
            layout=KvLayoutSpec(num_layers=num_layers, num_kv_heads=num_kv_heads,
                                head_dim=head_dim, dtype=dtype,
                                tokens_per_block=tokens_per_block, tp_rank=tp_rank,
                                tp_size=tp_size),
            salt=salt, cost_model=cost_model, model_config_json=model_config_json,
            encoding=encoding, engine_layout=engine_layout, k_group_tokens=k_group_tokens))

    def open_namespace_with(self, options: NamespaceOptions) -> Namespace:
        """Opens (or re-opens) the namespace `options` describes."""
        o, lo = options, options.layout
        if lo.dtype not in _DTYPES:
            raise KvtierError(grpc.StatusCode.INVALID_ARGUMENT,
                              f"dtype {lo.dtype!r} is not one of {', '.join(_DTYPES)}")
        layout = types_pb2.NamespaceLayout(
            num_layers=lo.num_layers, num_kv_heads=lo.num_kv_heads, head_dim=lo.head_dim,
            dtype=_DTYPES[lo.dtype], tokens_per_block=lo.tokens_per_block, tp_rank=lo.tp_rank,
            tp_size=lo.tp_size, latent=lo.latent)
        for i, g in enumerate(lo.groups):
            if g.kind not in _GROUP_KINDS:
                raise KvtierError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"layout.groups[{i}].kind {g.kind!r} is not one of "
                                  f"{', '.join(_GROUP_KINDS)}")
            layout.groups.append(types_pb2.LayerGroup(
                kind=_GROUP_KINDS[g.kind], layers=list(g.layers), window_tokens=g.window_tokens,
                state_bytes=g.state_bytes, checkpoint_tokens=g.checkpoint_tokens))
        kinds = {"": kvcache_pb2.StorageEncoding.STORAGE_ENCODING_PLAIN,
                 "fp8": kvcache_pb2.StorageEncoding.STORAGE_ENCODING_FP8_E4M3}
        if o.encoding not in kinds:
            raise KvtierError(grpc.StatusCode.INVALID_ARGUMENT,
                              f"encoding {o.encoding!r} is not '' or 'fp8'")
        r = self._call(self._stub.OpenNamespace, kvcache_pb2.OpenNamespaceRequest(
            model_id=o.model_id, layout=layout, salt=o.salt, cost_model=o.cost_model,
            model_config_json=o.model_config_json,
            encoding=kvcache_pb2.StorageEncoding(kind=kinds[o.encoding],
                                                 engine_layout=o.engine_layout,
                                                 k_group_tokens=o.k_group_tokens)))
        return Namespace(r.namespace_id, r.block_bytes, r.created, r.plans_enabled, r.plans_note,
                         r.encoding, r.stored_block_bytes, [g.block_bytes for g in r.groups])

    def lookup(self, namespace_id: str, keys: Sequence[bytes], take_lease: bool = False,
               lease_ttl_ms: int = 0, prompt_tokens: int = 0,
               retention_priority: Optional[int] = None) -> LookupResult:
        """`retention_priority` (0..100, higher kept longer) re-marks the
        matched blocks: high for a shared system prompt, 0 once the
        conversation ended (they are then reclaimed first)."""
        req = kvcache_pb2.LookupRequest(
            namespace_id=namespace_id, take_lease=take_lease,
            lease_ttl_ms=lease_ttl_ms, prompt_tokens=prompt_tokens, compact_reply=True)
        if retention_priority is not None:
            req.retention_priority = retention_priority
        # Keys of one width go packed in one field (packed_keys): one bytes
        # value to build and parse instead of one per key.
        keys = list(keys)
        width = _packed_key_width(keys)
        left = self._keys_lookups_left
        if width and left > 0:
            self._keys_lookups_left = left - 1  # approximate across threads
        if width and left == 0:
            req.packed_keys = b"".join(keys)
            req.packed_key_bytes = width
        else:
            req.keys.extend(keys)
        r = None
        # One deadline for both tries (None: no deadline).
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        try:
            r = self._call(self._stub.Lookup, req)
        except KvtierError as e:
            if not req.packed_key_bytes or e.code != grpc.StatusCode.INVALID_ARGUMENT:
                raise
        if r is None:
            # A daemon that predates packed keys reads none and refuses the
            # call (it changed nothing): ask again with `keys`. When that
            # succeeds, it was such a daemon: send it `keys` for a while. A
            # request refused both ways is refused for its own fault.
            req.ClearField("packed_keys")
            req.ClearField("packed_key_bytes")
            req.keys.extend(keys)
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            r = self._call(self._stub.Lookup, req, left)
            self._keys_lookups_left = KEYS_LOOKUPS_BEFORE_RETRY
        # Packed arrays (compact_reply); a daemon that predates them answers
        # in `blocks`.
        tiers = [_TIERS.get(t, "unknown") for t in r.compact_blocks.tier]
        tiers += [_TIERS.get(b.tier, "unknown") for b in r.blocks]
        persisted = list(r.compact_blocks.persisted) + [b.persisted for b in r.blocks]
        has_plan = r.HasField("plan")

        def loads(groups: Sequence[kvcache_pb2.GroupLoad]) -> List[GroupLoad]:
            return [GroupLoad(g.group, g.first_key, [b.size_bytes for b in g.blocks],
                              [_TIERS.get(b.tier, "unknown") for b in g.blocks],
                              [b.persisted for b in g.blocks])
                    for g in groups]
        return LookupResult(r.matched, tiers,
                            r.lease_id, r.plan.fetch_blocks if has_plan else None,
                            r.plan if has_plan else None, persisted,
                            loads(r.groups), loads(r.plan.groups))

    def release(self, lease_id: str) -> int:
        return self._call(self._stub.Release,
                          kvcache_pb2.ReleaseRequest(lease_id=lease_id)).blocks_released

    def delete(self, namespace_id: str, keys: Sequence[bytes], recursive: bool = False) -> int:
        return self._call(self._stub.Delete, kvcache_pb2.DeleteRequest(
            namespace_id=namespace_id, keys=list(keys), recursive=recursive)).blocks_deleted

    def close_namespace(self, namespace_id: str, drop_blocks: bool = False) -> Tuple[int, int, int]:
        """Closes a namespace; returns (leases released, blocks dropped, blocks kept)."""
        r = self._call(self._stub.CloseNamespace, kvcache_pb2.CloseNamespaceRequest(
            namespace_id=namespace_id, drop_blocks=drop_blocks))
        return r.leases_released, r.blocks_dropped, r.blocks_kept

    def put(self, namespace_id: str, keys: Sequence[bytes], blocks: Sequence[bytes],
            parent_key: bytes = b"", groups: Optional[Sequence[int]] = None,
            retention_priority: Optional[int] = None) -> int:
        """Stores blocks; all or nothing. Hybrid namespaces: groups[i] is the
        layer group of blocks[i], whose parent is the previous key of the
        same group; one put is judged whole (attention blocks and the
        snapshot that makes them restorable belong together).
        `retention_priority` (0..100, higher kept longer); unset: 35, and 0
        for a partial last block (shorter than its parent)."""
        if len(keys) != len(blocks) or not keys:
            raise KvtierError(grpc.StatusCode.INVALID_ARGUMENT,
                              "put needs one block per key, and at least one key")
        if groups is not None and len(groups) != len(keys):
            raise KvtierError(grpc.StatusCode.INVALID_ARGUMENT, "put needs one group per key")

        def chunks():
            parents: Dict[int, bytes] = {}
            for i, (k, data) in enumerate(zip(keys, blocks)):
                g = groups[i] if groups is not None else 0
                chunk = kvcache_pb2.PutChunk(namespace_id=namespace_id if i == 0 else "", key=k,
                                             parent_key=parents.get(g, parent_key),
                                             block_bytes=len(data), data=data, group=g)
                if i == 0 and retention_priority is not None:
                    chunk.retention_priority = retention_priority
                yield chunk
                parents[g] = k

        try:
            return self._stub.Put(chunks(), timeout=self._timeout).blocks_stored
        except grpc.RpcError as e:
            raise KvtierError(e.code(), e.details()) from None

    def get(self, namespace_id: str, keys: Sequence[bytes], group: int = 0) -> List[bytes]:
        out: List[bytearray] = []
        try:
            for c in self._stub.Get(kvcache_pb2.GetRequest(namespace_id=namespace_id,
                                                          keys=list(keys), group=group),
                                    timeout=self._timeout):
                if c.key:
                    out.append(bytearray())
                out[-1] += c.data
        except grpc.RpcError as e:
            raise KvtierError(e.code(), e.details()) from None
        return [bytes(b) for b in out]

    def register_memory(self, path: str, size: int, owner_pid: Optional[int] = None) -> str:
        """Registers a shared-memory file; returns the region id.

        The daemon drops the region when `owner_pid` exits (default: this
        process; 0: never, e.g. when the daemon cannot see this pid namespace).
        """
        region = kvcache_pb2.MemoryRegion(
            shared_memory=kvcache_pb2.SharedMemoryFile(path=path, size_bytes=size))
        return self._register(region, owner_pid)

    def register_cuda_ipc(self, device: int, tensors: Sequence[Tuple[bytes, int, int]],
                          owner_pid: Optional[int] = None) -> str:
        """Registers GPU tensors shared by CUDA IPC: (handle, offset, size) each.

        The handle is the 64-byte cudaIpcMemHandle_t (in PyTorch, from the
        storage's _share_cuda_()). Tensors lie end to end in the region.
        """
        region = kvcache_pb2.MemoryRegion(cuda_ipc=kvcache_pb2.CudaIpcMemory(
            device=device,
            tensors=[kvcache_pb2.CudaIpcTensor(handle=h, offset=o, size_bytes=n)
                     for h, o, n in tensors]))
        return self._register(region, owner_pid)

    def _register(self, region: kvcache_pb2.MemoryRegion, owner_pid: Optional[int]) -> str:
        pid = os.getpid() if owner_pid is None else owner_pid
        return self._call(self._stub.RegisterMemory,
                          kvcache_pb2.RegisterMemoryRequest(region=region,
                                                            owner_pid=pid)).region_id

    def unregister_memory(self, region_id: str) -> None:
        self._call(self._stub.UnregisterMemory,
                   kvcache_pb2.UnregisterMemoryRequest(region_id=region_id))

    def _transfer(self, save: bool, namespace_id: str, region_id: str,
                  blocks: Iterable[BlockRef],
                  on_block: Optional[Callable[[Completion], None]],
                  retention_priority: Optional[int] = None) -> List[Completion]:
        refs = [kvcache_pb2.BlockRef(
            key=b.key, parent_key=b.parent_key if save else b"", offset=b.offset,
            size_bytes=b.size, group=b.group,
            segments=[kvcache_pb2.RegionSegment(offset=o, size_bytes=n)
                      for o, n in (b.segments or [])]) for b in blocks]
        if save:
            save_req = kvcache_pb2.SaveRequest(namespace_id=namespace_id, region_id=region_id,
                                               blocks=refs, completion_runs=True)
            if retention_priority is not None:
                save_req.retention_priority = retention_priority
            stream = self._stub.Save(save_req, timeout=self._timeout)
        else:
            stream = self._stub.Load(kvcache_pb2.LoadRequest(
                namespace_id=namespace_id, region_id=region_id, blocks=refs,
                completion_runs=True), timeout=self._timeout)
        out = []
        try:
            for c in stream:
                # A run stands for the blocks after it too, each OK with its size.
                run = max(c.run, 1)
                if c.index + run > len(refs):
                    stream.cancel()
                    raise KvtierError(grpc.StatusCode.INTERNAL,
                                      f"the daemon reported blocks {c.index}..{c.index + run - 1}"
                                      f" of a request of {len(refs)}")
                for i in range(c.index, c.index + run):
                    done = Completion(i, c.key if i == c.index else refs[i].key,
                                      _CODES.get(c.code, grpc.StatusCode.UNKNOWN), c.message,
                                      c.size_bytes)
                    out.append(done)
                    if on_block is not None:
                        on_block(done)
        except grpc.RpcError as e:
            raise KvtierError(e.code(), e.details()) from None
        return out

    def transfer(self, namespace_id: str, keys: Sequence[bytes], peer: str,
                 direction: str = "push", timeout_ms: int = 0) -> List[Completion]:
        """Moves the cached prefix of `keys` between this daemon and the daemon at
        `peer` ("host:port"): direction "push" sends from this daemon, "pull"
        fetches into it. One Completion per key: ok = cached on the receiver;
        NOT_FOUND = not cached on the source; anything else = recompute it."""
        directions = {"push": kvcache_pb2.TRANSFER_DIRECTION_PUSH,
                      "pull": kvcache_pb2.TRANSFER_DIRECTION_PULL}
        if direction not in directions:
            raise ValueError("direction must be 'push' or 'pull'")
        resp = self._call(self._stub.Transfer, kvcache_pb2.TransferRequest(
            namespace_id=namespace_id, keys=list(keys), peer=peer,
            direction=directions[direction], timeout_ms=timeout_ms))
        return [Completion(c.index, c.key, _CODES.get(c.code, grpc.StatusCode.UNKNOWN),
                           c.message, c.size_bytes) for c in resp.blocks]

    def save(self, namespace_id: str, region_id: str, blocks: Iterable[BlockRef],
             on_block: Optional[Callable[[Completion], None]] = None,
             retention_priority: Optional[int] = None) -> List[Completion]:
        """Stores blocks from the region; one Completion per block.
        `retention_priority`: as put's."""
        return self._transfer(True, namespace_id, region_id, blocks, on_block,
                              retention_priority)

    def load(self, namespace_id: str, region_id: str, blocks: Iterable[BlockRef],
             on_block: Optional[Callable[[Completion], None]] = None) -> List[Completion]:
        """Copies cached blocks into the region; one Completion per block."""
        return self._transfer(False, namespace_id, region_id, blocks, on_block)

    def save_async(self, namespace_id: str, region_id: str, blocks: Iterable[BlockRef],
                   on_block: Optional[Callable[[Completion], None]] = None
                   ) -> "concurrent.futures.Future[List[Completion]]":
        return self._pool.submit(self.save, namespace_id, region_id, list(blocks), on_block)

    def load_async(self, namespace_id: str, region_id: str, blocks: Iterable[BlockRef],
                   on_block: Optional[Callable[[Completion], None]] = None
                   ) -> "concurrent.futures.Future[List[Completion]]":
        return self._pool.submit(self.load, namespace_id, region_id, list(blocks), on_block)
