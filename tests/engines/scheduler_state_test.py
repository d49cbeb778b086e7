"""SchedulerState on its own (no daemon, no engine): what a step loads and
saves for given lookups, with kvtier blocks of two engine blocks, the engine's
own hits, the last-token rule, failed loads and asynchronous loads.

Usage: python3 scheduler_state_test.py PYTHONPATH
"""

import sys
import unittest

sys.path.insert(0, sys.argv[1])
sys.argv = sys.argv[:1]

from kvtier.engines.block_keys import as_key  # noqa: E402
from kvtier.engines.scheduler_state import (MISSING, RequestView, ScheduledView,  # noqa: E402
                                            SchedulerState)

BS, RATIO = 16, 2  # a kvtier block is 32 tokens


def hashes(n, tag=b"h"):
    return [tag + bytes([i]) * 8 for i in range(n)]


class SchedulerStateTest(unittest.TestCase):
    def setUp(self):
        self.held = 0  # kvtier blocks the fake daemon holds, from the start
        self.lookups = []

        def lookup(keys):
            self.lookups.append(list(keys))
            return min(self.held, len(keys))
        self.s = SchedulerState(lookup, BS, RATIO)

    def view(self, req, n_hashes, tokens):
        return RequestView(req, hashes(n_hashes), n_hashes, tokens)

    def test_a_hit_counts_whole_kvtier_blocks_and_leaves_the_last_token(self):
        self.held = 4
        # 8 engine blocks = 4 kvtier blocks = 128 tokens; the prompt is 128
        # tokens exactly, so the last kvtier block is left to compute (and
        # not looked up: what the daemon answers is a cut it can restore).
        v = self.view("r", 8, 128)
        self.assertEqual(self.s.match(v, 0), 3 * 32)
        self.assertEqual(self.lookups[-1], [as_key(h) for h in hashes(8)[1::2]][:3])
        # One token more: all four.
        self.assertEqual(self.s.match(self.view("r", 8, 129), 0), 4 * 32)
        self.assertEqual(len(self.lookups[-1]), 4)
        # The engine's own hit of one kvtier block: the rest past it.
        self.assertEqual(self.s.match(self.view("r", 8, 129), 32), 3 * 32)
        # An own hit inside a kvtier block (one engine block): nothing.
        self.assertEqual(self.s.match(self.view("r", 8, 129), 16), 0)
        # Only publishable hashes count.
        self.assertEqual(self.s.match(RequestView("r", hashes(8), 4, 129), 0), 2 * 32)

    def test_loads_and_saves_of_a_step(self):
        self.held = 2
        v = self.view("r", 8, 140)
        ext = self.s.match(v, 0)
        self.assertEqual(ext, 64)
        self.s.allocated(v, list(range(100, 109)), ext)
        # The first step computes 40 tokens past the hit: kvtier block 2 (64..96)
        # completes, block 3 does not.
        plan = self.s.build([ScheduledView("r", list(range(100, 109)), True, 64, 40)], {})
        self.assertEqual(len(plan.loads), 1)
        load = plan.loads[0]
        self.assertEqual((load.first_index, load.engine_blocks), (0, [[100, 101], [102, 103]]))
        self.assertEqual(len(plan.saves), 1)
        save = plan.saves[0]
        self.assertEqual(save.first_index, 2)
        self.assertEqual(save.engine_blocks, [[104, 105]])
        self.assertEqual(save.keys, [as_key(hashes(8)[5])])
        self.assertEqual(save.parents, [as_key(hashes(8)[3])])
        # The next step completes block 3; nothing is loaded or saved twice.
        plan = self.s.build([ScheduledView("r", [], False, 104, 36)], {})
        self.assertEqual(plan.loads, [])
        self.assertEqual([(s.first_index, s.engine_blocks) for s in plan.saves], [(3, [[106, 107]])])
        self.assertEqual(self.s.build([ScheduledView("r", [], False, 140, 1)], {}).saves, [])

    def test_saves_carry_the_requests_retention_priority(self):
        v = RequestView("p", hashes(4), 4, 70, retention=100)
        self.s.allocated(v, list(range(200, 205)), self.s.match(v, 0))
        plan = self.s.build([ScheduledView("p", list(range(200, 205)), True, 0, 70)], {})
        self.assertTrue(plan.saves)
        self.assertEqual({s.retention for s in plan.saves}, {100})

    def test_the_engines_own_hit_is_not_saved_again(self):
        v = self.view("r", 8, 129)
        self.assertEqual(self.s.match(v, 64), 0)
        self.s.allocated(v, list(range(10, 19)), 0)
        plan = self.s.build([ScheduledView("r", list(range(10, 19)), True, 64, 65)], {})
        self.assertEqual([s.first_index for s in plan.saves], [2])

    def test_a_failed_load_moves_the_watermark_back_and_is_acknowledged(self):
        self.held = 3
        v = self.view("r", 6, 100)
        self.s.allocated(v, list(range(20, 27)), self.s.match(v, 0))
        self.s.build([ScheduledView("r", list(range(20, 27)), True, 96, 4)], {})
        self.s.failed({22})  # engine block 2: kvtier block 1
        self.assertEqual(self.s.saved_upto("r"), 1)
        plan = self.s.build([ScheduledView("r", [], False, 32, 68)], {})
        self.assertEqual(plan.acknowledged, ["r"])
        self.assertEqual([(s.first_index, len(s.keys)) for s in plan.saves], [(1, 2)])
        self.assertEqual(self.s.build([], {}).acknowledged, [])

    def test_asynchronous_loads_go_out_for_requests_not_scheduled(self):
        s = SchedulerState(lambda keys: 2, BS, RATIO, async_loads=True)
        v = self.view("r", 4, 129)
        ext = s.match(v, 0)
        s.allocated(v, list(range(30, 39)), ext)
        plan = s.build([], {})
        self.assertEqual([(op.req_id, op.asynchronous, len(op.keys)) for op in plan.loads],
                         [("r", True, 2)])
        self.assertEqual(s.build([], {}).loads, [])
        s.finished("r")
        self.assertEqual(s.tracked(), 0)

    def test_promised_loads_that_cannot_be_planned_are_reported_failed(self):
        for async_loads in (False, True):
            s = SchedulerState(lambda keys: 3, BS, RATIO, async_loads=async_loads)
            v = self.view("r", 8, 200)
            s.allocated(v, list(range(40, 47)), s.match(v, 32))  # own hit: kvtier block 0
            # The step's plan fails half-way (here: making the load op).
            real, s._op = s._op, lambda *a: (_ for _ in ()).throw(RuntimeError("injected"))
            with self.assertRaises(RuntimeError):
                s.build([ScheduledView("r", [], False, 96, 8)], {})
            s._op = real
            plan = s.abandon()
            self.assertEqual(plan.loads, [])
            self.assertEqual([(f.req_id, f.first_index, f.engine_blocks)
                              for f in plan.failed_loads], [("r", 1, list(range(42, 47)))])
            self.assertEqual(plan.failed_async, ["r"] if async_loads else [])
            # Its block lists may be wrong now: never saved again.
            self.assertEqual(s.build([ScheduledView("r", [47], False, 96, 100)], {}).saves, [])
            self.assertEqual(s.build([], {}).failed_loads, [])  # reported once

    def test_an_allocation_that_cannot_be_read_fails_its_promised_load(self):
        s = SchedulerState(lambda keys: 3, BS, RATIO)
        v = self.view("q", 8, 200)
        ext = s.match(v, 32)
        s.allocation_failed("q", list(range(50, 57)), ext)
        plan = s.build([ScheduledView("q", list(range(50, 57)), True, 32 + ext, 40)],
                       {"q": v})
        self.assertEqual([(f.first_index, f.engine_blocks) for f in plan.failed_loads],
                         [(1, list(range(52, 57)))])
        self.assertEqual((plan.loads, plan.saves), ([], []))
        # Blocks unknown at the time: reported once the request is scheduled.
        w = self.view("w", 8, 200)
        ext = s.match(w, 0)
        s.allocation_failed("w", None, ext)
        self.assertEqual(s.build([], {}).failed_loads, [])
        plan = s.build([ScheduledView("w", list(range(60, 67)), True, ext, 10)], {"w": w})
        self.assertEqual([(f.first_index, f.engine_blocks) for f in plan.failed_loads],
                         [(0, list(range(60, 67)))])
        self.assertEqual(plan.saves, [])

    def test_a_hybrid_load_takes_the_window_and_never_the_null_block(self):
        s = SchedulerState(lambda keys: len(keys), BS, 1, windows=[0, 2])
        v = RequestView("r", hashes(6), 6, 6 * BS + 1)
        ext = s.match(v, 0)
        self.assertEqual(ext, 6 * BS)
        # Group 1 (full attention) all its blocks; group 2 (a window of 2
        # blocks) nulls (id 99) outside it, and one block never allocated.
        s.allocated(v, list(range(10, 17)), ext,
                    [list(range(20, 27)), [99, 99, 99, 99, 34]], null_ids=[99])
        load = s.build([ScheduledView("r", [], False, ext, 1)], {}).loads[0]
        self.assertEqual(load.group_blocks,
                         [list(range(20, 26)), [None, None, None, None, 34, MISSING]])
        # Saves skip the null block and what was not allocated.
        v2 = RequestView("q", hashes(3, b"q"), 3, 3 * BS)
        s.allocated(v2, [1, 2, 3], 0, [[4, 5, 6], [99, 7]])
        save = s.build([ScheduledView("q", [], False, 0, 3 * BS)], {}).saves[0]
        self.assertEqual(save.group_blocks, [[4, 5, 6], [None, 7, None]])

    def test_a_daemon_error_is_a_miss(self):
        def broken(keys):
            raise RuntimeError("down")
        s = SchedulerState(broken, BS, RATIO)
        self.assertEqual(s.match(self.view("r", 4, 129), 0), 0)
        self.assertEqual(s.lookup_errors, 1)


if __name__ == "__main__":
    unittest.main()
