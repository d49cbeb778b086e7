"""KV cache layouts on real CPU tensors (Debian's python3-torch): for each
attention backend's shape and stride order, blocks saved from some engine
blocks through the daemon and loaded into others come back equal, tensor
by tensor, whatever the layout (kvtier.engines.kv_layout reads it from the
tensors' shapes and strides).

Usage: python3 torch_layout_test.py KVTIERD PYTHONPATH
"""

import os
import sys
import unittest

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[:1]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, HERE)

try:
    import torch
except ImportError:  # the test says so and skips
    torch = None

from engine_sim import daemon_for  # noqa: E402

from kvtier import Client, KvLayoutSpec, NamespaceOptions  # noqa: E402
from kvtier.engines.kv_layout import BlockLayout, TensorGeometry  # noqa: E402
from kvtier.engines.staged_transfer import StagedTransfer  # noqa: E402

NB, BS, H, D, L = 24, 16, 2, 32, 3


def physical(shape, order):
    """A tensor of logical `shape` whose memory is laid out in `order` (the
    backend's stride order: physical dim i is logical dim order[i])."""
    t = torch.randn([shape[i] for i in order]).to(torch.bfloat16)
    inverse = [order.index(i) for i in range(len(order))]
    return t.permute(*inverse)


def layouts():
    """(name, per-layer tensors, block dim) as each backend allocates them."""
    fa = (2, NB, BS, H, D)
    fi = (NB, 2, BS, H, D)
    yield "flash_attn NHD", [physical(fa, (0, 1, 2, 3, 4)) for _ in range(L)], 1
    yield "flash_attn HND", [physical(fa, (0, 1, 3, 2, 4)) for _ in range(L)], 1
    yield "flashinfer NHD", [physical(fi, (0, 1, 2, 3, 4)) for _ in range(L)], 0
    yield "flashinfer HND", [physical(fi, (0, 1, 3, 2, 4)) for _ in range(L)], 0
    yield "mla", [physical((NB, BS, 576), (0, 1, 2)) for _ in range(L)], 0
    # One tensor for every layer (cross-layer blocks), logical (L, 2, nb, bs, H, D).
    yield "flash_attn cross-layer NHD", [physical((L, 2, NB, BS, H, D), (2, 0, 1, 3, 4, 5))], 2
    yield "flash_attn cross-layer HND", [physical((L, 2, NB, BS, H, D), (2, 4, 0, 1, 3, 5))], 2


@unittest.skipIf(torch is None, "python3-torch is not installed")
class TorchLayoutTest(unittest.TestCase):
    def setUp(self):
        daemon_for(self, KVTIERD, "kvtier-torch-")
        self.client = Client("unix:" + self.sock, timeout=5)

    def tearDown(self):
        self.client.close()

    def test_every_backend_layout_round_trips(self):
        for name, tensors, block_dim in layouts():
            with self.subTest(name):
                layout = BlockLayout([TensorGeometry(t.data_ptr(), tuple(t.shape),
                                                     tuple(t.stride()), t.element_size())
                                      for t in tensors], NB)
                # A namespace whose blocks are that many bytes (2 x layers x
                # heads x dim x tokens x 2 bytes).
                per_token_layer = layout.block_bytes // (BS * 2 * 2)
                options = NamespaceOptions(name, KvLayoutSpec(per_token_layer, 1, 1, "bf16", BS))
                io = StagedTransfer(self.client, lambda c: c.open_namespace_with(options).id,
                                    layout.block_bytes, 1 << 20)
                try:
                    src, dst = [2, 5, 9, 17], [20, 21, 22, 23]
                    keys = [f"{name}-{b}".encode() for b in src]
                    parents = [b""] + keys[:-1]
                    self.assertEqual(io.save(keys, parents, [layout.spans(b) for b in src]), 4)
                    for t in tensors:
                        t.index_fill_(block_dim, torch.tensor(dst), 0)
                    others = torch.tensor([b for b in range(NB) if b not in dst])
                    before = [t.index_select(block_dim, others).clone() for t in tensors]
                    self.assertEqual(io.load(keys, [layout.spans(b) for b in dst]), 4)
                    for t, kept in zip(tensors, before):
                        self.assertTrue(torch.equal(t.index_select(block_dim, torch.tensor(src)),
                                                    t.index_select(block_dim, torch.tensor(dst))))
                        # And no other block was touched.
                        self.assertTrue(torch.equal(t.index_select(block_dim, others), kept))
                finally:
                    io.close()


if __name__ == "__main__":
    unittest.main()
