"""The Python client against a real kvtierd (started here on a unix socket):
the chained hash's documented vectors, every client call, transfer between
daemons, security, hybrid namespaces, and a daemon killed mid-load. The
engine connectors have their own tests (tests/engines).

Usage: python3 python_client_test.py KVTIERD PYTHONPATH
"""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
sys.argv = sys.argv[:1]
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import grpc  # noqa: E402

from daemon_socket import wait_listening  # noqa: E402

from kvtier import (BlockRef, Client, KvLayoutSpec, KvtierError, LayerGroupSpec,  # noqa: E402
                    NamespaceOptions, SharedRegion, chained_block_key, chained_block_keys)
from kvtier.v1 import admin_pb2, admin_pb2_grpc  # noqa: E402

BLOCK_TOKENS = 16
BLOCK_BYTES = 2 * 1 * 1 * 128 * 2 * BLOCK_TOKENS  # 1 layer, 1 head of 128, bf16: 8 KiB


# Peer transfer between test daemons stays on loopback.
os.environ.setdefault("UCX_NET_DEVICES", "lo")
os.environ.setdefault("UCX_TLS", "tcp")


def start_daemon(workdir, extra=()):
    sock = os.path.join(workdir, "kvtier.sock")
    with open(os.path.join(workdir, "kvtierd.log"), "w") as log:
        proc = subprocess.Popen(
            [KVTIERD, "--listen", "unix:" + sock, "--host-tier-bytes", "128MiB",
             "--set", "nvme.dirs=", "--set", "costmodel.probe_tiers=false",
             "--set", "metrics.listen=off",
             "--set", "host_tier.slab_bytes=1MiB", "--set", "limits.max_block_bytes=1MiB",
             *extra],
            stdout=log, stderr=subprocess.STDOUT)
    if wait_listening(proc, sock):
        return proc, "unix:" + sock
    proc.kill()
    proc.wait()
    with open(os.path.join(workdir, "kvtierd.log")) as f:
        raise RuntimeError("kvtierd did not start listening: " + f.read()[-2000:])


