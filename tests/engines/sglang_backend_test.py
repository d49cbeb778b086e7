"""KvtierHiCacheStorage driven as SGLang's HiCache controller drives it,
against a real kvtierd: SGLang's types from stand-ins (tests/engines/
standins, checked against sglang_interface.py), a host pool of token slots
in host memory in the layer-first and page-first layouts, pages stored from
some slots and fetched into others byte-exact, through both the zero-copy
(host indices) and the generic (flat page) paths; the leading-run existence
check and parent chaining across calls; a daemon that is down; MLA pools
(one latent namespace, written by rank 0, read by every rank).

Usage: python3 sglang_backend_test.py KVTIERD PYTHONPATH
"""

import ctypes
import hashlib
import inspect
import os
import sys
import unittest

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[:1]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, os.path.join(HERE, "standins"))
sys.path.insert(0, HERE)

import sglang_interface  # noqa: E402
from sglang.srt.mem_cache.hicache_storage import (HiCacheStorageConfig,  # noqa: E402
                                                  HiCacheStorageExtraInfo)
from engine_sim import HostTensor, daemon_for  # noqa: E402

from kvtier.sglang import KvtierHiCacheStorage  # noqa: E402

PS, LAYERS, HEADS, DIM, SLOTS = 16, 2, 2, 32, 256
KV_DIM = 96  # an MLA latent: kv_lora_rank + rope dims


