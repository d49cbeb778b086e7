"""Unit tests of the kvtier Python package's API surface, without a daemon:
Client as a context manager, and NamespaceOptions against the keyword form
of open_namespace.

Usage: python3 client_test.py PYTHONPATH   (build/python: the package with
its generated stubs)
"""

import sys
import unittest

if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv.pop(1))

import grpc  # noqa: E402

from kvtier import Client, KvLayoutSpec, KvtierError, NamespaceOptions  # noqa: E402
from kvtier.client import KEYS_LOOKUPS_BEFORE_RETRY  # noqa: E402
from kvtier.v1 import kvcache_pb2, types_pb2  # noqa: E402


class _RecordingStub:
    """Stands in for KvCacheStub: records OpenNamespace requests."""

    def __init__(self):
        self.requests = []

    def OpenNamespace(self, request, timeout=None):
        self.requests.append(request)
        return kvcache_pb2.OpenNamespaceResponse(namespace_id="ab" * 16, block_bytes=4096,
                                                 created=True)


class _LookupStub:
    """Stands in for KvCacheStub: answers each Lookup with `reply`."""

    def __init__(self, reply):
        self.reply = reply
        self.requests = []
        self.timeouts = []

    def record(self, request, timeout):
        # A copy, as gRPC sends the bytes of the request at the call.
        sent = type(request)()
        sent.CopyFrom(request)
        self.requests.append(sent)
        self.timeouts.append(timeout)

    def Lookup(self, request, timeout=None):
        self.record(request, timeout)
        return self.reply


class _Refusal(grpc.RpcError):
    """A failed call as gRPC raises it."""

    def __init__(self, code, details):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


class _OldDaemonStub(_LookupStub):
    """A daemon that predates packed keys: a Lookup without `keys` has no
    keys, and is refused; or, with refuse_all, one that refuses every
    Lookup."""

    def __init__(self, reply, refuse_all=False):
        super().__init__(reply)
        self.refuse_all = refuse_all

    def Lookup(self, request, timeout=None):
        self.record(request, timeout)
        if self.refuse_all or not request.keys:
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, "request has 0 keys; must be 1..65536")
        return self.reply


