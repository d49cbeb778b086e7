"""KvtierConnectorV1 with a hybrid model, driven as vLLM's hybrid allocator
drives it, against a real kvtierd.

The model (vllm_sim.py) has a full-attention KV cache group (group 0) and a
sliding-window one of WINDOW tokens (group 1). The engine here does what
vLLM does to the window group: blocks outside the window of the computed
tokens are replaced by the shared null block (at allocation, for external
tokens; after each step, for blocks that slid out, which are then reused by
others and overwritten), and a recompute after a failed load writes the
window group's out-of-window KV into the null block. vLLM rolls back by
group 0's blocks only.

Usage: python3 vllm_hybrid_test.py KVTIERD PYTHONPATH
"""

import os
import pickle
import sys
import time
import unittest
from types import SimpleNamespace

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[:1]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, os.path.join(HERE, "standins"))
sys.path.insert(0, HERE)

from engine_sim import daemon_for  # noqa: E402
from vllm_sim import (BS, GROUP_LAYERS, NULL_BLOCK, NUM_BLOCKS, SPAN, WINDOW,  # noqa: E402
                      WINDOW_BLOCKS, Request, WorkerProcess, block_kv, kv_cache_config,
                      vllm_config)

from kvtier import Client, KvtierError  # noqa: E402
from kvtier.engines.kv_layout import LayoutError  # noqa: E402
from kvtier.vllm import KvtierConnectorV1  # noqa: E402
from kvtier.vllm.connector import _namespace_options  # noqa: E402
from kvtier.vllm.kv_groups import kv_groups  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorRole  # noqa: E402

STALE = b"\xee" * (2 * SPAN * len(GROUP_LAYERS[0]))  # a block another request left


class KVCacheBlocks:
    """vLLM's KVCacheBlocks: per group, blocks with their id and is_null."""

    def __init__(self, ids):
        self.blocks = tuple([SimpleNamespace(block_id=b, is_null=b == NULL_BLOCK) for b in g]
                            for g in ids)

    def get_block_ids(self):
        return tuple([b.block_id for b in g] for g in self.blocks)