@contextlib.contextmanager
def own_daemon(prefix, extra=()):
    """A kvtierd of the test's own and a client of it; both go afterwards."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    proc, address = start_daemon(workdir, extra)
    client = Client(address, timeout=10)
    client.address = address
    try:
        yield proc, client
    finally:
        client.close()
        proc.kill()
        proc.wait(10)
        shutil.rmtree(workdir)


class PythonClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workdir = tempfile.mkdtemp(prefix="kvtier-py-")
        cls.proc, cls.address = start_daemon(cls.workdir)
        cls.client = Client(cls.address, timeout=10)
        cls.ns = cls.client.open_namespace("py-model", num_layers=1, num_kv_heads=1,
                                           head_dim=128, tokens_per_block=BLOCK_TOKENS)

    @classmethod
    def tearDownClass(cls):
        cls.client.close()
        cls.proc.terminate()
        cls.proc.wait(10)
        shutil.rmtree(cls.workdir)

    def test_chained_hash_vectors(self):
        k1 = chained_block_key(b"", [1, 2, 3, 4])
        self.assertEqual(k1.hex(), "546b2b5ae3fb24df13cf922af9485de5")
        self.assertEqual(chained_block_key(k1, [5, 6, 7, 8]).hex(),
                         "648fdcc98eedbc102ab4d5a7789a009d")
        self.assertEqual(chained_block_key(b"", [1, 2, 3, 4], [b"img:abc"]).hex(),
                         "3e27306a2cff6ea506068a753ad45ae2")
        self.assertEqual(len(chained_block_keys(list(range(33)), 16)), 2)

    def test_transfer_between_daemons(self):
        """Prefill pushes a request's blocks to decode; decode serves them."""
        with own_daemon("kvtier-py-prefill-", ("--set", "peer.role=prefill")) as (_, prefill), \
                own_daemon("kvtier-py-decode-", ("--set", "peer.role=decode")) as (_, decode):
            channel = grpc.insecure_channel(prefill.address)
            status = admin_pb2_grpc.AdminStub(channel).GetStatus(admin_pb2.GetStatusRequest())
            channel.close()
            ns = prefill.open_namespace("pd", 1, 1, 128, tokens_per_block=BLOCK_TOKENS)
            self.assertEqual(decode.open_namespace("pd", 1, 1, 128,
                                                   tokens_per_block=BLOCK_TOKENS).id, ns.id)
            keys = [b"t0", b"t1", b"t2"]
            blocks = [bytes([i]) * BLOCK_BYTES for i in range(3)]
            prefill.put(ns.id, keys[:2], blocks[:2])
            if not status.transfer.available:
                with self.assertRaises(KvtierError) as e:
                    prefill.transfer(ns.id, keys, decode.address)
                self.assertEqual(e.exception.code, grpc.StatusCode.UNAVAILABLE)
                return
            done = prefill.transfer(ns.id, keys, decode.address, "push")
            self.assertEqual([c.ok for c in done], [True, True, False])
            self.assertEqual(done[2].code, grpc.StatusCode.NOT_FOUND)
            self.assertEqual(decode.get(ns.id, keys[:2]), blocks[:2])
            # The decode side refuses to send.
            with self.assertRaises(KvtierError) as e:
                decode.transfer(ns.id, keys, prefill.address, "push")
            self.assertEqual(e.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
            with self.assertRaises(ValueError):
                decode.transfer(ns.id, keys, prefill.address, "sideways")

    def test_tls_tokens_and_tenants(self):
        """TLS with bearer tokens: the tenant comes from the token; two tenants
        with identical requests get separate namespaces and bytes."""
        workdir = tempfile.mkdtemp(prefix="kvtier-py-sec-")
        try:
            deploy = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "deploy")
            subprocess.run(["bash", os.path.join(deploy, "make-certs.sh"),
                            os.path.join(workdir, "pki")], check=True, stdout=subprocess.DEVNULL)
            identities = os.path.join(workdir, "identities.yaml")
            with open(identities, "w") as f:
                f.write("identities:\n"
                        "  - {token: alpha-token-0123456789, tenant: alpha}\n"
                        "  - {token: beta-token-0123456789, tenant: beta}\n")
            os.chmod(identities, 0o600)
            pki = os.path.join(workdir, "pki")
            extra = ("--set", "security.tls_cert=" + os.path.join(pki, "server.pem"),
                     "--set", "security.tls_key=" + os.path.join(pki, "server.key"),
                     "--set", "security.identities_file=" + identities)
            with own_daemon("kvtier-py-tls-", extra) as (_, plain):
                tls = dict(tls_ca=os.path.join(pki, "ca.pem"), tls_server_name="localhost",
                           timeout=10)
                alpha = Client(plain.address, token="alpha-token-0123456789", **tls)
                beta = Client(plain.address, token="beta-token-0123456789", **tls)
                nobody = Client(plain.address, **tls)
                try:
                    spec = dict(num_layers=1, num_kv_heads=1, head_dim=128,
                                tokens_per_block=BLOCK_TOKENS, salt=b"s")
                    with self.assertRaises(KvtierError) as e:
                        nobody.open_namespace("m", **spec)
                    self.assertEqual(e.exception.code, grpc.StatusCode.UNAUTHENTICATED)
                    a = alpha.open_namespace("m", **spec)
                    b = beta.open_namespace("m", **spec)
                    self.assertNotEqual(a.id, b.id)
                    alpha.put(a.id, [b"k"], [b"A" * BLOCK_BYTES])
                    self.assertEqual(beta.lookup(b.id, [b"k"]).matched, 0)
                    beta.put(b.id, [b"k"], [b"B" * BLOCK_BYTES])
                    self.assertEqual(alpha.get(a.id, [b"k"]), [b"A" * BLOCK_BYTES])
                    self.assertEqual(beta.get(b.id, [b"k"]), [b"B" * BLOCK_BYTES])
                    # Another tenant's namespace reads as one not open.
                    with self.assertRaises(KvtierError) as e:
                        beta.get(a.id, [b"k"])
                    self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
                finally:
                    for c in (alpha, beta, nobody):
                        c.close()
        finally:
            shutil.rmtree(workdir)

    def test_client_calls(self):
        self.assertEqual(self.ns.block_bytes, BLOCK_BYTES)
        keys = [b"py-a", b"py-b"]
        blocks = [b"x" * 100, b"y" * BLOCK_BYTES]
        self.assertEqual(self.client.put(self.ns.id, keys, blocks), 2)
        self.assertEqual(self.client.get(self.ns.id, keys), blocks)
        hit = self.client.lookup(self.ns.id, keys + [b"py-c"], take_lease=True)
        self.assertEqual(hit.matched, 2)
        self.assertEqual(hit.tiers, ["host", "host"])
        self.assertEqual(len(hit.persisted), 2)
        self.assertIsNone(hit.fetch_blocks)
        self.assertEqual(self.client.release(hit.lease_id), 2)
        with self.assertRaises(KvtierError) as e:
            self.client.get(self.ns.id, [b"py-none"])
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(KvtierError) as e:
            self.client.open_namespace("m", 1, 1, 128, dtype="int4")
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(KvtierError) as e:
            self.client.register_memory("/dev/shm/kvtier-none-such", 10)
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        # fp8 storage: its own namespace, blocks come back within fp8 precision.
        fp8 = self.client.open_namespace("m", 1, 1, 128, tokens_per_block=BLOCK_BYTES // 512,
                                         encoding="fp8")
        self.assertNotEqual(fp8.id, self.ns.id)
        self.assertIn("fp8", fp8.encoding)
        self.assertLess(fp8.stored_block_bytes, BLOCK_BYTES * 0.6)
        block = bytes([0x00, 0x3f]) * (BLOCK_BYTES // 2)  # bf16 0.5 everywhere: exact in fp8
        self.client.put(fp8.id, [b"f0"], [block])
        self.assertEqual(self.client.get(fp8.id, [b"f0"]), [block])
        with self.assertRaises(KvtierError) as e:
            self.client.open_namespace("m", 1, 1, 128, encoding="int4")
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        # Closing a namespace drops its blocks on request; it serves nothing after.
        self.assertEqual(self.client.close_namespace(fp8.id, drop_blocks=True), (0, 1, 0))
        with self.assertRaises(KvtierError) as e:
            self.client.get(fp8.id, [b"f0"])
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        # CUDA IPC: a handle that is not 64 bytes is refused up front.
        with self.assertRaises(KvtierError) as e:
            self.client.register_cuda_ipc(0, [(b"short", 0, 4096)])
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        # A region cannot be tied to a process that does not exist.
        with SharedRegion(BLOCK_BYTES) as region:
            with self.assertRaises(KvtierError) as e:
                self.client.register_memory(region.path, region.size, owner_pid=2**31 - 2)
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)

    def test_hybrid_namespace_groups(self):
        # Full attention (layer 1) and a recurrent layer (layer 0) with a
        # 4 KiB snapshot every 2 blocks: cuts only where a snapshot is.
        spec = NamespaceOptions("py-hybrid", KvLayoutSpec(
            2, 1, 128, tokens_per_block=BLOCK_TOKENS,
            groups=[LayerGroupSpec("full_attention", [1]),
                    LayerGroupSpec("recurrent", [0], state_bytes=4096,
                                   checkpoint_tokens=2 * BLOCK_TOKENS)]))
        ns = self.client.open_namespace(spec)
        self.assertEqual(ns.group_block_bytes, [BLOCK_BYTES, 4096])
        keys = [b"h0", b"h1", b"h2"]
        attention = [bytes([i]) * BLOCK_BYTES for i in range(3)]
        state = b"s" * 4096
        # One put: three attention blocks and the snapshot after block 2;
        # block 3's attention has no snapshot and serves no cut.
        self.assertEqual(self.client.put(ns.id, keys + [b"h1"], attention + [state],
                                         groups=[0, 0, 0, 1]), 4)
        hit = self.client.lookup(ns.id, keys)
        self.assertEqual(hit.matched, 2)
        self.assertEqual([(g.group, g.first_key, g.sizes) for g in hit.groups],
                         [(0, 0, [BLOCK_BYTES, BLOCK_BYTES]), (1, 1, [4096])])
        self.assertEqual(hit.plan_groups, [])  # no model: no plan, no shorter cut
        self.assertEqual(self.client.get(ns.id, [b"h1"], group=1), [state])
        self.assertEqual(self.client.get(ns.id, keys[:2], group=0), attention[:2])
        with self.assertRaises(KvtierError) as e:
            self.client.get(ns.id, [b"h2"], group=0)  # dropped: no cut used it
        self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)
        with self.assertRaises(KvtierError) as e:
            self.client.get(ns.id, [b"h1"], group=2)
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        bad = NamespaceOptions("py-hybrid", KvLayoutSpec(
            2, 1, 128, groups=[LayerGroupSpec("recurrent", [0, 1], state_bytes=4096,
                                              checkpoint_tokens=24)]))
        with self.assertRaises(KvtierError) as e:
            self.client.open_namespace(bad)
        self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("groups[0].checkpoint_tokens", e.exception.message)

    def test_save_and_load_async_through_shared_memory(self):
        with SharedRegion(8 * BLOCK_BYTES) as region:
            rid = self.client.register_memory(region.path, region.size)
            keys = [b"async-%d" % i for i in range(3)]
            for i in range(3):
                region.buffer[i * BLOCK_BYTES:(i + 1) * BLOCK_BYTES] = bytes([65 + i]) * BLOCK_BYTES
            refs = [BlockRef(k, i * BLOCK_BYTES, BLOCK_BYTES, keys[i - 1] if i else b"")
                    for i, k in enumerate(keys)]
            seen = []
            saved = self.client.save_async(self.ns.id, rid, refs, on_block=seen.append).result()
            self.assertTrue(all(c.ok for c in saved))
            self.assertEqual([c.index for c in seen], [0, 1, 2])
            load = [BlockRef(k, (4 + i) * BLOCK_BYTES, BLOCK_BYTES) for i, k in enumerate(keys)]
            load.append(BlockRef(b"async-missing", 7 * BLOCK_BYTES, BLOCK_BYTES))
            loaded = self.client.load_async(self.ns.id, rid, load).result()
            self.assertEqual([c.ok for c in loaded], [True, True, True, False])
            self.assertEqual(loaded[3].code, grpc.StatusCode.NOT_FOUND)
            # The three loads came as one run of completions: each block is
            # still reported with its own index, key and size.
            self.assertEqual([(c.index, c.key, c.size) for c in loaded],
                             [(i, k, BLOCK_BYTES) for i, k in enumerate(keys)] +
                             [(3, b"async-missing", 0)])
            for i in range(3):
                self.assertEqual(bytes(region.buffer[(4 + i) * BLOCK_BYTES:(5 + i) * BLOCK_BYTES]),
                                 bytes([65 + i]) * BLOCK_BYTES)
            self.client.unregister_memory(rid)
            with self.assertRaises(KvtierError) as e:
                self.client.load(self.ns.id, rid, load[:1])
            self.assertEqual(e.exception.code, grpc.StatusCode.NOT_FOUND)