class ClientPackageTest(unittest.TestCase):
    def test_lookup_reads_the_compact_reply_and_an_old_daemons_full_one(self):
        host, nvme = types_pb2.TIER_KIND_HOST, types_pb2.TIER_KIND_NVME
        compact = kvcache_pb2.LookupResponse(matched=3, compact_blocks=kvcache_pb2.CompactBlocks(
            size_bytes=[4096, 4096, 100], tier=[host, nvme, nvme], persisted=[False, True, True]))
        full = kvcache_pb2.LookupResponse(matched=3, blocks=[
            kvcache_pb2.BlockInfo(key=b"a", size_bytes=4096, tier=host, persisted=False),
            kvcache_pb2.BlockInfo(key=b"b", size_bytes=4096, tier=nvme, persisted=True),
            kvcache_pb2.BlockInfo(key=b"c", size_bytes=100, tier=nvme, persisted=True)])
        for reply in (compact, full):
            with Client("127.0.0.1:1") as c:
                c._stub = _LookupStub(reply)
                r = c.lookup("ab" * 16, [b"a", b"b", b"c", b"d"])
                self.assertTrue(c._stub.requests[0].compact_reply)
            self.assertEqual(r.matched, 3)
            self.assertEqual(r.tiers, ["host", "nvme", "nvme"])
            self.assertEqual(r.persisted, [False, True, True])

    def test_lookup_sends_keys_of_one_width_packed_and_repeats_them_to_an_old_daemon(self):
        keys = [b"aa", b"bb", b"cc"]
        reply = kvcache_pb2.LookupResponse(matched=1)
        with Client("127.0.0.1:1") as c:
            c._stub = _LookupStub(reply)
            self.assertEqual(c.lookup("ab" * 16, keys).matched, 1)
            (sent,) = c._stub.requests
            self.assertEqual(sent.packed_keys, b"aabbcc")
            self.assertEqual(sent.packed_key_bytes, 2)
            self.assertEqual(list(sent.keys), [])
            # Keys of different widths cannot be packed.
            c.lookup("ab" * 16, [b"a", b"bb"])
            self.assertEqual(list(c._stub.requests[1].keys), [b"a", b"bb"])
            self.assertEqual(c._stub.requests[1].packed_keys, b"")
        # A daemon that predates packed keys refuses them: the client asks
        # again with `keys`, sends them so for the next
        # KEYS_LOOKUPS_BEFORE_RETRY Lookups, then tries packed keys again.
        with Client("127.0.0.1:1") as c:
            c._stub = _OldDaemonStub(reply)
            self.assertEqual(c.lookup("ab" * 16, keys).matched, 1)
            first, again = c._stub.requests
            self.assertEqual(first.packed_keys, b"aabbcc")
            # The second try runs within the first one's deadline.
            self.assertEqual(c._stub.timeouts[0], 30.0)
            self.assertLess(c._stub.timeouts[1], 30.0)
            self.assertEqual(list(again.keys), keys)
            self.assertEqual((again.packed_keys, again.packed_key_bytes), (b"", 0))
            for _ in range(KEYS_LOOKUPS_BEFORE_RETRY):
                c.lookup("ab" * 16, keys)
            self.assertEqual(len(c._stub.requests), 2 + KEYS_LOOKUPS_BEFORE_RETRY)
            for sent in c._stub.requests[2:]:
                self.assertEqual((list(sent.keys), sent.packed_keys), (keys, b""))
            c.lookup("ab" * 16, keys)
            packed_again, keys_again = c._stub.requests[-2:]
            self.assertEqual(packed_again.packed_keys, b"aabbcc")
            self.assertEqual(list(keys_again.keys), keys)
        # A request refused both ways is refused for its own fault: the
        # error is the caller's, and the next Lookup is packed again.
        with Client("127.0.0.1:1") as c:
            c._stub = _OldDaemonStub(reply, refuse_all=True)
            with self.assertRaises(KvtierError) as e:
                c.lookup("ab" * 16, keys)
            self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(len(c._stub.requests), 2)
            with self.assertRaises(KvtierError):
                c.lookup("ab" * 16, keys)
            self.assertEqual(c._stub.requests[2].packed_keys, b"aabbcc")

    def test_with_block_closes_the_channel(self):
        with Client("127.0.0.1:1", timeout=0.2) as c:
            self.assertIsInstance(c, Client)
            with self.assertRaises(KvtierError) as e:
                c.lookup("00" * 16, [b"k"])
            self.assertIn(e.exception.code, (grpc.StatusCode.UNAVAILABLE,
                                             grpc.StatusCode.DEADLINE_EXCEEDED))
        # A closed gRPC channel refuses new calls.
        with self.assertRaises(ValueError):
            c.lookup("00" * 16, [b"k"])

    def test_with_block_closes_on_error_too(self):
        with self.assertRaises(RuntimeError):
            with Client("127.0.0.1:1") as c:
                raise RuntimeError("engine failed")
        with self.assertRaises(ValueError):
            c.lookup("00" * 16, [b"k"])

    def test_options_mirror_the_keyword_form(self):
        self.assertEqual(KvLayoutSpec(), KvLayoutSpec(0, 0, 0, "bf16", 16, 0, 1))
        self.assertEqual(NamespaceOptions().layout, KvLayoutSpec())
        with Client("127.0.0.1:1") as c:
            c._stub = _RecordingStub()
            ns = c.open_namespace(NamespaceOptions(
                "m", KvLayoutSpec(2, 8, 128, "fp16", 32, 1, 4), salt=b"s", cost_model="llama-3.1-8b",
                encoding="fp8", engine_layout="vllm-nhd", k_group_tokens=16))
            c.open_namespace("m", 2, 8, 128, dtype="fp16", tokens_per_block=32, tp_rank=1,
                             tp_size=4, salt=b"s", cost_model="llama-3.1-8b", encoding="fp8",
                             engine_layout="vllm-nhd", k_group_tokens=16)
            c.open_namespace_with(NamespaceOptions("m", KvLayoutSpec(1, 1, 64)))
            sent = c._stub.requests
        self.assertEqual(ns.id, "ab" * 16)
        self.assertEqual(ns.block_bytes, 4096)
        self.assertEqual(len(sent), 3)
        self.assertEqual(sent[0], sent[1])
        self.assertEqual(sent[0].layout.dtype, types_pb2.DTYPE_FP16)
        self.assertEqual((sent[0].layout.num_layers, sent[0].layout.tp_rank,
                          sent[0].layout.tp_size), (2, 1, 4))
        self.assertEqual(sent[0].encoding.kind,
                         kvcache_pb2.StorageEncoding.STORAGE_ENCODING_FP8_E4M3)
        self.assertEqual(sent[0].encoding.k_group_tokens, 16)
        self.assertEqual(sent[2].layout.head_dim, 64)
        self.assertEqual(sent[2].layout.tokens_per_block, 16)
        self.assertEqual(sent[2].layout.dtype, types_pb2.DTYPE_BF16)

    def test_bad_options_are_refused_before_the_call(self):
        with Client("127.0.0.1:1") as c:
            c._stub = _RecordingStub()
            for bad in (NamespaceOptions("m", KvLayoutSpec(1, 1, 128, dtype="int4")),
                        NamespaceOptions("m", KvLayoutSpec(1, 1, 128), encoding="int4")):
                with self.assertRaises(KvtierError) as e:
                    c.open_namespace(bad)
                self.assertEqual(e.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(c._stub.requests, [])


if __name__ == "__main__":
    unittest.main()
