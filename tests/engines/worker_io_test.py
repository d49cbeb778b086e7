"""WorkerIO on its own (no daemon): which saves a failed load taints and
when they go out again.

Usage: python3 worker_io_test.py PYTHONPATH
"""

import sys
import threading
import unittest

sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[:1]

from kvtier.engines.block_batches import batches  # noqa: E402
from kvtier.engines.kv_layout import BlockLayout, TensorGeometry  # noqa: E402
from kvtier.engines.scheduler_state import FailedLoad, LoadOp, SaveOp, StepPlan  # noqa: E402
from kvtier.engines.worker_io import WorkerIO  # noqa: E402


class FakeTransfer:
    """Loads the first `loadable` blocks of each call; records saves."""

    def __init__(self, block_bytes):
        self.block_bytes = block_bytes
        self.lock = threading.Lock()
        self.stats = {}
        self.loadable = 10 ** 6
        self.saved = []
        self.retentions = []
        self.calls = []  # (keys, groups, span addresses) of each hybrid call
        self.synchronised = []  # each load's synchronise flag

    def load(self, keys, spans, groups=None, synchronise=True):
        if groups is not None:
            self.calls.append((list(keys), list(groups), [s[0][0] for s in spans]))
        self.synchronised.append(synchronise)
        return min(len(keys), self.loadable)

    def save(self, keys, parents, spans, retention=None, groups=None):
        if groups is not None:
            self.calls.append((list(keys), list(groups), [s[0][0] for s in spans]))
        self.saved.extend(keys)
        self.retentions.append(retention)
        return len(keys)

    def close(self):
        pass


def op(kind, req, first, blocks):
    keys = [f"{req}{first + i}".encode() for i in range(len(blocks))]
    if kind is LoadOp:
        return LoadOp(req, first, keys, [[b] for b in blocks])
    return SaveOp(req, first, keys, [b""] * len(keys), [[b] for b in blocks])


class WorkerIoTest(unittest.TestCase):
    def setUp(self):
        # 8 engine blocks of 64 bytes in one tensor.
        layout = BlockLayout([TensorGeometry(4096, (8, 32), (32, 1), 2)], 8)
        self.t = FakeTransfer(layout.block_bytes)
        self.io = WorkerIO(self.t, layout, 1)

    def test_a_failed_load_taints_its_request_and_its_blocks_until_acknowledged(self):
        self.t.loadable = 1
        failed = self.io.load([op(LoadOp, "a", 0, [3, 4, 5])])
        self.assertEqual(failed, {4, 5})
        self.t.loadable = 10 ** 6
        plan = StepPlan(saves=[
            op(SaveOp, "a", 3, [6, 7]),        # a's blocks past the failure: dropped
            op(SaveOp, "b", 0, [1, 4, 2]),     # b uses a's failed block 4: cut there
            op(SaveOp, "c", 0, [0, 2])])       # c is clean
        self.io.begin_step(plan)
        self.io.save(plan)
        self.assertEqual(self.t.saved, [b"b0", b"c0", b"c1"])
        self.assertEqual(self.io.stats["dropped_saves"], 2 + 2)
        # The scheduler acknowledges a's failure: everything goes out again.
        self.t.saved.clear()
        plan = StepPlan(saves=[op(SaveOp, "a", 1, [4, 5]), op(SaveOp, "b", 1, [4, 2])],
                        acknowledged=["a"])
        self.io.begin_step(plan)
        self.io.save(plan)
        self.assertEqual(self.t.saved, [b"a1", b"a2", b"b1", b"b2"])

    def test_an_old_acknowledgement_does_not_clear_a_new_failure(self):
        self.t.loadable = 0
        # The plan acknowledges a's earlier failure and loads anew: applied
        # before the loads, the acknowledgement cannot clear this step's.
        plan = StepPlan(loads=[op(LoadOp, "a", 0, [2, 3])], saves=[op(SaveOp, "a", 2, [5])],
                        acknowledged=["a"])
        self.io.begin_step(plan)
        self.assertEqual(self.io.load(plan.loads), {2, 3})
        self.io.save(plan)
        self.assertEqual(self.t.saved, [])

    def test_a_promised_load_never_planned_taints_like_a_failed_one(self):
        plan = StepPlan(failed_loads=[FailedLoad("a", 2, [5, 6])],
                        saves=[op(SaveOp, "a", 1, [4, 5, 6]), op(SaveOp, "b", 0, [1, 6])])
        self.io.begin_step(plan)
        self.io.save(plan)
        self.assertEqual(self.t.saved, [b"a1", b"b0"])

    def test_a_save_carries_its_requests_retention_priority(self):
        keep = op(SaveOp, "k", 0, [1])
        keep.retention = 90
        self.io.save(StepPlan(saves=[keep, op(SaveOp, "d", 0, [2])]))
        self.assertEqual(self.t.retentions, [90, None])

    def test_finished_requests_are_forgotten(self):
        self.t.loadable = 0
        self.io.load([op(LoadOp, "a", 0, [2])])
        self.io.forget({"a"})
        plan = StepPlan(saves=[op(SaveOp, "b", 0, [2])])
        self.io.save(plan)
        self.assertEqual(self.t.saved, [b"b0"])


