"""KvtierConnectorV1 driven as vLLM drives it, against a real kvtierd.

vLLM's types come from stand-ins (tests/engines/standins, checked against the
recorded interface in vllm_interface.py); the engine is simulated here: the
scheduler-side connector in this process and each worker-side connector in
a process of its own, only the step's pickled metadata and the workers'
results crossing, KV tensors in host memory ((2, num_blocks, block_size, heads,
head_dim) per layer, as vLLM's FlashAttention backend), KV a function of the
prefix so a wrong block shows, vLLM's rollback of num_computed_tokens on
blocks that failed to load. Covers misses, full and partial hits, chunked
prefill, extra keys, a lost block between lookup and load, a load that
fails while its blocks are cached (the poisoning case), and a daemon that
goes away and comes back.

Usage: python3 vllm_connector_test.py KVTIERD PYTHONPATH
"""

import inspect
import itertools
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

import vllm_interface  # noqa: E402
from engine_sim import daemon_for, start_daemon  # noqa: E402
from vllm_sim import (BS, DIM, KV_CACHE_CONFIG, LAYERS, MLA_DIM, NUM_BLOCKS, Request,  # noqa: E402
                      WorkerProcess, block_kv, kv_cache_config, vllm_config)

from kvtier import Client, KvtierError  # noqa: E402
from kvtier.vllm import KvtierConnectorV1  # noqa: E402
from kvtier.vllm.connector import _namespace_options, _retention  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.v1.base import (KVConnectorRole,  # noqa: E402
                                                                supports_hma)

