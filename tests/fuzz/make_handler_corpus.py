#!/usr/bin/python3
"""Writes the seed corpus of handler_fuzz (tests/fuzz/handler_corpus): one
well-formed request per RPC, against the namespace and blocks the fuzz
harness creates at start. The namespace id is a fingerprint of its spec, so
it is read from a real kvtierd opening the same spec.

  make_handler_corpus.py KVTIERD PYTHONPATH OUT_DIR
"""
import os
import re
import subprocess
import sys
import tempfile
import time

kvtierd, pythonpath, out = sys.argv[1:4]
sys.path.insert(0, pythonpath)
import grpc  # noqa: E402
from kvtier.v1 import admin_pb2, kvcache_pb2, kvcache_pb2_grpc, peer_pb2, types_pb2  # noqa: E402

work = tempfile.mkdtemp()
log = open(os.path.join(work, "log"), "w+")
proc = subprocess.Popen([kvtierd, "--listen", "127.0.0.1:0", "--host-tier-bytes", "64MiB",
                         "--set", "nvme.dirs=", "--set", "costmodel.probe_tiers=false",
                         "--set", "peer.transport=off", "--set", "metrics.listen=off"], stdout=log, stderr=log)
try:
    address = None
    for _ in range(100):
        log.seek(0)
        m = re.search(r"kvtierd listening on (\S+)", log.read())
        if m:
            address = m.group(1)
            break
        time.sleep(0.1)
    stub = kvcache_pb2_grpc.KvCacheStub(grpc.insecure_channel(address))
    layout = types_pb2.NamespaceLayout(num_layers=1, num_kv_heads=1, head_dim=128,
                                       dtype=types_pb2.DTYPE_BF16, tokens_per_block=16, tp_size=1)
    open_req = kvcache_pb2.OpenNamespaceRequest(model_id="fuzz", layout=layout)
    ns = stub.OpenNamespace(open_req).namespace_id
finally:
    proc.kill()
    proc.wait()

keys = [b"k0", b"k1", b"k2", b"k3"]
seeds = {
    "open": (0, open_req),
    "lookup": (1, kvcache_pb2.LookupRequest(namespace_id=ns, keys=keys + [b"k9"], take_lease=True)),
    "lookup_packed": (1, kvcache_pb2.LookupRequest(namespace_id=ns, packed_keys=b"".join(keys),
                                                   packed_key_bytes=2, compact_reply=True)),
    "release": (2, kvcache_pb2.ReleaseRequest(lease_id="0" * 32)),
    "delete": (3, kvcache_pb2.DeleteRequest(namespace_id=ns, keys=[b"k3"])),
    "register": (4, kvcache_pb2.RegisterMemoryRequest(region=kvcache_pb2.MemoryRegion(
        shared_memory=kvcache_pb2.SharedMemoryFile(path="/tmp/none", size_bytes=65536)))),
    "unregister": (5, kvcache_pb2.UnregisterMemoryRequest(region_id="r1")),
    "push": (6, kvcache_pb2.TransferRequest(namespace_id=ns, keys=keys,
                                            direction=kvcache_pb2.TRANSFER_DIRECTION_PUSH)),
    "pull": (6, kvcache_pb2.TransferRequest(namespace_id=ns, keys=keys,
                                            direction=kvcache_pb2.TRANSFER_DIRECTION_PULL)),
    "get": (7, kvcache_pb2.GetRequest(namespace_id=ns, keys=keys)),
    "save": (8, kvcache_pb2.SaveRequest(namespace_id=ns, region_id="r1", blocks=[
        kvcache_pb2.BlockRef(key=b"s0", offset=0, size_bytes=8192)])),
    "load": (9, kvcache_pb2.LoadRequest(namespace_id=ns, region_id="r1", blocks=[
        kvcache_pb2.BlockRef(key=b"k0", offset=0, size_bytes=8192)])),
    "hello": (10, peer_pb2.HelloRequest(daemon_id="x")),
    "stage": (11, peer_pb2.StageRequest(namespace_id=ns, ttl_ms=1000, blocks=[
        peer_pb2.PeerBlock(key=b"k4", parent=b"k3", size_bytes=8192, checksum=1)])),
    "commit": (12, peer_pb2.CommitRequest(stage_id="0" * 32, received=1)),
    "export": (13, peer_pb2.ExportRequest(namespace_id=ns, keys=keys, ttl_ms=1000)),
    "release_export": (14, peer_pb2.ReleaseExportRequest(export_id="0" * 32)),
    "admin": (15, admin_pb2.ListPeersRequest()),
}
os.makedirs(out, exist_ok=True)
for name, (op, msg) in seeds.items():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([op]) + msg.SerializeToString())
chunks = b""
for i, k in enumerate([b"p0", b"p1"]):
    c = kvcache_pb2.PutChunk(namespace_id=ns if i == 0 else "", key=k,
                             parent_key=b"" if i == 0 else b"p0", block_bytes=8192,
                             data=bytes([i]) * 8192).SerializeToString()
    chunks += len(c).to_bytes(2, "little") + c
with open(os.path.join(out, "put"), "wb") as f:
    f.write(bytes([16]) + chunks)
print(f"{len(seeds) + 1} seeds for namespace {ns} in {out}")