class RetentionTest(unittest.TestCase):
    def test_retention_priorities(self):
        """Put/Save/Lookup take a retention priority: bad values change nothing;
        a prefix re-marked 0 (its conversation ended) goes first, though it is
        the most recently used; one marked 100 outlives a turnover."""
        # 4 MiB of host tier in 1 MiB slabs: 512 slots of 8 KiB.
        with own_daemon("kvtier-py-retention-", ("--set", "host_tier.bytes=4MiB")) as (_, client):
            ns = client.open_namespace("retention-model", num_layers=1, num_kv_heads=1,
                                       head_dim=128, tokens_per_block=BLOCK_TOKENS)
            block = b"r" * BLOCK_BYTES
            with self.assertRaises(KvtierError) as e:
                client.put(ns.id, [b"bad"], [block], retention_priority=101)
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(client.lookup(ns.id, [b"bad"]).matched, 0)
            client.put(ns.id, [b"system", b"system-2"], [block, block], retention_priority=100)
            client.put(ns.id, [b"plain", b"plain-2"], [block, block])
            client.put(ns.id, [b"ended", b"ended-2"], [block, block])
            # Refused whole: had it marked plain 0, plain would go first below.
            with self.assertRaises(KvtierError) as e:
                client.lookup(ns.id, [b"plain", b"plain-2"], retention_priority=200)
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(
                client.lookup(ns.id, [b"ended", b"ended-2"], retention_priority=0).matched, 2)
            # 6 of the 512 slots are taken; 508 more blocks: exactly 2 must go.
            for i in range(508):
                client.put(ns.id, [b"fill-%d" % i], [block])
            self.assertEqual(client.lookup(ns.id, [b"ended"]).matched, 0)
            self.assertEqual(client.lookup(ns.id, [b"plain", b"plain-2"]).matched, 2)
            self.assertEqual(client.lookup(ns.id, [b"system", b"system-2"]).matched, 2)
            self.assertEqual(client.lookup(ns.id, [b"fill-0"]).matched, 1)
            # A full turnover more: the retention-100 prefix is still there.
            for i in range(508, 1100):
                client.put(ns.id, [b"fill-%d" % i], [block])
            self.assertEqual(client.lookup(ns.id, [b"system", b"system-2"]).matched, 2)
            self.assertEqual(client.lookup(ns.id, [b"fill-1"]).matched, 0)  # used once: gone


