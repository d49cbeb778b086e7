"""DirectTransfer: the daemon copying blocks straight between its tiers and
the engine's own KV memory, registered once as a region (no staging copy).

On this machine the engine memory is a shared-memory file holding real CPU
tensors (Debian's python3-torch) in each attention backend's layout; the
daemon reads and writes it through the same segments it uses for GPU
tensors registered by CUDA IPC. Also: RegionSpace's offsets, merging and
refusals; cuda_region's export of torch storages (faked: no GPU here) and
its device mapping; a CUDA region the daemon cannot open is a counted
failure, never an exception; a daemon restart costs the calls in flight.
The real CUDA IPC round trip is cuda_ipc_test.py (GPU machines).

Usage: python3 direct_transfer_test.py KVTIERD PYTHONPATH
"""

import os
import sys
import time
import unittest
from types import SimpleNamespace

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[:1]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, HERE)

try:
    import torch
except ImportError:  # the layout tests say so and skip
    torch = None

from engine_sim import daemon_for, start_daemon  # noqa: E402

from kvtier import Client, KvLayoutSpec, NamespaceOptions, SharedRegion  # noqa: E402
from kvtier.engines.cuda_region import cuda_region, daemon_device, ipc_handle  # noqa: E402
from kvtier.engines.direct_transfer import DirectTransfer, RegionSpace  # noqa: E402
from kvtier.engines.kv_layout import BlockLayout, LayoutError, TensorGeometry  # noqa: E402

NB, BS, H, D, L = 24, 16, 2, 32, 3


class RegionSpaceTest(unittest.TestCase):
    def test_offsets_follow_the_registration_order_not_the_addresses(self):
        space = RegionSpace([(0x10000, 4096), (0x1000, 1024)])  # region: piece 0 then 1
        self.assertEqual(space.size, 5120)
        self.assertEqual(space.segments([(0x1000, 512)]), [(4096, 512)])
        self.assertEqual(space.segments([(0x10000 + 100, 10)]), [(100, 10)])

    def test_adjacent_spans_merge_and_others_stay_apart(self):
        space = RegionSpace([(0x1000, 4096)])
        self.assertEqual(space.segments([(0x1000, 64), (0x1040, 64), (0x1100, 64)]),
                         [(0, 128), (256, 64)])

    def test_refusals(self):
        space = RegionSpace([(0x1000, 4096), (0x3000, 4096)])
        for spans in ([(0x1000 + 4000, 200)],  # runs past its piece
                      [(0x800, 16)],           # before any piece
                      [(0x2800, 16)]):         # between pieces
            with self.assertRaises(LayoutError):
                space.segments(spans)
        with self.assertRaisesRegex(LayoutError, "at most 1024"):
            space.segments([(0x1000 + 2 * i, 1) for i in range(1025)])
        with self.assertRaisesRegex(LayoutError, "overlap"):
            RegionSpace([(0x1000, 4096), (0x1800, 16)])
        with self.assertRaises(LayoutError):
            RegionSpace([])


class FakeCudaTensor:
    """What cuda_region reads of a torch CUDA tensor: its device and its
    storage's IPC export (device, handle, bytes, offset in the allocation)."""

    def __init__(self, storage_ptr, nbytes, alloc_offset, index=0, handle=b"\x07" * 64):
        self.device = SimpleNamespace(index=index)
        self._storage = SimpleNamespace(
            data_ptr=lambda: storage_ptr, nbytes=lambda: nbytes,
            _share_cuda_=lambda: (index, handle, nbytes, alloc_offset, b"", 0, b"", False))

    def untyped_storage(self):
        return self._storage