class HybridEngine:
    """vLLM's step loop for one worker, with the hybrid allocator's window
    group (see the module docstring)."""

    def __init__(self, address, async_loads=False):
        self.scheduler = KvtierConnectorV1(vllm_config(address, 1, 0, async_loads),
                                           KVConnectorRole.SCHEDULER,
                                           kv_cache_config(hybrid=True))
        self.worker = WorkerProcess(PYTHONPATH, address, 1, 0, async_loads, False, "hybrid")
        self.free = [b for b in range(NUM_BLOCKS) if b != NULL_BLOCK]
        self.worker.call("stale", [NULL_BLOCK])
        self.before_load = None
        self.reported = set()  # the blocks the worker reported failed, last request
        # vLLM nulls a window group's blocks outside the window of the
        # external tokens at allocation; False: real blocks for them too.
        self.null_at_allocation = True

    def shutdown(self):
        self.worker.shutdown()
        self.scheduler.shutdown()

    def null_untouched(self):
        return all(self.worker.call("read", NULL_BLOCK, g) == STALE for g in (0, 1))

    def _step(self, meta, blocks, req, begin, end):
        failed, finished = self.worker.call("step", meta, blocks, req.block_hashes, begin, end)
        self.reported |= failed
        self.scheduler.update_connector_output(SimpleNamespace(invalid_block_ids=failed))
        return failed, finished

    def _rollback(self, req, full, failed):
        """vLLM's rollback: by group 0's blocks only."""
        bad = [full.index(b) for b in failed if b in full]
        self.assertion(not set(failed) - set(full), "a failed block outside group 0")
        if bad:
            req.num_computed_tokens = min(req.num_computed_tokens, min(bad) * BS)

    def assertion(self, ok, what):
        if not ok:
            raise AssertionError(what)

    def _slide(self, window, computed):
        """Blocks wholly before the window of `computed` tokens: freed (and
        reused by someone else), the null block in their place."""
        first_needed = computed - WINDOW + 1
        for i, b in enumerate(window):
            if b != NULL_BLOCK and (i + 1) * BS <= first_needed:
                self.worker.call("stale", [b])
                self.free.insert(0, b)
                window[i] = NULL_BLOCK

    def serve(self, req, chunk=10_000):
        ext, load_async = self.scheduler.get_num_new_matched_tokens(req, 0)
        self.reported = set()
        n = -(-req.num_tokens // BS)
        full = [self.free.pop() for _ in range(n)]
        window = [self.free.pop() for _ in range(n)]
        self.worker.call("stale", full + window)
        if self.null_at_allocation:  # external tokens outside the window
            self._slide(window, ext)
        blocks = (full, window)
        self.scheduler.update_state_after_alloc(req, KVCacheBlocks(blocks), ext)
        req.num_computed_tokens = ext
        if self.before_load is not None:
            self.before_load(req)
        first = True
        if load_async:  # WAITING_FOR_REMOTE_KVS until the worker reports it
            deadline = time.monotonic() + 30
            empty = SimpleNamespace(
                scheduled_new_reqs=[], num_scheduled_tokens={}, finished_req_ids=set(),
                scheduled_cached_reqs=SimpleNamespace(req_ids=[], resumed_req_ids=set(),
                                                      new_block_ids=[], num_computed_tokens=[]))
            while True:
                self.assertion(time.monotonic() < deadline, "a background load never finished")
                meta = pickle.dumps(self.scheduler.build_connector_meta(empty))
                failed, finished = self._step(meta, blocks, req, 0, 0)
                self._rollback(req, full, failed)
                if req.request_id in finished:
                    break
                time.sleep(0.001)
            self.scheduler.update_state_after_alloc(req, KVCacheBlocks(blocks), 0)
        while req.num_computed_tokens < req.num_tokens:
            n = min(chunk, req.num_tokens - req.num_computed_tokens)
            new = [SimpleNamespace(req_id=req.request_id, block_ids=(list(full), list(window)),
                                   num_computed_tokens=req.num_computed_tokens)] if first else []
            cached = SimpleNamespace(
                req_ids=[] if first else [req.request_id], resumed_req_ids=set(),
                new_block_ids=[] if first else [None],
                num_computed_tokens=[] if first else [req.num_computed_tokens])
            out = SimpleNamespace(scheduled_new_reqs=new, scheduled_cached_reqs=cached,
                                  num_scheduled_tokens={req.request_id: n},
                                  finished_req_ids=set())
            meta = pickle.dumps(self.scheduler.build_connector_meta(out))
            begin, end = req.num_computed_tokens, req.num_computed_tokens + n
            failed, _ = self._step(meta, blocks, req, begin, end)
            req.num_computed_tokens = end
            self._rollback(req, full, failed)
            self._slide(window, req.num_computed_tokens)
            first = False
        wrong = self.worker.call("verify", blocks, req.block_hashes)
        self.assertion(not wrong, f"(group, block) {wrong} are wrong")
        self.scheduler.request_finished_all_groups(req, (list(full), list(window)))
        self.free.extend(full + [b for b in window if b != NULL_BLOCK])
        self.full = full
        return ext


class HybridConnectorTest(unittest.TestCase):
    def setUp(self):
        daemon_for(self, KVTIERD, "kvtier-hybrid-")
        self.address = "unix:" + self.sock
        self.engine = HybridEngine(self.address)
        self.addCleanup(lambda: self.engine.shutdown())
        self.assertEqual(self.engine.worker.call("disabled_reason"), "")
        self.client = Client(self.address, timeout=5)
        self.addCleanup(self.client.close)
        self.ns = self.client.open_namespace_with(_namespace_options(
            vllm_config(self.address), kv_cache_config(hybrid=True), 0, 1))

    def stats(self):
        return self.engine.worker.call("stats")

    def daemon_block(self, key, group):
        try:
            return self.client.get(self.ns.id, [key], group=group)[0]
        except KvtierError:
            return None

    def test_the_namespace_has_a_layer_group_per_kv_cache_group(self):
        layers = 2 * len(GROUP_LAYERS[0])
        self.assertEqual(self.ns.group_block_bytes, [layers * SPAN, layers * SPAN])
        groups = kv_groups(kv_cache_config(hybrid=True), 1)
        self.assertEqual([(g.kind, g.layers, g.window_tokens) for g in groups.layer_groups],
                         [("full_attention", [0, 2], 0), ("sliding_window", [1, 3], WINDOW)])
        self.assertEqual(groups.windows, [WINDOW_BLOCKS])

    def test_a_hit_loads_every_full_block_and_only_the_window(self):
        tokens = list(range(8 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        # Every block of both groups was saved while it was real.
        self.assertEqual(self.stats()["saved_blocks"], 8 + 8)
        for i, h in enumerate(Request("a", tokens).block_hashes):
            self.assertEqual(self.daemon_block(h, 0), block_kv(h, layers=GROUP_LAYERS[0]), i)
            self.assertEqual(self.daemon_block(h, 1), block_kv(h, layers=GROUP_LAYERS[1]), i)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 8 * BS)
        # 8 full-attention blocks and the window's 2; nothing into the null block.
        self.assertEqual(self.stats()["loaded_blocks"], 8 + WINDOW_BLOCKS)
        self.assertTrue(self.engine.null_untouched())
        # A prompt sharing 5 blocks: the window of cut 5 is blocks 3 and 4;
        # its 3 new blocks are saved in both groups.
        other = tokens[:5 * BS] + [9999] * (3 * BS)
        self.assertEqual(self.engine.serve(Request("c", other)), 5 * BS)
        stats = self.stats()
        self.assertEqual(stats["loaded_blocks"], 8 + WINDOW_BLOCKS + 5 + WINDOW_BLOCKS)
        self.assertEqual(stats["saved_blocks"], 8 + 8 + 3 + 3)
        self.assertEqual(stats.get("load_failures", 0), 0)
        # An engine that allocates real blocks outside the window: still only
        # the window is loaded.
        self.engine.null_at_allocation = False
        self.assertEqual(self.engine.serve(Request("d", tokens)), 8 * BS)
        self.assertEqual(self.stats()["loaded_blocks"], stats["loaded_blocks"] + 8 + WINDOW_BLOCKS)

    def test_chunked_prefill_saves_window_blocks_before_they_slide_out(self):
        tokens = list(range(1000, 1000 + 7 * BS + 3))
        # Chunks of 21 tokens: window blocks leave (and are overwritten)
        # while the prefill goes on.
        self.assertEqual(self.engine.serve(Request("a", tokens), chunk=BS + 5), 0)
        for i, h in enumerate(Request("a", tokens).block_hashes):
            self.assertEqual(self.daemon_block(h, 1), block_kv(h, layers=GROUP_LAYERS[1]), i)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 7 * BS)
        self.assertTrue(self.engine.null_untouched())

    def test_a_lost_window_block_fails_the_whole_load(self):
        tokens = list(range(2000, 2000 + 6 * BS + 1))
        self.engine.serve(Request("a", tokens))
        # The full-attention blocks load, the window's do not: the cut cannot
        # be restored, so every external block is reported (by group 0) and
        # recomputed; serve checks the bytes.
        self.engine.worker.call("lose_window")
        self.assertEqual(self.engine.serve(Request("b", tokens)), 6 * BS)
        self.assertEqual(self.engine.reported, set(self.engine.full[:6]))
        self.assertGreater(self.stats()["load_failures"], 0)

    def test_the_null_block_is_never_saved_after_a_recompute(self):
        tokens = list(range(3000, 3000 + 6 * BS + 1))
        self.engine.serve(Request("a", tokens))
        hashes = Request("a", tokens).block_hashes
        # The daemon loses everything between lookup and load: the recompute
        # writes the window group's blocks 0..3 into the null block (their
        # window entries are null since allocation); none may be stored.
        self.engine.before_load = lambda req: self.client.delete(self.ns.id, [hashes[0]],
                                                                 recursive=True)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 6 * BS)
        self.engine.before_load = None
        for i, h in enumerate(hashes):
            got = self.daemon_block(h, 1)
            self.assertIn(got, (None, block_kv(h, layers=GROUP_LAYERS[1])), f"block {i}")
            self.assertEqual(got is None, i < 6 - WINDOW_BLOCKS, f"block {i}")
        # The recomputed prefix is restorable again: a full hit.
        self.assertEqual(self.engine.serve(Request("c", tokens)), 6 * BS)

    def test_background_loads_of_a_hybrid_model(self):
        self.engine.shutdown()
        self.engine = HybridEngine(self.address, async_loads=True)
        tokens = list(range(4000, 4000 + 5 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 5 * BS)
        self.engine.worker.call("lose_window")
        self.assertEqual(self.engine.serve(Request("c", tokens)), 5 * BS)  # recomputed
        self.assertEqual(self.engine.reported, set(self.engine.full[:5]))
        self.assertGreater(self.stats()["load_failures"], 0)


class HybridRefusalTest(unittest.TestCase):
    """What the connector does not serve yet is refused at construction,
    with the reason; the engine runs without the cache."""

    def refused(self, config, ratio=1):
        with self.assertRaises(LayoutError) as e:
            _namespace_options(vllm_config("unix:/nonexistent"), config, 0, ratio)
        return str(e.exception)

    def test_unsupported_hybrids_are_refused_with_the_reason(self):
        config = kv_cache_config(hybrid=True)
        self.assertIn("kvtier_block_ratio 1", self.refused(config, ratio=2))
        self.assertIn("num_kv_heads", self.refused(kv_cache_config(hybrid=True, num_kv_heads=2)))
        swapped = kv_cache_config(hybrid=True)
        swapped.kv_cache_groups.reverse()
        self.assertIn("group 0 is not full attention", self.refused(swapped))
        mamba = kv_cache_config(hybrid=True)
        mamba.kv_cache_groups[1].kv_cache_spec = type("MambaSpec", (), {"block_size": BS})()
        self.assertIn("Mamba", self.refused(mamba))
        alone = kv_cache_config(hybrid=True)
        del alone.kv_cache_groups[0]
        self.assertIn("sliding-window layers alone", self.refused(alone))

    def test_the_null_block_is_also_read_from_the_engines_block_pool(self):
        s = KvtierConnectorV1(vllm_config("unix:/nonexistent"), KVConnectorRole.SCHEDULER,
                              kv_cache_config(hybrid=True))
        s.bind_gpu_block_pool(SimpleNamespace(null_block=SimpleNamespace(block_id=41)))
        s.bind_gpu_block_pool(SimpleNamespace())  # a pool without one: nothing, no error
        self.assertEqual(s._scheduler.null_ids, {41})
        s.shutdown()

    def test_a_refused_hybrid_never_reports_a_hit(self):
        config = kv_cache_config(hybrid=True, num_kv_heads=2)
        with self.assertLogs("kvtier.vllm", "ERROR"):
            s = KvtierConnectorV1(vllm_config("unix:/nonexistent"), KVConnectorRole.SCHEDULER,
                                  config)
        self.assertIn("num_kv_heads", s.disabled_reason)
        self.assertEqual(s.get_num_new_matched_tokens(Request("r", list(range(4 * BS + 1))), 0),
                         (0, False))
        s.shutdown()


if __name__ == "__main__":
    unittest.main()
