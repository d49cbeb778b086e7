"""KV events of a real kvtierd, read as a KV-aware router reads vLLM's: a
ZeroMQ SUB socket decoding msgpack (python3-zmq, python3-msgpack), the
replay socket, and Admin.WatchBlocks. The events replayed over an empty
index must equal what the daemon holds after Puts, evictions under pressure,
Deletes and an Evict.

Usage: python3 kv_events_test.py KVTIERD PYTHONPATH
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[:1]
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402

from daemon_socket import free_ports, wait_listening  # noqa: E402
import msgpack  # noqa: E402
import zmq  # noqa: E402

from kvtier import Client  # noqa: E402
from kvtier.v1 import admin_pb2, admin_pb2_grpc, types_pb2  # noqa: E402

BLOCK_TOKENS = 16
BLOCK_BYTES = 2 * 1 * 1 * 128 * 2 * BLOCK_TOKENS  # 8 KiB
TOPIC = "kv."


def int_hash(key):
    """vLLM's int form of a block hash (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES)."""
    return int.from_bytes(key, "big") & ((1 << 64) - 1)


class Index:
    """A router's index of one publisher: which blocks (int hashes) each medium
    holds."""

    def __init__(self, test, replay=None):
        self.test = test
        self.held = set()  # (key, medium)
        self.seq = None
        self.replay = replay  # start seq -> [(seq, payload)]: fills gaps
        self.replayed = 0

    def apply_frames(self, frames):
        t = self.test
        t.assertEqual(len(frames), 3)
        t.assertEqual(frames[0], TOPIC.encode())
        seq = int.from_bytes(frames[1], "big", signed=True)
        expected = 0 if self.seq is None else self.seq + 1
        if seq > expected and self.replay is not None:
            # Missed messages (a SUB socket misses what was sent before its
            # subscription reached the publisher): ask the replay socket,
            # as vLLM's subscriber example does.
            for s, payload in self.replay(expected):
                if s < seq:
                    self.seq = s
                    self.apply_payload(payload)
                    self.replayed += 1
            expected = 0 if self.seq is None else self.seq + 1
        t.assertEqual(seq, expected, "a gap in the sequence")
        self.seq = seq
        self.apply_payload(frames[2])

    def apply_payload(self, payload):
        t = self.test
        batch = msgpack.unpackb(payload, raw=False)
        t.assertEqual(len(batch), 2)  # [ts, events]
        t.assertIsInstance(batch[0], float)
        for event in batch[1]:
            tag = event[0]
            if tag == "AllBlocksCleared":
                self.held.clear()
            elif tag == "BlockStored":
                t.assertEqual(len(event), 8)
                hashes, parent, tokens, block_size, lora_id, medium, lora_name = event[1:]
                t.assertEqual(tokens, [])
                t.assertEqual(block_size, BLOCK_TOKENS)
                t.assertIsNone(lora_id)
                t.assertIsNone(lora_name)
                t.assertIn(medium, ("CPU", "STORAGE"))
                if parent is not None:
                    t.assertTrue((parent, "CPU") in self.held or (parent, "STORAGE") in self.held,
                                 "a block stored before its parent")
                for h in hashes:
                    t.assertIsInstance(h, int)  # vLLM's default hash form
                    t.assertNotIn((h, medium), self.held, "stored twice")
                    self.held.add((h, medium))
            elif tag == "BlockRemoved":
                t.assertEqual(len(event), 3)
                for h in event[1]:
                    t.assertIn((h, event[2]), self.held, "removed but never stored")
                    self.held.discard((h, event[2]))
            else:
                t.fail("unknown event " + repr(tag))


class KvEventsTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="kvtier-events-")
        pub_port, replay_port = free_ports(2)
        self.pub = "tcp://127.0.0.1:%d" % pub_port
        self.replay = "tcp://127.0.0.1:%d" % replay_port
        sock = os.path.join(self.workdir, "kvtier.sock")
        self.log = open(os.path.join(self.workdir, "kvtierd.log"), "w")
        self.proc = subprocess.Popen(
            [KVTIERD, "--listen", "unix:" + sock, "--host-tier-bytes", "4MiB",
             "--set", "nvme.dirs=", "--set", "costmodel.probe_tiers=false",
             "--set", "metrics.listen=off", "--set", "host_tier.slab_bytes=1MiB",
             "--set", "limits.max_block_bytes=1MiB",
             "--set", "events.zmq_endpoint=" + self.pub,
             "--set", "events.zmq_replay_endpoint=" + self.replay,
             "--set", "events.zmq_topic=" + TOPIC],
            stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_listening(self.proc, sock):
            self.proc.kill()  # tearDown does not run when setUp fails
            self.proc.wait(10)
            self.log.close()
            with open(os.path.join(self.workdir, "kvtierd.log")) as f:
                log = f.read()[-2000:]
            shutil.rmtree(self.workdir)
            self.fail("kvtierd did not start listening: " + log)
        self.address = "unix:" + sock
        self.client = Client(self.address, timeout=10)
        self.channel = grpc.insecure_channel(self.address)
        self.admin = admin_pb2_grpc.AdminStub(self.channel)
        self.ctx = zmq.Context()

    def tearDown(self):
        self.ctx.destroy(linger=0)
        self.channel.close()
        self.client.close()
        self.proc.kill()
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.workdir)

    def held_by_daemon(self, ns):
        blocks = self.admin.ListBlocks(admin_pb2.ListBlocksRequest(namespace_id=ns, top=10000),
                                       timeout=10).blocks
        held = set()
        for b in blocks:
            for tier in b.tiers:
                medium = {types_pb2.TIER_KIND_HOST: "CPU", types_pb2.TIER_KIND_NVME: "STORAGE"}
                held.add((int_hash(b.key), medium[tier]))
        return held

    def receive_until_quiet(self, sub, index, quiet_s=1.0):
        got = 0
        while sub.poll(int(quiet_s * 1000)):
            index.apply_frames(sub.recv_multipart())
            got += 1
        return got

    def test_router_index_matches_the_daemon_and_replay_and_watch_agree(self):
        ns = self.client.open_namespace("events-model", num_layers=1, num_kv_heads=1,
                                        head_dim=128, tokens_per_block=BLOCK_TOKENS).id
        # A chain published before the router subscribes: it learns of it
        # through the replay socket when it sees the gap.
        self.client.put(ns, [b"pre"], [b"p" * BLOCK_BYTES])
        for _ in range(200):
            status = self.admin.GetCluster(admin_pb2.GetClusterRequest(), timeout=10).events
            if status.zmq_events >= 1:
                break
            time.sleep(0.05)
        sub = self.ctx.socket(zmq.SUB)
        self.addCleanup(sub.close, 0)
        sub.setsockopt(zmq.SUBSCRIBE, TOPIC.encode())
        sub.connect(self.pub)
        dealer = self.ctx.socket(zmq.DEALER)
        self.addCleanup(dealer.close, 0)
        dealer.connect(self.replay)

        def replay(start):
            """The buffered messages from `start` on, as (seq, payload)."""
            dealer.send_multipart([b"", start.to_bytes(8, "big")])
            out = []
            while True:
                self.assertTrue(dealer.poll(10000), "no replay answer")
                frames = dealer.recv_multipart()  # vLLM's: [empty, seq, payload]
                self.assertEqual(len(frames), 3)
                self.assertEqual(frames[0], b"")
                seq = int.from_bytes(frames[1], "big", signed=True)
                if seq == -1:
                    self.assertEqual(frames[2], b"")
                    return out
                out.append((seq, frames[2]))

        # 4 MiB of 8 KiB blocks holds 512: 80 chains of 10 force evictions.
        for c in range(80):
            keys = [b"c%d-%d" % (c, i) for i in range(10)]
            self.client.put(ns, keys, [bytes([c % 256]) * BLOCK_BYTES] * 10)
        self.client.delete(ns, [b"c79-5"], recursive=True)
        # Something certainly sent after the subscription joined (it takes a
        # moment; whatever it missed comes by replay).
        time.sleep(0.5)
        self.client.put(ns, [b"tail"], [b"t" * BLOCK_BYTES])
        index = Index(self, replay)
        self.assertGreater(self.receive_until_quiet(sub, index), 0)
        self.assertGreaterEqual(index.replayed, 1)  # at least "pre" came by replay
        self.assertEqual(index.held, self.held_by_daemon(ns))
        self.assertLess(len(index.held), 800)  # evictions were published
        self.assertGreater(len(index.held), 100)

        # An operator's Evict: every removal is published.
        for _ in self.admin.Evict(admin_pb2.EvictRequest(namespace_id=ns), timeout=10):
            pass
        self.receive_until_quiet(sub, index)
        self.assertEqual(index.held, self.held_by_daemon(ns))
        self.assertEqual(index.held, set())

        # The replay socket returns the whole stream from seq 0.
        replayed = Index(self)
        for seq, payload in replay(0):
            replayed.apply_frames([TOPIC.encode(), seq.to_bytes(8, "big"), payload])
        self.assertEqual(replayed.seq, index.seq)
        self.assertEqual(replayed.held, set())

        # WatchBlocks: a snapshot, then the live changes, agree with the daemon.
        self.client.put(ns, [b"w0", b"w1"], [b"w" * BLOCK_BYTES] * 2)
        stream = self.admin.WatchBlocks(
            admin_pb2.WatchBlocksRequest(namespace_id=ns, snapshot=True), timeout=30)
        watched = set()
        for msg in stream:
            for e in msg.events:
                self.assertEqual(e.namespace_id, ns)
                item = (e.key, "CPU" if e.medium == admin_pb2.BlockEvent.HOST else "STORAGE")
                if e.kind == admin_pb2.BlockEvent.STORED:
                    watched.add(item)
                else:
                    watched.discard(item)
            if msg.snapshot_done:
                self.assertEqual(watched, {(b"w0", "CPU"), (b"w1", "CPU")})
                self.client.put(ns, [b"w2"], [b"x" * BLOCK_BYTES], parent_key=b"w1")
                self.client.delete(ns, [b"w0"], recursive=True)
            if msg.snapshot_done or not msg.events:
                continue
            if watched == set():
                break  # w0 and its descendants are gone
        stream.cancel()
        self.assertEqual(self.held_by_daemon(ns), set())

        # The counters say what went out.
        cluster = self.admin.GetCluster(admin_pb2.GetClusterRequest(), timeout=10)
        self.assertEqual(cluster.events.zmq_endpoint, self.pub)
        self.assertGreater(cluster.events.zmq_events, 800)
        self.assertGreater(cluster.events.reported, 800)

    def test_bad_watch_requests_are_clear_errors(self):
        with self.assertRaises(grpc.RpcError) as err:
            next(iter(self.admin.WatchBlocks(
                admin_pb2.WatchBlocksRequest(namespace_id="zz"), timeout=10)))
        self.assertEqual(err.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as err:
            next(iter(self.admin.WatchBlocks(
                admin_pb2.WatchBlocksRequest(namespace_id="00" * 16), timeout=10)))
        self.assertEqual(err.exception.code(), grpc.StatusCode.NOT_FOUND)


if __name__ == "__main__":
    unittest.main()