class CudaRegionTest(unittest.TestCase):
    def test_each_storage_is_exported_once_in_address_order(self):
        shared = FakeCudaTensor(0x9000, 8192, 4096, handle=b"\x02" * 64)
        r = cuda_region([FakeCudaTensor(0x20000, 4096, 0, handle=b"\x01" * 64), shared, shared],
                        device=5)
        self.assertEqual(r.tensors, [(b"\x02" * 64, 4096, 8192), (b"\x01" * 64, 0, 4096)])
        self.assertEqual(r.device, 5)
        self.assertEqual(r.space.segments([(0x20000 + 16, 16)]), [(8192 + 16, 16)])

    def test_handles_of_old_and_new_torch_and_refusals(self):
        raw = bytes(range(64))
        self.assertEqual(ipc_handle(raw), raw)                 # torch < 2.2: the handle
        self.assertEqual(ipc_handle(b"\x02c" + raw), raw)      # version, 'c', the handle
        self.assertEqual(ipc_handle(b"\x03c" + raw), raw)
        with self.assertRaisesRegex(LayoutError, "expandable"):
            ipc_handle(b"\x02e" + b"\x00" * 40)
        for bad in (b"", raw[:63], b"\x02x" + raw):
            with self.assertRaises(LayoutError):
                ipc_handle(bad)
        versioned = FakeCudaTensor(0x1000, 64, 0, handle=b"\x02c" + raw)
        self.assertEqual(cuda_region([versioned]).tensors, [(raw, 0, 64)])

    def test_the_daemon_device_follows_cuda_visible_devices(self):
        self.assertEqual(daemon_device(1, "2,3"), 3)
        self.assertEqual(daemon_device(0, ""), 0)
        self.assertEqual(daemon_device(1, "GPU-1234,GPU-5678"), 1)  # UUIDs: not mapped
        with self.assertRaisesRegex(LayoutError, "2 GPUs"):
            cuda_region([FakeCudaTensor(0x1000, 64, 0, 0), FakeCudaTensor(0x2000, 64, 0, 1)])


def shm_tensor(region, offset, shape, order):
    """A bf16 tensor of logical `shape` at `offset` bytes into `region`, laid
    out in memory in `order` (as physical() in torch_layout_test)."""
    phys = [shape[i] for i in order]
    n = 1
    for d in phys:
        n *= d
    flat = torch.frombuffer(region.buffer, dtype=torch.bfloat16, count=n,
                            offset=offset)
    inverse = [order.index(i) for i in range(len(order))]
    return flat.view(phys).permute(*inverse), n * 2


LAYOUTS = [  # name, logical shape, stride order, tensors
    ("flash_attn NHD", (2, NB, BS, H, D), (0, 1, 2, 3, 4), L),
    ("flash_attn HND", (2, NB, BS, H, D), (0, 1, 3, 2, 4), L),
    ("flashinfer HND", (NB, 2, BS, H, D), (0, 1, 3, 2, 4), L),
    ("mla", (NB, BS, 576), (0, 1, 2), L),
    ("flash_attn cross-layer HND", (L, 2, NB, BS, H, D), (2, 4, 0, 1, 3, 5), 1),
]


