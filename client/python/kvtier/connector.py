"""KvtierConnector: vLLM's KV connector method set (KVConnectorBase_V1) over a
kvtierd daemon, for engines whose paged KV cache lives in a SharedRegion.

The engine's cache is one region. With num_layers = 1 (the default) engine
block id i is at offset i * block_bytes. With a tensor per layer, layer l of
block i is at l * layer_stride + i * (block_bytes / num_layers): Save gathers
a block's layers into one cached block and Load scatters it back. Prefix blocks are keyed with the canonical chained
hash of their token ids.

Scheduler side: get_num_new_matched_tokens (a Lookup with a lease; the plan's
cut when the daemon sends one), update_state_after_alloc,
build_connector_meta, request_finished (releases the lease).
Worker side: register_kv_caches, bind_connector_metadata, start_load_kv
(Load into the allocated blocks), wait_for_layer_load, save_kv_layer,
wait_for_save (Save of newly computed full blocks), get_finished,
get_block_ids_with_load_errors (engine blocks whose load failed: recompute
them), clear_connector_metadata.

Loads and saves complete within start_load_kv and wait_for_save (loads are
not asynchronous across steps), so get_finished reports nothing pending.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from kvtier.chained_hash import chained_block_keys
from kvtier.client import BlockRef, Client, KvtierError


@dataclass
class Request:
    """What the connector needs of an engine request."""
    request_id: str
    prompt_token_ids: List[int]


@dataclass
class ScheduledRequest:
    """One request of a scheduler step: its engine blocks and how many of its
    prompt tokens will have been computed after the step."""
    request: Request
    block_ids: List[int]
    num_computed_tokens: int


@dataclass
class ConnectorMetadata:
    # (request id, keys, engine block ids, parent of the first key) to load
    # before the step.
    loads: List[Tuple[str, List[bytes], List[int], bytes]] = field(default_factory=list)
    # (request id, keys, parent key, engine block ids) to save after it.
    saves: List[Tuple[str, List[bytes], bytes, List[int]]] = field(default_factory=list)


class KvtierConnector:
    def __init__(self, client: Client, namespace_id: str, block_tokens: int, block_bytes: int,
                 num_layers: int = 1, layer_stride: int = 0):
        if num_layers < 1 or block_bytes % num_layers:
            raise ValueError("block_bytes must split evenly over num_layers >= 1")
        self._num_layers = num_layers
        self._layer_stride = layer_stride
        self._client = client
        self._ns = namespace_id
        self._block_tokens = block_tokens
        self._block_bytes = block_bytes
        self._region_id: Optional[str] = None
        self._leases: Dict[str, str] = {}
        self._pending_loads: Dict[str, Tuple[List[bytes], int]] = {}  # keys, first block index
        self._load_specs: List[Tuple[str, List[bytes], List[int], bytes]] = []
        self._saved_blocks: Dict[str, int] = {}  # request -> full blocks already saved
        self._meta: Optional[ConnectorMetadata] = None
        self._load_errors: Set[int] = set()
        self._resaves: List[Tuple[str, List[bytes], bytes, List[int]]] = []

    # ---------------------------------------------------------- scheduler side
    def get_num_new_matched_tokens(self, request: Request,
                                   num_computed_tokens: int) -> Tuple[int, bool]:
        """Tokens beyond num_computed_tokens the daemon can provide, and
        whether they load asynchronously (never, here)."""
        # vLLM asks again while a request waits and after a preemption: drop
        # what an earlier call held.
        self._release(request.request_id)
        self._pending_loads.pop(request.request_id, None)
        keys = chained_block_keys(request.prompt_token_ids, self._block_tokens)
        if not keys:
            return 0, False
        hit = self._client.lookup(self._ns, keys, take_lease=True,
                                  prompt_tokens=len(request.prompt_token_ids))
        usable = hit.matched if hit.fetch_blocks is None else min(hit.matched, hit.fetch_blocks)
        # The engine must compute at least the last prompt token itself.
        if usable * self._block_tokens >= len(request.prompt_token_ids):
            usable -= 1
        first = num_computed_tokens // self._block_tokens
        if usable <= first:
            if hit.lease_id:
                self._client.release(hit.lease_id)  # nothing will be loaded
            return 0, False
        if hit.lease_id:
            self._leases[request.request_id] = hit.lease_id  # held until the load
        self._pending_loads[request.request_id] = (keys[:usable], first)
        return usable * self._block_tokens - num_computed_tokens, False

    def _release(self, request_id: str) -> None:
        lease = self._leases.pop(request_id, None)
        if lease:
            try:
                self._client.release(lease)
            except KvtierError:  # expired: already gone
                pass

    def update_state_after_alloc(self, request: Request, block_ids: Sequence[int],
                                 num_external_tokens: int) -> None:
        pending = self._pending_loads.pop(request.request_id, None)
        if pending is None or num_external_tokens == 0:
            self._release(request.request_id)
            return
        keys, first = pending
        n = num_external_tokens // self._block_tokens
        parent = keys[first - 1] if first > 0 else b""
        self._load_specs.append((request.request_id, keys[first:first + n],
                                 list(block_ids[first:first + n]), parent))
        self._saved_blocks[request.request_id] = first + n  # loaded blocks need no save

    def build_connector_meta(self, scheduled: Sequence[ScheduledRequest]) -> ConnectorMetadata:
        meta = ConnectorMetadata(loads=self._load_specs)
        self._load_specs = []
        for s in scheduled:
            keys = chained_block_keys(s.request.prompt_token_ids, self._block_tokens)
            full = min(len(keys), s.num_computed_tokens // self._block_tokens)
            done = self._saved_blocks.get(s.request.request_id, 0)
            if full > done:
                parent = keys[done - 1] if done > 0 else b""
                meta.saves.append((s.request.request_id, keys[done:full], parent,
                                   list(s.block_ids[done:full])))
                self._saved_blocks[s.request.request_id] = full
        return meta

    def request_finished(self, request: Request,
                         block_ids: Sequence[int]) -> Tuple[bool, Optional[dict]]:
        """Releases anything still held for the request; the engine may free
        its blocks now."""
        self._release(request.request_id)
        self._pending_loads.pop(request.request_id, None)
        self._saved_blocks.pop(request.request_id, None)
        return False, None

    # ------------------------------------------------------------- worker side
    def register_kv_caches(self, kv_caches: Dict[str, object]) -> None:
        """kv_caches: {"region": SharedRegion} holding the engine's blocks."""
        region = kv_caches["region"]
        self._region_id = self._client.register_memory(region.path, region.size)

    def bind_connector_metadata(self, meta: ConnectorMetadata) -> None:
        self._meta = meta

    def clear_connector_metadata(self) -> None:
        self._meta = None

    def start_load_kv(self, forward_context: object = None, **kwargs) -> None:
        if self._meta is None:
            return
        for request_id, keys, block_ids, parent in self._meta.loads:
            refs = [self._ref(k, b) for k, b in zip(keys, block_ids)]
            loaded = set()
            try:
                for c in self._client.load(self._ns, self._region_id, refs):
                    if c.ok:
                        loaded.add(c.index)
            except KvtierError:
                pass  # daemon gone, region gone, deadline: what has no OK failed
            failed = [i for i in range(len(refs)) if i not in loaded]
            self._load_errors.update(block_ids[i] for i in failed)
            if failed:  # the engine recomputes them this step: save them after it
                f = min(failed)
                self._resaves.append((request_id, keys[f:], keys[f - 1] if f else parent,
                                      block_ids[f:]))
            self._release(request_id)  # loaded: the lease has done its job

    def wait_for_layer_load(self, layer_name: str) -> None:
        return None  # start_load_kv has completed every load

    def save_kv_layer(self, layer_name: str, kv_layer: object, attn_metadata: object,
                      **kwargs) -> None:
        return None  # whole blocks are saved in wait_for_save

    def wait_for_save(self) -> None:
        if self._meta is None:
            return
        # Re-saves first: the new blocks may chain on them.
        saves, self._resaves = self._resaves + self._meta.saves, []
        for _, keys, parent, block_ids in saves:
            refs = [self._ref(k, b, parent if i == 0 else keys[i - 1])
                    for i, (k, b) in enumerate(zip(keys, block_ids))]
            self._client.save(self._ns, self._region_id, refs)

    def _ref(self, key: bytes, block_id: int, parent: bytes = b"") -> BlockRef:
        if self._num_layers == 1:
            return BlockRef(key, block_id * self._block_bytes, self._block_bytes, parent)
        per_layer = self._block_bytes // self._num_layers
        pieces = [(layer * self._layer_stride + block_id * per_layer, per_layer)
                  for layer in range(self._num_layers)]
        return BlockRef(key, 0, 0, parent, segments=pieces)

    def get_finished(self, finished_req_ids: Set[str]) -> Tuple[Set[str], Set[str]]:
        return set(), set()

    def get_block_ids_with_load_errors(self) -> Set[int]:
        errors, self._load_errors = self._load_errors, set()
        return errors