class HybridWorkerIoTest(unittest.TestCase):
    """Layer groups: group 0 at 4096, group 1 in a tensor at 1 << 20."""

    def setUp(self):
        self.layout = BlockLayout([TensorGeometry(4096, (8, 32), (32, 1), 2)], 8)
        self.window = BlockLayout([TensorGeometry(1 << 20, (8, 32), (32, 1), 2)], 8)
        self.t = FakeTransfer(self.layout.block_bytes)
        self.io = WorkerIO(self.t, self.layout, 1, [self.window])

    def test_each_keys_blocks_go_together_group_0_first(self):
        save = op(SaveOp, "a", 0, [1, 2, 3])
        save.group_blocks = [[None, 5, 6]]
        self.io.save(StepPlan(saves=[save]))
        keys, groups, addresses = self.t.calls[0]
        self.assertEqual(keys, [b"a0", b"a1", b"a1", b"a2", b"a2"])
        self.assertEqual(groups, [0, 0, 1, 0, 1])
        self.assertEqual(addresses, [self.layout.spans(1)[0][0], self.layout.spans(2)[0][0],
                                     self.window.spans(5)[0][0], self.layout.spans(3)[0][0],
                                     self.window.spans(6)[0][0]])

    def test_a_hybrid_load_that_fails_anywhere_fails_whole(self):
        load = op(LoadOp, "a", 2, [1, 2, 3])
        load.group_blocks = [[None, 5, 6]]
        self.t.loadable = 4  # the last key's window block fails
        self.assertEqual(self.io.load([load]), {1, 2, 3})
        # Nothing of the request is saved until acknowledged, nor anything
        # that uses its window blocks.
        other = op(SaveOp, "b", 0, [0, 4])
        other.group_blocks = [[None, 6]]
        self.io.save(StepPlan(saves=[op(SaveOp, "a", 5, [7]), other]))
        self.assertEqual(self.t.saved, [b"b0"])

    def test_layer_wise_loads_go_group_by_group_and_fail_whole(self):
        ok = op(LoadOp, "a", 0, [1, 2])
        ok.group_blocks = [[1, 2]]  # the same vLLM blocks, the other layers
        bad = op(LoadOp, "b", 0, [3])
        bad.group_blocks = [[None]]  # a block id it lacks: a failed group 1 load
        self.io.start_group_loads([ok, bad])
        with self.assertRaises(RuntimeError):  # one step's at a time
            self.io.start_group_loads([])
        self.assertTrue(self.io.wait_group(0, timeout=10))
        self.assertTrue(self.io.wait_group(1, timeout=10))
        self.assertEqual(self.io.end_group_loads(), {3})
        self.assertEqual([(c[0], c[1]) for c in self.t.calls],
                         [([b"a0", b"a1"], [0, 0]), ([b"b0"], [0]), ([b"a0", b"a1"], [1, 1])])
        self.assertEqual(self.t.synchronised, [True, False, False])  # the device once
        self.assertEqual(self.io.end_group_loads(), set())  # nothing runs now
        self.assertTrue(self.io.wait_group(0, timeout=0))  # none runs: at once
        # b's failure taints its saves until acknowledged.
        self.io.save(StepPlan(saves=[op(SaveOp, "b", 0, [3])]))
        self.assertEqual(self.t.saved, [])

    def test_batches_never_split_a_keys_blocks(self):
        keys = [b"a", b"a", b"b", b"b", b"c"]
        self.assertEqual([list(r) for r in batches(keys, 3)], [[0, 1], [2, 3, 4]])
        self.assertEqual([list(r) for r in batches(keys, 1)], [[0, 1], [2, 3], [4]])
        self.assertEqual([list(r) for r in batches(keys, 10)], [[0, 1, 2, 3, 4]])
        self.assertEqual(list(batches([], 2)), [])
        with self.assertRaises(ValueError):
            list(batches(keys, 0))


if __name__ == "__main__":
    unittest.main()