class DaemonKilledMidLoadTest(unittest.TestCase):
    """kill -9 during a Load: the client gets an error, every block it was told
    is loaded holds the right bytes, and no other block is claimed loaded."""

    def test_kill_during_load(self):
        with own_daemon("kvtier-py-kill-") as (proc, client):
            ns = client.open_namespace("kill-model", num_layers=1, num_kv_heads=1, head_dim=128,
                                       tokens_per_block=BLOCK_TOKENS)
            n = 6000
            with SharedRegion(2 * n * BLOCK_BYTES) as region:
                rid = client.register_memory(region.path, region.size)
                keys = [b"kill-%d" % i for i in range(n)]
                for i in range(n):
                    region.buffer[i * BLOCK_BYTES:(i + 1) * BLOCK_BYTES] = \
                        (b"%08d" % i) * (BLOCK_BYTES // 8)
                refs = [BlockRef(k, i * BLOCK_BYTES, BLOCK_BYTES, keys[i - 1] if i else b"")
                        for i, k in enumerate(keys)]
                self.assertTrue(all(c.ok for c in client.save(ns.id, rid, refs)))
                out = n * BLOCK_BYTES
                region.buffer[out:out + n * BLOCK_BYTES] = b"\xee" * (n * BLOCK_BYTES)
                loads = [BlockRef(k, out + i * BLOCK_BYTES, BLOCK_BYTES)
                         for i, k in enumerate(keys)]
                seen = []

                def on_block(c):
                    seen.append(c)
                    if len(seen) == 5:
                        proc.kill()

                try:
                    client.load(ns.id, rid, loads, on_block=on_block)
                    finished = True  # the daemon sent everything before it died
                except KvtierError as e:
                    finished = False
                    self.assertIn(e.code, (grpc.StatusCode.UNAVAILABLE,
                                           grpc.StatusCode.CANCELLED,
                                           grpc.StatusCode.INTERNAL))
                self.assertEqual(len(seen) == n, finished)
                for c in seen:
                    self.assertTrue(c.ok)
                    at = out + c.index * BLOCK_BYTES
                    self.assertEqual(bytes(region.buffer[at:at + 8]), b"%08d" % c.index)


if __name__ == "__main__":
    unittest.main(verbosity=2)
