"""vLLM's side of the connector tests: the simulated model (KV a function of
the prefix), stand-in configs and requests, and a worker (Rank) that runs
vLLM's worker half of each step. Run as a script it is one worker process,
serving pickled commands on stdin and answering on stdout:

    python3 vllm_sim.py PYTHONPATH ADDRESS TP RANK sync|async host|gpu mha|mla|hybrid|layerwise

The hybrid model has four layers in two KV cache groups, as vLLM's hybrid
allocator groups them: full attention (layers 0 and 2, group 0) and a
sliding window of WINDOW tokens (layers 1 and 3, group 1); layers 0 and 1
share one tensor, 2 and 3 another, and a block id belongs to one group at a
time.
"""

import ctypes
import hashlib
import os
import pickle
import struct
import subprocess
import sys
import threading
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, os.path.join(HERE, "standins"))

import grpc  # noqa: E402
from engine_sim import HostTensor  # noqa: E402

from kvtier import KvtierError  # noqa: E402
from kvtier.vllm import KvtierConnectorV1  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402

BS, LAYERS, HEADS, DIM, NUM_BLOCKS = 16, 2, 1, 64, 64
SPAN = BS * HEADS * DIM * 2  # bf16: one block of K (or V) of one layer
# MLA: one latent of MLA_DIM per token and layer, as many bytes as K and V.
MLA_DIM = 2 * HEADS * DIM
# Hybrid: the layers of each KV cache group, the window, and the null block
# (not block 0, so nothing can assume it).
GROUP_LAYERS = ((0, 2), (1, 3))
WINDOW = 2 * BS
WINDOW_BLOCKS = 2
NULL_BLOCK = 7


class FullAttentionSpec(SimpleNamespace):
    pass


class SlidingWindowSpec(SimpleNamespace):
    pass