class HostPool:
    """SGLang's MHA host pool, or its MLA pool (one latent per token and
    layer), reduced to what a backend reads."""

    def __init__(self, layout, mla=False):
        self.layout, self.page_size, self.size, self.mla = layout, PS, SLOTS, mla
        self.layer_num, self.dtype = LAYERS, "torch.bfloat16"
        if mla:
            self.kv_lora_rank, self.qk_rope_head_dim = KV_DIM - 32, 32
            shape = {"layer_first": (LAYERS, SLOTS, 1, KV_DIM),
                     "page_first": (SLOTS, LAYERS, 1, KV_DIM),
                     "page_first_direct": (SLOTS // PS, LAYERS, PS, 1, KV_DIM)}[layout]
        else:
            self.head_num, self.head_dim = HEADS, DIM
            shape = {"layer_first": (2, LAYERS, SLOTS, HEADS, DIM),
                     "page_first": (2, SLOTS, LAYERS, HEADS, DIM),
                     "page_first_direct": (2, SLOTS // PS, LAYERS, PS, HEADS, DIM)}[layout]
        self.kv_buffer = HostTensor(shape)

    def token_bytes(self, kv, layer, slot):
        t, s = self.kv_buffer, self.kv_buffer.stride()
        idx = {"layer_first": (kv, layer, slot), "page_first": (kv, slot, layer),
               "page_first_direct": (kv, slot // PS, layer, slot % PS)}[self.layout]
        if self.mla:
            idx = idx[1:]
            return t.data_ptr() + sum(i * st for i, st in zip(idx, s)) * 2, KV_DIM * 2
        return t.data_ptr() + sum(i * st for i, st in zip(idx, s)) * 2, HEADS * DIM * 2

    def parts(self):
        return (0,) if self.mla else (0, 1)

    def fill(self, first_slot, tag):
        for slot in range(first_slot, first_slot + PS):
            for kv in self.parts():
                for layer in range(LAYERS):
                    at, n = self.token_bytes(kv, layer, slot)
                    seed = hashlib.sha256(tag + bytes([kv, layer, slot - first_slot])).digest()
                    ctypes.memmove(at, (seed * (n // 32 + 1))[:n], n)

    def page(self, first_slot):
        out = b""
        for slot in range(first_slot, first_slot + PS):
            for kv in self.parts():
                for layer in range(LAYERS):
                    at, n = self.token_bytes(kv, layer, slot)
                    out += ctypes.string_at(at, n)
        return out


class FlatPage:
    """A flat page tensor (the generic path's data page)."""

    def __init__(self, nbytes):
        self._buf = (ctypes.c_char * nbytes)()

    def data_ptr(self):
        return ctypes.addressof(self._buf)

    def numel(self):
        return len(self._buf) // 2

    def element_size(self):
        return 2

    def bytes(self):
        return bytes(self._buf)


def keys_for(tag, n):
    out, prior = [], b""
    for i in range(n):
        h = hashlib.sha256(prior + tag + i.to_bytes(4, "little")).digest()
        out.append(h.hex())
        prior = h
    return out


def config(address, mla=False, v1=True, tp_rank=0, tp_size=1):
    return HiCacheStorageConfig(tp_rank, tp_size, 0, 1, 0, 1, mla, False, False, "sim/model",
                                extra_config={"kvtier_address": address, "kvtier_timeout_s": 2,
                                              "interface_v1": 1 if v1 else 0})


class SglangBackendTest(unittest.TestCase):
    def setUp(self):
        daemon_for(self, KVTIERD, "kvtier-sglang-")
        self.address = "unix:" + self.sock
        self.backends = []

    def tearDown(self):
        for b in self.backends:
            b.close()

    def backend(self, layout="layer_first", **kw):
        b = KvtierHiCacheStorage(config(self.address, **kw), None)
        pool = HostPool(layout, kw.get("mla", False))
        b.register_mem_pool_host(pool)
        self.backends.append(b)
        return b, pool

    def test_interface_matches_the_recorded_one(self):
        for table, required in ((sglang_interface.ABSTRACT, True),
                                (sglang_interface.WITH_DEFAULTS, False)):
            for name, params in table.items():
                if name not in KvtierHiCacheStorage.__dict__:
                    self.assertFalse(required, f"{name} is abstract and not implemented")
                    continue
                got = list(inspect.signature(KvtierHiCacheStorage.__dict__[name]).parameters)[1:]
                self.assertEqual(got, params, name)

    def test_pages_round_trip_through_host_indices_in_every_layout(self):
        for layout in ("layer_first", "page_first", "page_first_direct"):
            b, pool = self.backend(layout)
            self.assertEqual(b.disabled_reason, "")
            keys = keys_for(layout.encode(), 4)
            indices = list(range(0, 4 * PS))  # pages at slots 0, 16, 32, 48
            want = []
            for i in range(4):
                pool.fill(i * PS, f"{layout}{i}".encode())
                want.append(pool.page(i * PS))
            self.assertEqual(b.batch_set_v1(keys, indices), [True] * 4)
            self.assertEqual(b.batch_exists(keys), 4)
            # Fetched into other slots (the pages at 128 and on), byte-exact.
            got = b.batch_get_v1(keys, list(range(128, 128 + 4 * PS)))
            self.assertEqual(got, [True] * 4)
            for i in range(4):
                self.assertEqual(pool.page(128 + i * PS), want[i], f"{layout} page {i}")

    def test_existence_is_a_leading_run_and_chains_across_calls(self):
        b, pool = self.backend()
        keys = keys_for(b"chain", 8)
        self.assertEqual(b.batch_set_v1(keys[:4], list(range(4 * PS))), [True] * 4)
        # The next call names its prefix: the chain continues.
        extra = HiCacheStorageExtraInfo(prefix_keys=keys[:4])
        self.assertEqual(b.batch_set_v1(keys[4:], list(range(4 * PS)), extra), [True] * 4)
        self.assertEqual(b.batch_exists(keys), 8)
        self.assertEqual(b.batch_exists(keys[:2] + keys_for(b"other", 1) + keys[3:]), 2)
        self.assertTrue(b.exists(keys[0]))
        self.assertFalse(b.exists(keys_for(b"never", 1)[0]))
        # A miss fetches nothing and says so.
        self.assertEqual(b.batch_get_v1(keys_for(b"never", 2), list(range(2 * PS))),
                         [False, False])

    def test_the_generic_path_with_flat_pages(self):
        b, pool = self.backend(v1=False)
        page_bytes = 2 * LAYERS * PS * HEADS * DIM * 2
        keys = keys_for(b"flat", 3)
        values = []
        for i in range(3):
            v = FlatPage(page_bytes)
            seed = hashlib.sha256(bytes([i])).digest()
            ctypes.memmove(v.data_ptr(), (seed * (page_bytes // 32))[:page_bytes], page_bytes)
            values.append(v)
        self.assertTrue(b.batch_set(keys, values))
        targets = [FlatPage(page_bytes) for _ in range(3)]
        got = b.batch_get(keys, targets)
        self.assertEqual([t is g for t, g in zip(targets, got)], [True] * 3)
        self.assertEqual([t.bytes() for t in targets], [v.bytes() for v in values])
        self.assertIsNone(b.batch_get(keys_for(b"none", 1), [FlatPage(page_bytes)])[0])

    def test_a_daemon_that_is_down_is_a_miss_and_a_refused_store(self):
        b, pool = self.backend()
        self.proc.kill()
        self.proc.wait(10)
        keys = keys_for(b"down", 2)
        self.assertEqual(b.batch_exists(keys), 0)
        self.assertEqual(b.batch_set_v1(keys, list(range(2 * PS))), [False, False])
        self.assertEqual(b.batch_get_v1(keys, list(range(2 * PS))), [False, False])
        self.assertGreater(b.transfer_stats()["daemon_errors"], 0)
        self.assertIsNone(b.get_stats())

    def test_mla_pages_are_written_once_and_read_by_every_rank(self):
        for layout in ("layer_first", "page_first", "page_first_direct"):
            ranks = [self.backend(layout, mla=True, tp_rank=r, tp_size=2) for r in (0, 1)]
            for b, _ in ranks:
                self.assertEqual(b.disabled_reason, "")
            keys = keys_for(b"mla" + layout.encode(), 3)
            want = []
            for b, pool in ranks:  # both ranks computed the same latent
                for i in range(3):
                    pool.fill(i * PS, f"mla{layout}{i}".encode())
                want = [pool.page(i * PS) for i in range(3)]
                self.assertEqual(b.batch_set_v1(keys, list(range(3 * PS))), [True] * 3)
            self.assertEqual(ranks[0][0].transfer_stats()["saved_blocks"], 3)
            self.assertEqual(ranks[1][0].transfer_stats()["saved_blocks"], 0)
            # Rank 1 reads what rank 0 wrote, into other slots, byte-exact.
            b, pool = ranks[1]
            self.assertEqual(b.batch_exists(keys), 3)
            self.assertEqual(b.batch_get_v1(keys, list(range(128, 128 + 3 * PS))), [True] * 3)
            for i in range(3):
                self.assertEqual(pool.page(128 + i * PS), want[i], f"{layout} page {i}")
            # The daemon took pages of one latent per token and layer: it
            # refuses a Save of another size than its namespace's blocks.
            self.assertEqual(ranks[0][0]._transfer.block_bytes, LAYERS * PS * KV_DIM * 2)


if __name__ == "__main__":
    unittest.main()