class Engine:
    """vLLM's step loop, reduced to what the connector sees: the scheduler
    here, `tp` workers in processes of their own."""

    def __init__(self, address, tp=1, async_loads=False, on_gpu=False, mla=False,
                 layerwise=False):
        self.scheduler = KvtierConnectorV1(
            vllm_config(address, tp, 0, async_loads, mla, LAYERS if layerwise else 1),
            KVConnectorRole.SCHEDULER, kv_cache_config(mla))
        model = "layerwise" if layerwise else "mla" if mla else "mha"
        self.workers = [WorkerProcess(PYTHONPATH, address, tp, r, async_loads, on_gpu, model)
                        for r in range(tp)]
        self.waited_steps = 0  # steps a request spent waiting for a background load
        self.free = list(range(NUM_BLOCKS))
        self.before_load = None  # a hook run between the lookup and the load

    def shutdown(self):
        for w in self.workers:
            w.shutdown()
        self.scheduler.shutdown()

    def admit(self, req):
        """A waiting request (new or preempted) is scheduled: the connector's
        hit, blocks allocated (holding stale bytes)."""
        ext, load_async = self.scheduler.get_num_new_matched_tokens(req, 0)
        blocks = [self.free.pop() for _ in range(-(-req.num_tokens // BS))]
        for w in self.workers:
            w.call("stale", blocks)
        self.scheduler.update_state_after_alloc(
            req, SimpleNamespace(get_block_ids=lambda: (list(blocks),)), ext)
        req.num_computed_tokens = ext
        if self.before_load is not None:
            self.before_load(req)
        if load_async:
            self.wait_for_load(req, blocks)
        return ext, blocks

    def wait_for_load(self, req, blocks):
        """WAITING_FOR_REMOTE_KVS: steps run without the request until every
        worker reports its load finished; failed blocks roll it back."""
        pending = set(range(len(self.workers)))
        empty = SimpleNamespace(
            scheduled_new_reqs=[], num_scheduled_tokens={}, finished_req_ids=set(),
            scheduled_cached_reqs=SimpleNamespace(req_ids=[], resumed_req_ids=set(),
                                                  new_block_ids=[], num_computed_tokens=[]))
        deadline = time.monotonic() + 30
        while pending:
            assert time.monotonic() < deadline, "a background load never finished"
            meta = pickle.dumps(self.scheduler.build_connector_meta(empty))
            errors = set()
            for rank in list(pending):
                failed, finished = self.workers[rank].call("step", meta, blocks, [], 0, 0)
                errors |= failed
                if req.request_id in finished:
                    pending.discard(rank)
            self.scheduler.update_connector_output(SimpleNamespace(invalid_block_ids=errors))
            if errors:
                req.num_computed_tokens = min(
                    req.num_computed_tokens, min(blocks.index(b) for b in errors) * BS)
            self.waited_steps += 1
            time.sleep(0.001)
        # The scheduler asks nothing again: the request comes back with what loaded.
        self.scheduler.update_state_after_alloc(
            req, SimpleNamespace(get_block_ids=lambda: (list(blocks),)), 0)

    def serve(self, req, chunk=10_000, preempt_after=None):
        """Prefills `req`; returns the tokens the connector supplied at its
        first admission. With `preempt_after`, the request is preempted after
        that many steps (its blocks freed) and resumed."""
        ext, blocks = self.admit(req)
        first_ext, kind, steps = ext, "new", 0
        while req.num_computed_tokens < req.num_tokens:
            if preempt_after is not None and steps == preempt_after:
                self.free.extend(blocks)  # vLLM frees a preempted request's blocks
                req.num_computed_tokens = 0
                _, blocks = self.admit(req)
                kind, preempt_after = "resumed", None
            n = min(chunk, req.num_tokens - req.num_computed_tokens)
            ids = (list(blocks),)
            new = [SimpleNamespace(req_id=req.request_id, block_ids=ids,
                                   num_computed_tokens=req.num_computed_tokens)
                   ] if kind == "new" else []
            cached_ids = [] if kind == "new" else [req.request_id]
            cached = SimpleNamespace(
                req_ids=cached_ids,
                resumed_req_ids={req.request_id} if kind == "resumed" else set(),
                new_block_ids=[ids if kind == "resumed" else None] if cached_ids else [],
                num_computed_tokens=[req.num_computed_tokens] if cached_ids else [])
            out = SimpleNamespace(scheduled_new_reqs=new, scheduled_cached_reqs=cached,
                                  num_scheduled_tokens={req.request_id: n},
                                  finished_req_ids=set())
            meta = pickle.dumps(self.scheduler.build_connector_meta(out))
            begin, end = req.num_computed_tokens, req.num_computed_tokens + n
            errors = set()
            for w in self.workers:
                failed, _ = w.call("step", meta, blocks, req.block_hashes, begin, end)
                errors |= failed
            self.scheduler.update_connector_output(SimpleNamespace(invalid_block_ids=errors))
            if errors:  # vLLM's rollback: recompute from the first failed block
                req.num_computed_tokens = min(blocks.index(b) for b in errors) * BS
            else:
                req.num_computed_tokens = end
            kind, steps = "running", steps + 1
        for rank, w in enumerate(self.workers):
            wrong = w.call("verify", blocks, req.block_hashes)
            assert not wrong, f"rank {rank}: blocks {wrong} are wrong"
        self.scheduler.request_finished_all_groups(req, (list(blocks),))
        self.free.extend(blocks)
        return first_ext


class RetentionParamTest(unittest.TestCase):
    def test_a_requests_retention_priority_comes_from_its_kv_transfer_params(self):
        def req(params):
            return SimpleNamespace(request_id="r", kv_transfer_params=params)
        self.assertEqual(_retention(req({"kvtier_retention_priority": 90})), 90)
        self.assertEqual(_retention(req({"kvtier_retention_priority": 0})), 0)
        self.assertIsNone(_retention(req(None)))
        self.assertIsNone(_retention(req({"other": 1})))
        for bad in (101, -1, "90", 2.5, True):
            with self.assertLogs("kvtier.vllm", "WARNING"):
                self.assertIsNone(_retention(req({"kvtier_retention_priority": bad})))


class VllmConnectorTest(unittest.TestCase):
    def setUp(self):
        daemon_for(self, KVTIERD, "kvtier-vllm-")
        self.address = "unix:" + self.sock
        self.engine = Engine(self.address)
        self.assertEqual(self.engine.workers[0].call("disabled_reason"), "")
        self.client = Client(self.address, timeout=5)
        self.ns = self.client.open_namespace_with(
            _namespace_options(vllm_config(self.address), KV_CACHE_CONFIG, 0, 1)).id

    def tearDown(self):
        self.engine.shutdown()
        self.client.close()

    def cached(self, req, rank=0, tp=1):
        """The daemon's copy of each of the request's full blocks is right."""
        ns = self.client.open_namespace_with(
            _namespace_options(vllm_config(self.address, tp), KV_CACHE_CONFIG, rank, 1)).id
        for i, h in enumerate(req.block_hashes):
            self.assertEqual(self.client.get(ns, [h])[0], block_kv(h, rank), f"block {i}")

    def test_interface_matches_the_recorded_one(self):
        self.assertTrue(supports_hma(KvtierConnectorV1))
        for table, required in ((vllm_interface.ABSTRACT, True),
                                (vllm_interface.WITH_DEFAULTS, False)):
            for name, params in table.items():
                if name not in KvtierConnectorV1.__dict__:
                    self.assertFalse(required, f"{name} is abstract and not implemented")
                    continue
                member = KvtierConnectorV1.__dict__[name]
                if isinstance(member, classmethod):
                    member = member.__func__
                got = list(inspect.signature(member).parameters)[1:]  # without self or cls
                self.assertEqual(got, params, name)

    def test_miss_then_full_and_partial_hits(self):
        tokens = list(range(8 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        self.cached(Request("a", tokens))
        # The whole prompt but its last token comes from the daemon.
        self.assertEqual(self.engine.serve(Request("b", tokens)), 8 * BS)
        # A prompt sharing 5 blocks.
        other = tokens[:5 * BS] + [9999] * (3 * BS)
        self.assertEqual(self.engine.serve(Request("c", other)), 5 * BS)
        self.cached(Request("c", other))
        # The same tokens under another adapter (an extra key): a miss.
        self.assertEqual(self.engine.serve(Request("d", tokens, extra=b"lora:x")), 0)

    def test_chunked_prefill_saves_as_blocks_complete(self):
        tokens = list(range(1000, 1000 + 6 * BS + 3))
        self.assertEqual(self.engine.serve(Request("a", tokens), chunk=BS + 5), 0)
        self.cached(Request("a", tokens))
        self.assertEqual(self.engine.serve(Request("b", tokens)), 6 * BS)

    def test_a_block_lost_between_lookup_and_load_is_recomputed(self):
        tokens = list(range(2000, 2000 + 8 * BS + 1))
        self.engine.serve(Request("a", tokens))
        lost = Request("x", tokens).block_hashes[4]
        self.engine.before_load = lambda req: self.client.delete(self.ns, [lost], recursive=True)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 8 * BS)
        self.engine.before_load = None
        # Recomputed and saved again, right.
        self.cached(Request("b", tokens))

    def test_a_failed_load_never_saves_what_was_computed_on_it(self):
        tokens = list(range(3000, 3000 + 6 * BS + 1))
        self.engine.serve(Request("a", tokens))
        longer = tokens[:6 * BS] + list(range(5000, 5000 + 2 * BS + 1))
        # The daemon fails the load (both tries), while the blocks stay cached.
        self.engine.workers[0].call("fail_loads", 2)
        # Blocks 6 and 7 are computed in the failing step on a bad prefix: not
        # saved then, saved once recomputed.
        self.engine.serve(Request("b", longer))
        self.cached(Request("b", longer))
        stats = self.engine.workers[0].call("stats")  # as vLLM's metrics summed them
        self.assertGreater(stats["dropped_saves"], 0)
        self.assertGreater(stats["load_failures"], 0)
        self.assertGreater(stats["saved_blocks"], 0)
        self.assertEqual(self.engine.serve(Request("c", longer)), 8 * BS)

    def test_a_step_whose_plan_cannot_be_built_fails_its_promised_loads(self):
        tokens = list(range(16000, 16000 + 5 * BS + 1))
        self.engine.serve(Request("a", tokens))
        state = self.engine.scheduler._scheduler
        real, calls = state.build, []

        def broken_once(*args):
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("injected")
            return real(*args)
        state.build = broken_once
        # The hit was promised; no load goes out, the blocks are reported
        # failed and recomputed (serve checks every block's bytes).
        with self.assertLogs("kvtier.vllm", "ERROR"):
            self.assertEqual(self.engine.serve(Request("b", tokens)), 5 * BS)
        self.assertEqual(self.engine.workers[0].call("stats").get("loaded_blocks", 0), 0)

    def test_an_allocation_the_connector_cannot_read_fails_its_promised_load(self):
        tokens = list(range(17000, 17000 + 5 * BS + 1))
        self.engine.serve(Request("a", tokens))
        state = self.engine.scheduler._scheduler
        real = state.allocated

        def broken(*args, **kwargs):
            state.allocated = real
            raise RuntimeError("injected")
        state.allocated = broken
        with self.assertLogs("kvtier.vllm", "ERROR"):
            self.assertEqual(self.engine.serve(Request("b", tokens)), 5 * BS)  # recomputed
        self.assertEqual(self.engine.workers[0].call("stats").get("loaded_blocks", 0), 0)
        self.assertEqual(self.engine.serve(Request("c", tokens)), 5 * BS)  # and then loaded
        self.assertEqual(self.engine.workers[0].call("stats")["loaded_blocks"], 5)

    def test_preempted_and_resumed_requests_load_what_they_saved(self):
        tokens = list(range(6000, 6000 + 6 * BS + 1))
        # Two chunks of 2 blocks, then preemption: the resumed request loads
        # those 4 blocks and computes the rest into new blocks.
        self.assertEqual(self.engine.serve(Request("a", tokens), chunk=2 * BS,
                                           preempt_after=2), 0)
        self.cached(Request("a", tokens))
        self.assertEqual(self.engine.serve(Request("b", tokens)), 6 * BS)

    def test_background_loads_while_the_request_waits(self):
        self.engine.shutdown()
        self.engine = Engine(self.address, async_loads=True)
        tokens = list(range(8000, 8000 + 7 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        self.assertEqual(self.engine.waited_steps, 0)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 7 * BS)
        self.assertGreater(self.engine.waited_steps, 0)
        # A background load that fails is reported, the request recomputes
        # (serve checks every block's bytes at the end).
        self.engine.workers[0].call("fail_loads", 2)
        self.assertEqual(self.engine.serve(Request("c", tokens)), 7 * BS)
        self.assertGreater(self.engine.workers[0].call("stats")["load_failures"], 0)

    def test_a_worker_that_cannot_load_reports_every_hit_failed(self):
        tokens = list(range(9000, 9000 + 5 * BS + 1))
        self.engine.serve(Request("a", tokens))  # the daemon holds the prefix
        for async_loads in (False, True):
            # Workers whose GPU caches the daemon refuses to open (a daemon
            # without CUDA here; a handle it cannot open on a GPU): the worker
            # says why at registration; the scheduler still sees the hit; the
            # loads are reported failed and the request recomputes, rather
            # than running on stale blocks or waiting forever, and nothing
            # reaches the engine as an exception.
            engine = Engine(self.address, async_loads=async_loads, on_gpu=True)
            try:
                reason = engine.workers[0].call("disabled_reason")
                self.assertIn("GPU KV caches: the daemon refused the KV memory", reason)
                self.assertEqual(engine.serve(Request(f"b{async_loads}", tokens)), 5 * BS)
            finally:
                engine.shutdown()

    def test_tensor_parallel_ranks_keep_their_own_blocks(self):
        self.engine.shutdown()
        self.engine = Engine(self.address, tp=2)
        tokens = list(range(7000, 7000 + 5 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        for rank in (0, 1):
            self.cached(Request("a", tokens), rank=rank, tp=2)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 5 * BS)  # each rank its own

    def test_an_mla_latent_is_stored_once_and_loaded_by_every_rank(self):
        self.engine.shutdown()
        self.engine = Engine(self.address, tp=2, mla=True)
        self.assertEqual(self.engine.workers[1].call("disabled_reason"), "")
        tokens = list(range(11000, 11000 + 5 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        # One latent namespace for both ranks, its blocks half of K and V's
        # with the same fields.
        ids = {r: self.client.open_namespace_with(_namespace_options(
            vllm_config(self.address, 2, r, mla=True), kv_cache_config(True), r, 1))
            for r in (0, 1)}
        self.assertEqual(ids[0].id, ids[1].id)
        self.assertEqual(ids[0].block_bytes, LAYERS * BS * MLA_DIM * 2)
        for i, h in enumerate(Request("a", tokens).block_hashes):
            self.assertEqual(self.client.get(ids[0].id, [h])[0], block_kv(h, mla=True),
                             f"block {i}")
        self.assertEqual(self.engine.workers[0].call("stats")["saved_blocks"], 5)
        self.assertEqual(self.engine.workers[1].call("stats").get("saved_blocks", 0), 0)
        # Both ranks load it (serve checks each rank's bytes).
        self.assertEqual(self.engine.serve(Request("b", tokens)), 5 * BS)
        self.assertEqual(self.engine.workers[1].call("stats")["loaded_blocks"], 5)

    def test_layer_wise_loads_bring_each_layer_before_its_attention(self):
        self.engine.shutdown()
        self.engine = Engine(self.address, layerwise=True)
        worker = self.engine.workers[0]
        self.assertEqual(worker.call("disabled_reason"), "")
        # Group 1's load waits until layer 0's wait_for_layer_load returned:
        # a connector that loaded everything before the forward pass would
        # hold it 5 s and count a violation.
        worker.call("hold_later_groups")
        tokens = list(range(12000, 12000 + 6 * BS + 1))
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)
        self.assertEqual(self.engine.serve(Request("b", tokens)), 6 * BS)
        early_reads, violations, on = worker.call("layerwise_report")
        self.assertEqual(early_reads, [])  # each layer was in when its wait returned
        self.assertEqual(violations, 0)
        self.assertTrue(on)
        self.assertEqual(worker.call("stats")["loaded_blocks"], 6 * LAYERS)  # a block per group
        # One daemon layer group per layer here, each block one layer's K and V.
        config = vllm_config(self.address, layer_groups=LAYERS)
        ns = self.client.open_namespace_with(_namespace_options(config, KV_CACHE_CONFIG, 0, 1))
        self.assertEqual(ns.group_block_bytes, [2 * BS * DIM * 2] * LAYERS)
        self.assertNotEqual(ns.id, self.ns)  # not shared with whole blocks
        for i, h in enumerate(Request("a", tokens).block_hashes):
            for layer in range(LAYERS):
                self.assertEqual(self.client.get(ns.id, [h], group=layer)[0],
                                 block_kv(h, layers=[layer]), f"block {i} layer {layer}")
        # A failed load fails whole and is recomputed (serve checks the bytes).
        worker.call("fail_loads", 2)
        self.assertEqual(self.engine.serve(Request("c", tokens)), 6 * BS)
        self.assertGreater(worker.call("stats")["load_failures"], 0)
        self.assertTrue(KvtierConnectorV1.requires_piecewise_for_cudagraph(
            {"kvtier_layer_groups": 2}))
        self.assertFalse(KvtierConnectorV1.requires_piecewise_for_cudagraph({}))

    def test_layer_wise_failures_and_an_engine_that_skips_the_waits(self):
        self.engine.shutdown()
        self.engine = Engine(self.address, layerwise=True)
        worker = self.engine.workers[0]
        tokens = list(range(13000, 13000 + 6 * BS + 1))
        self.engine.serve(Request("a", tokens))
        # Layer 1's group fails after layer 0 computed on its loaded blocks:
        # the load fails whole, the blocks computed in that step (6 and 7,
        # on a bad prefix) are not saved then, and are once recomputed.
        longer = tokens[:6 * BS] + list(range(14000, 14000 + 2 * BS + 1))
        worker.call("fail_later_groups", 2)
        self.assertEqual(self.engine.serve(Request("b", longer)), 6 * BS)
        stats = worker.call("stats")
        self.assertGreater(stats["load_failures"], 0)
        self.assertGreater(stats["dropped_saves"], 0)
        ns = self.client.open_namespace_with(_namespace_options(
            vllm_config(self.address, layer_groups=LAYERS), KV_CACHE_CONFIG, 0, 1)).id
        for i, h in enumerate(Request("b", longer).block_hashes):
            for layer in range(LAYERS):
                self.assertEqual(self.client.get(ns, [h], group=layer)[0],
                                 block_kv(h, layers=[layer]), f"block {i} layer {layer}")
        # An engine whose forward pass never waits for its layers (as full
        # CUDA graphs would): the step's loads are reported failed, so
        # nothing computed on blocks still loading is kept, and layer-wise
        # loads turn off; the next hit loads whole blocks before the pass.
        # Layer 1's load is held until the forward pass ended, so the pass
        # reads it stale and computes blocks 6 and 7 wrong: serve's check of
        # every block's bytes fails unless they are dropped and recomputed.
        worker.call("skip_layer_waits")
        worker.call("hold_later_groups", "forward", 1)
        other = tokens[:6 * BS] + list(range(15000, 15000 + 2 * BS + 1))
        dropped = worker.call("stats")["dropped_saves"]
        self.assertEqual(self.engine.serve(Request("c", other)), 6 * BS)
        self.assertGreater(worker.call("stats")["dropped_saves"], dropped)
        self.assertFalse(worker.call("layerwise_report")[2])
        for i, h in enumerate(Request("c", other).block_hashes):
            for layer in range(LAYERS):
                self.assertEqual(self.client.get(ns, [h], group=layer)[0],
                                 block_kv(h, layers=[layer]), f"block {i} layer {layer}")
        before = worker.call("stats")["load_failures"]
        self.assertEqual(self.engine.serve(Request("d", other)), 6 * BS + 2 * BS)
        self.assertEqual(worker.call("stats")["load_failures"], before)

    def test_the_daemon_going_away_is_a_miss_and_its_return_is_used(self):
        tokens = list(range(4000, 4000 + 4 * BS + 1))
        self.proc.kill()
        self.proc.wait(10)
        os.unlink(self.sock)
        self.assertEqual(self.engine.serve(Request("a", tokens)), 0)  # no exception
        self.proc = start_daemon(KVTIERD, self.sock, self.log)  # empty: its host tier is gone
        self.client.close()
        self.client = Client(self.address, timeout=5)
        self.ns = self.client.open_namespace_with(
            _namespace_options(vllm_config(self.address), KV_CACHE_CONFIG, 0, 1)).id
        # Within the connector's reconnect backoff (at most 1 s) the workers
        # re-open their namespace, re-register and save again.
        deadline = time.monotonic() + 10
        for i in itertools.count():
            self.assertEqual(self.engine.serve(Request(f"b{i}", tokens)), 0)
            try:
                self.cached(Request("b", tokens))
                break
            except KvtierError:
                self.assertLess(time.monotonic(), deadline, "saves never resumed")
                time.sleep(0.2)
        # And hits, once the scheduler's back-off after its failed lookups
        # (one second) has passed.
        for i in itertools.count():
            if self.engine.serve(Request(f"c{i}", tokens)) == 4 * BS:
                break
            self.assertLess(time.monotonic(), deadline, "hits never resumed")
            time.sleep(0.2)


if __name__ == "__main__":
    unittest.main()