@unittest.skipIf(torch is None, "python3-torch is not installed")
class DirectTransferTest(unittest.TestCase):
    def setUp(self):
        daemon_for(self, KVTIERD, "kvtier-direct-")
        self.client = Client("unix:" + self.sock, timeout=5, max_reconnect_backoff_ms=1000)
        self.region = SharedRegion(8 << 20)

    def tearDown(self):
        self.client.close()
        self.region.close()

    def engine(self, name, shape, order, count):
        """KV tensors in the shared region, random; their layout; a
        DirectTransfer over the region."""
        tensors, at = [], 0
        for _ in range(count):
            t, n = shm_tensor(self.region, at, shape, order)
            t.copy_(torch.randn(shape).to(torch.bfloat16))
            tensors.append(t)
            at += n
        layout = BlockLayout([TensorGeometry(t.data_ptr(), tuple(t.shape), tuple(t.stride()),
                                             t.element_size()) for t in tensors], NB)
        opts = NamespaceOptions(model_id="direct/" + name, layout=KvLayoutSpec(
            num_layers=1, num_kv_heads=1, head_dim=layout.block_bytes // (2 * BS * 2),
            dtype="bf16", tokens_per_block=BS))
        base = tensors[0].data_ptr()  # tensor 0 starts at the region's first byte
        transfer = DirectTransfer(
            self.client, lambda c: c.open_namespace_with(opts).id,
            lambda c: c.register_memory(self.region.path, self.region.size),
            RegionSpace([(base, self.region.size)]), layout.block_bytes)
        return tensors, layout, transfer, opts

    def test_every_layout_round_trips_without_a_staging_copy(self):
        for name, shape, order, count in LAYOUTS:
            with self.subTest(layout=name):
                tensors, layout, transfer, opts = self.engine(name, shape, order, count)
                keys = [f"{name}-{i}".encode() for i in range(4)]
                spans = [layout.spans(b) for b in range(4)]
                self.assertEqual(transfer.save(keys, [b""] + keys[:-1], spans), 4)
                # The daemon holds each block as its spans in order.
                ns = self.client.open_namespace_with(opts).id
                for k, s in zip(keys, spans):
                    want = b"".join(bytes(self.region.buffer[a - tensors[0].data_ptr():
                                                             a - tensors[0].data_ptr() + n])
                                    for a, n in s)
                    self.assertEqual(self.client.get(ns, [k])[0], want)
                before = [t.clone() for t in tensors]
                self.assertEqual(transfer.load(keys, [layout.spans(b) for b in range(10, 14)]), 4)
                dim = shape.index(NB)
                for t, b in zip(tensors, before):
                    self.assertTrue(torch.equal(t.narrow(dim, 10, 4), b.narrow(dim, 0, 4)), name)
                self.assertEqual(transfer.stats["saved_blocks"], 4)
                self.assertEqual(transfer.stats["loaded_blocks"], 4)
                transfer.close()

    def test_misses_refusals_and_a_daemon_restart_are_counts(self):
        tensors, layout, transfer, _ = self.engine("restart", *LAYOUTS[0][1:])
        spans = [layout.spans(b) for b in range(3)]
        self.assertEqual(transfer.load([b"never"], spans[:1]), 0)
        self.assertEqual(transfer.stats["load_failures"], 1)
        self.assertEqual(transfer.save([b"a"], [b""], [spans[0][:-1]]), 0)  # short spans
        self.assertEqual(transfer.stats["save_failures"], 1)
        self.proc.kill()
        self.proc.wait(10)
        os.unlink(self.sock)
        self.assertEqual(transfer.save([b"a", b"b"], [b"", b"a"], spans[:2]), 0)
        self.assertEqual(transfer.stats["daemon_errors"], 2)
        self.proc = start_daemon(KVTIERD, self.sock, self.log)
        # Within the channel's reconnect backoff (capped at 1 s) the transfer
        # opens its namespace and registers its region on the new daemon.
        deadline = time.monotonic() + 10
        while transfer.save([b"a", b"b"], [b"", b"a"], spans[:2]) != 2:
            self.assertLess(time.monotonic(), deadline, "saves never resumed")
            time.sleep(0.2)
        self.assertEqual(transfer.load([b"a", b"b"], spans[1:3]), 2)

    def test_a_cuda_region_the_daemon_cannot_open_is_a_counted_failure(self):
        _, layout, _, opts = self.engine("cuda", *LAYOUTS[0][1:])
        r = cuda_region([FakeCudaTensor(layout.spans(0)[0][0], 1 << 20, 0)], device=0)
        transfer = DirectTransfer(self.client, lambda c: c.open_namespace_with(opts).id,
                                  r.register, r.space, layout.block_bytes, r.sync)
        self.assertEqual(transfer.load([b"k"], [layout.spans(0)]), 0)
        self.assertEqual(transfer.stats["daemon_errors"], 2)  # a CPU daemon, or a bad handle
        self.assertEqual(transfer.stats["load_failures"], 1)
        # What the connector asks at registration: why it cannot serve.
        self.assertIn("refused", transfer.check(layout.spans(0)))
        self.assertIn("outside", transfer.check([(0x10, 16)]))


if __name__ == "__main__":
    unittest.main()