def block_hashes(tokens, extra=b""):
    out, parent = [], b""
    for i in range(len(tokens) // BS):
        h = hashlib.sha256(parent + repr(tokens[i * BS:(i + 1) * BS]).encode() + extra).digest()
        out.append(h)
        parent = h
    return out


def parts(mla):
    """A block's parts per layer and their bytes: K and V, or one latent."""
    return ((0,), 2 * SPAN) if mla else ((0, 1), SPAN)


def kv(block_hash, layer, half, rank=0, size=SPAN):
    seed = hashlib.sha256(block_hash + bytes([layer, half, rank])).digest()
    return (seed * (size // len(seed) + 1))[:size]


def block_kv(block_hash, rank=0, mla=False, layers=range(LAYERS)):
    """A block's bytes on `rank`; an MLA latent is the same on every rank."""
    halves, size = parts(mla)
    return b"".join(kv(block_hash, layer, half, 0 if mla else rank, size)
                    for layer in layers for half in halves)


class Request:
    def __init__(self, req_id, tokens, extra=b""):
        self.request_id = req_id
        self.prompt_token_ids = tokens
        self.num_tokens = len(tokens)
        self.block_hashes = block_hashes(tokens, extra)
        self.num_publishable_block_hashes = len(self.block_hashes)
        self.num_computed_tokens = 0


def vllm_config(address, tp=1, rank=0, async_loads=False, mla=False, layer_groups=1):
    # Generous lookup timeouts: the daemon may run under a sanitizer.
    extra = {"kvtier_address": address, "kvtier_timeout_s": 10, "kvtier_lookup_timeout_s": 10,
             "kvtier_tp_rank": rank, "kvtier_async_loads": async_loads,
             "kvtier_layer_groups": layer_groups}
    return SimpleNamespace(
        kv_transfer_config=SimpleNamespace(kv_connector_extra_config=extra),
        model_config=SimpleNamespace(model="sim/model", use_mla=mla),
        parallel_config=SimpleNamespace(tensor_parallel_size=tp),
        cache_config=SimpleNamespace(prefix_caching_hash_algo="sha256_cbor"))


def kv_cache_config(mla=False, hybrid=False, **changes):
    if hybrid:
        fields = dict(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype="torch.bfloat16")
        window = dict(fields, sliding_window=WINDOW, **changes)
        return SimpleNamespace(num_blocks=NUM_BLOCKS, kv_cache_groups=[
            SimpleNamespace(layer_names=[f"layer.{i}" for i in GROUP_LAYERS[0]],
                            kv_cache_spec=FullAttentionSpec(**fields)),
            SimpleNamespace(layer_names=[f"layer.{i}" for i in GROUP_LAYERS[1]],
                            kv_cache_spec=SlidingWindowSpec(**window))])
    spec = SimpleNamespace(block_size=BS, num_kv_heads=1, head_size=MLA_DIM,
                           dtype="torch.bfloat16") if mla else \
        SimpleNamespace(block_size=BS, num_kv_heads=HEADS, head_size=DIM, dtype="torch.bfloat16")
    return SimpleNamespace(
        num_blocks=NUM_BLOCKS,
        kv_cache_groups=[SimpleNamespace(layer_names=[f"layer.{i}" for i in range(LAYERS)],
                                         kv_cache_spec=spec)])


KV_CACHE_CONFIG = kv_cache_config()


def call_over(out, inp, message):
    """Sends one pickled message and reads the pickled answer."""
    data = pickle.dumps(message)
    out.write(struct.pack("<Q", len(data)) + data)
    out.flush()
    return read_message(inp)


def read_message(inp):
    n = struct.unpack("<Q", inp.read(8))[0]
    return pickle.loads(inp.read(n))


class WorkerProcess:
    """A worker in a process of its own (python3 vllm_sim.py), driven over
    its stdin and stdout: only pickled metadata and results cross, as
    between vLLM's scheduler and its workers. `model`: mha, mla or hybrid."""

    def __init__(self, pythonpath, address, tp, rank, async_loads=False, on_gpu=False,
                 model="mha"):
        self._proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), pythonpath, address, str(tp), str(rank),
             "async" if async_loads else "sync", "gpu" if on_gpu else "host", model],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def call(self, command, *args):
        status, value = call_over(self._proc.stdin, self._proc.stdout, (command, args))
        if status != "ok":
            raise AssertionError(f"worker: {value}")
        return value

    def shutdown(self):
        self.call("shutdown")
        self._proc.wait(10)
        self._proc.stdin.close()
        self._proc.stdout.close()


class Rank:
    """One worker: its connector and its KV tensors. Lives in its own process
    (WorkerProcess); runs the worker half of each step."""

    def __init__(self, address, tp, rank, async_loads=False, on_gpu=False, mla=False,
                 hybrid=False, layerwise=False):
        self.rank = rank
        self.mla = mla
        self.hybrid = hybrid
        self.layerwise = layerwise
        self.connector = KvtierConnectorV1(
            vllm_config(address, tp, rank, async_loads, mla, LAYERS if layerwise else 1),
            KVConnectorRole.WORKER, kv_cache_config(mla, hybrid))
        self.early_reads = []  # (block, layer) wrong when its layer's wait returned
        self.order_violations = 0  # group 1 loads that waited for layer 0's wait in vain
        self.layer0_ready = threading.Event()
        self.forward_done = threading.Event()
        self.skip_waits = False  # an engine that never calls wait_for_layer_load
        # FlashAttention's (2, num_blocks, ...) per layer, or MLA's (num_blocks, bs, dim).
        shape = (NUM_BLOCKS, BS, MLA_DIM) if mla else (2, NUM_BLOCKS, BS, HEADS, DIM)
        if hybrid:  # a tensor per pair of layers, one of each group
            shared = [HostTensor(shape) for _ in GROUP_LAYERS[0]]
            self.tensors = {f"layer.{layer}": shared[i] for g in GROUP_LAYERS
                            for i, layer in enumerate(g)}
            self.tensors = dict(sorted(self.tensors.items()))
        else:
            self.tensors = {f"layer.{i}": HostTensor(shape) for i in range(LAYERS)}
        for t in self.tensors.values():
            t.is_cuda = on_gpu  # shared with the daemon by (fake) CUDA IPC handles
        self.connector.register_kv_caches(self.tensors)
        self.failures = 0  # loads the daemon is made to fail (the poisoning case)
        self.stats = KvtierConnectorV1.build_kv_connector_stats()
        client = self.connector._client  # the one its transfers call
        real = client.load

        def load(*args, **kwargs):
            if self.failures > 0:
                self.failures -= 1
                raise KvtierError(grpc.StatusCode.UNAVAILABLE, "injected")
            return real(*args, **kwargs)
        client.load = load

    def _span(self, t, half, block):
        return t.data_ptr() + block * t.stride()[0] * 2 if self.mla else t.span(half, block)

    def _layers(self, group):
        if not self.hybrid:
            return range(LAYERS)
        return GROUP_LAYERS[group]

    def write(self, block, data_of, group=0):
        halves, size = parts(self.mla)
        for layer in self._layers(group):
            t = self.tensors[f"layer.{layer}"]
            for half in halves:
                ctypes.memmove(self._span(t, half, block), data_of(layer, half), size)

    def read(self, block, group=0):
        halves, size = parts(self.mla)
        return b"".join(ctypes.string_at(self._span(self.tensors[f"layer.{layer}"], h, block),
                                         size)
                        for layer in self._layers(group) for h in halves)

    def _groups(self, blocks):
        """A step's blocks per group: a hybrid engine passes a list per group."""
        return blocks if self.hybrid else (blocks,)

    def step(self, meta, blocks, hashes, begin, end):
        """bind, start_load_kv, the layers, the forward pass, wait_for_save,
        get_finished, get_block_ids_with_load_errors, clear: vLLM's worker
        step. Returns the failed blocks and the requests whose background
        loads finished."""
        w = self.connector
        w.bind_connector_metadata(pickle.loads(meta))
        self.layer0_ready.clear()
        self.forward_done.clear()
        w.start_load_kv(SimpleNamespace())
        plan = w._connector_metadata.plan
        loaded = [(op.first_index + j, op.engine_blocks[j][0]) for op in plan.loads
                  if not op.asynchronous for j in range(len(op.keys))]
        read_wrong = set()  # loaded blocks a layer read wrong (layer-wise)
        for layer_index, layer in enumerate(self.tensors):
            if not self.skip_waits:
                w.wait_for_layer_load(layer)
            # What the layer's attention reads now.
            for i, b in loaded if self.layerwise else ():
                t = self.tensors[layer]
                if any(ctypes.string_at(t.span(half, b), SPAN) !=
                       kv(hashes[i], layer_index, half, self.rank) for half in (0, 1)):
                    read_wrong.add(i)
                    self.early_reads.append((i, layer_index))
            if layer_index == 0:
                self.layer0_ready.set()
        # The forward pass: every block the step touches. On a bad prefix (a
        # block whose load failed, or that a layer read before it was in)
        # the KV it computes is wrong.
        bad = w._load_errors  # what the step's loads reported (peek)
        groups = self._groups(blocks)
        first_bad = min([groups[0].index(b) for b in bad if b in groups[0]] + list(read_wrong),
                        default=None)
        size = parts(self.mla)[1]
        rank = 0 if self.mla else self.rank
        for i in range(begin // BS, min(len(hashes), -(-end // BS))):
            h, poisoned = hashes[i], first_bad is not None and i >= first_bad
            # A recompute after a failed hybrid load writes the window group's
            # out-of-window blocks into the null block, as vLLM's slot mapping does.
            for g, ids in enumerate(groups):
                self.write(ids[i], lambda layer, half, h=h, p=poisoned:
                           b"\x66" * size if p else kv(h, layer, half, rank, size), g)
        self.forward_done.set()
        w.wait_for_save()
        _, finished = w.get_finished(set())
        errors = w.get_block_ids_with_load_errors()
        step_stats = w.get_kv_connector_stats()
        if step_stats is not None:
            self.stats.aggregate(step_stats)
        w.clear_connector_metadata()
        return errors, finished or set()

    def handle(self, command, *args):
        if command == "stale":  # blocks reused: whatever another request left
            for b in args[0]:
                for g in range(len(GROUP_LAYERS) if self.hybrid else 1):
                    self.write(b, lambda layer, half: b"\xee" * parts(self.mla)[1], g)
        elif command == "step":
            return self.step(*args)
        elif command == "verify":  # every block of group 0, the window's of group 1
            blocks, hashes = args
            wrong = []
            for g, ids in enumerate(self._groups(blocks)):
                first = 0 if g == 0 else len(hashes) - WINDOW_BLOCKS
                wrong += [(g, i) for i, h in enumerate(hashes) if i >= first and
                          self.read(ids[i], g) != block_kv(h, self.rank, self.mla,
                                                           self._layers(g))]
            return wrong
        elif command == "read":
            return self.read(*args)
        elif command == "hold_later_groups":  # group 1 loads wait for layer 0's turn
            client = self.connector._client
            inner = client.load
            # ... or, with "forward", until the forward pass ended.
            # The second argument: how many calls to hold (default: all).
            event = self.forward_done if args and args[0] == "forward" else self.layer0_ready
            left = [args[1] if len(args) > 1 else float("inf")]

            def load(ns, region, refs, *a, **kw):
                if left[0] > 0 and any(r.group >= 1 for r in refs):
                    left[0] -= 1
                    if not event.wait(5):
                        self.order_violations += 1
                return inner(ns, region, refs, *a, **kw)
            client.load = load
        elif command == "fail_later_groups":  # the next n group >= 1 load calls raise
            client, left = self.connector._client, [args[0]]
            inner = client.load

            def load(ns, region, refs, *a, **kw):
                if left[0] > 0 and any(r.group >= 1 for r in refs):
                    left[0] -= 1
                    raise KvtierError(grpc.StatusCode.UNAVAILABLE, "injected")
                return inner(ns, region, refs, *a, **kw)
            client.load = load
        elif command == "skip_layer_waits":
            self.skip_waits = True
        elif command == "layerwise_report":
            return self.early_reads, self.order_violations, self.connector._layerwise
        elif command == "lose_window":  # the daemon loses group 1's blocks before a load
            client = self.connector._client
            inner = client.load

            def load(ns, region, refs, *a, **kw):
                refs = [r if r.group == 0 else type(r)(b"lost", r.offset, r.size,
                                                       segments=r.segments, group=r.group)
                        for r in refs]
                return inner(ns, region, refs, *a, **kw)
            client.load = load
        elif command == "fail_loads":
            self.failures = args[0]
        elif command == "stats":  # vLLM's per-step stats, summed like its logger
            total = KvtierConnectorV1.build_kv_connector_stats()
            total.aggregate(pickle.loads(pickle.dumps(self.stats)))
            return total.reduce()
        elif command == "disabled_reason":
            return self.connector.disabled_reason
        return None




def serve(address, tp, rank, async_loads, on_gpu, model):
    r = Rank(address, tp, rank, async_loads, on_gpu, model == "mla", model == "hybrid",
             model == "layerwise")
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # only protocol frames on the real stdout
    while True:
        command, args = read_message(inp)
        try:
            answer = ("ok", None) if command == "shutdown" else ("ok", r.handle(command, *args))
        except Exception as e:
            answer = ("error", repr(e))
        data = pickle.dumps(answer)
        out.write(struct.pack("<Q", len(data)) + data)
        out.flush()
        if command == "shutdown":
            r.connector.shutdown()
            return


if __name__ == "__main__":
    serve(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "async",
          sys.argv[6] == "gpu", sys.argv[7])
