"""The vLLM connector's GPU path on a real GPU: a (2, num_blocks, block_size,
heads, head_dim) KV tensor in GPU memory, exported by CUDA IPC as the
connector exports a torch storage (cuda_region), registered with a kvtierd
built with CUDA, blocks saved from some engine blocks by DirectTransfer and
loaded into others, compared byte for byte on the device.

The GPU memory comes from the CUDA runtime through ctypes (cudaMalloc,
cudaIpcGetMemHandle): Debian's torch has no CUDA, and the connector needs
nothing of a tensor but what this one provides.

Exits 77 (ctest: skipped) with the reason where there is no GPU or no
CUDA runtime. Usage: python3 cuda_ipc_test.py KVTIERD PYTHONPATH
"""

import ctypes
import ctypes.util
import glob
import os
import shutil
import sys
import tempfile
from types import SimpleNamespace

KVTIERD, PYTHONPATH = sys.argv[1], sys.argv[2]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, PYTHONPATH)
sys.path.insert(0, HERE)

from engine_sim import contiguous_strides, start_daemon  # noqa: E402

from kvtier import Client, KvLayoutSpec, NamespaceOptions  # noqa: E402
from kvtier.engines.cuda_region import cuda_region  # noqa: E402
from kvtier.engines.direct_transfer import DirectTransfer  # noqa: E402
from kvtier.engines.kv_layout import BlockLayout, TensorGeometry  # noqa: E402

NB, BS, H, D = 64, 16, 8, 128
SKIP = 77


def skip(reason):
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def cudart():
    names = [ctypes.util.find_library("cudart")] + \
        sorted(glob.glob("/usr/local/cuda*/lib64/libcudart.so*"))
    for name in filter(None, names):
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    skip("no CUDA runtime (libcudart) on this machine")


class DeviceTensor:
    """A bf16 GPU tensor of `shape` (contiguous), as the connector reads one."""

    def __init__(self, rt, shape):
        self.rt, self.shape = rt, shape
        n = 1
        for d in shape:
            n *= d
        self.nbytes = n * 2
        self.ptr = ctypes.c_void_p()
        check(rt.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(self.nbytes)), "cudaMalloc")
        self._strides = contiguous_strides(shape)
        self.is_cuda = True
        self.device = SimpleNamespace(index=0)

    def data_ptr(self):
        return self.ptr.value

    def stride(self):
        return self._strides

    def element_size(self):
        return 2

    def untyped_storage(self):
        handle = (ctypes.c_char * 64)()
        check(self.rt.cudaIpcGetMemHandle(handle, self.ptr), "cudaIpcGetMemHandle")
        n = self.nbytes
        return SimpleNamespace(data_ptr=self.data_ptr, nbytes=lambda: n,
                               _share_cuda_=lambda: (0, bytes(handle), n, 0, b"", 0, b"", False))

    def write(self, data):
        check(self.rt.cudaMemcpy(self.ptr, data, ctypes.c_size_t(len(data)), 1), "H2D")

    def read(self):
        out = (ctypes.c_char * self.nbytes)()
        check(self.rt.cudaMemcpy(out, self.ptr, ctypes.c_size_t(self.nbytes), 2), "D2H")
        return bytes(out)


def check(err, what):
    if err != 0:
        raise RuntimeError(f"{what}: CUDA error {err}")


def main():
    rt = cudart()
    count = ctypes.c_int(0)
    if rt.cudaGetDeviceCount(ctypes.byref(count)) != 0 or count.value == 0:
        skip("no GPU")
    tmp = tempfile.mkdtemp(prefix="kvtier-cuda-ipc-")
    sock = os.path.join(tmp, "kvtier.sock")
    proc = start_daemon(KVTIERD, sock, os.path.join(tmp, "kvtierd.log"))
    try:
        t = DeviceTensor(rt, (2, NB, BS, H, D))
        pattern = bytes((i * 131 + 7) % 251 for i in range(t.nbytes))
        t.write(pattern)
        layout = BlockLayout([TensorGeometry(t.data_ptr(), t.shape, t.stride(), 2)], NB)
        region = cuda_region([t], device=0)
        client = Client("unix:" + sock, timeout=30)
        opts = NamespaceOptions(model_id="gpu/check", layout=KvLayoutSpec(
            num_layers=1, num_kv_heads=H, head_dim=D, dtype="bf16", tokens_per_block=BS))
        transfer = DirectTransfer(client, lambda c: c.open_namespace_with(opts).id,
                                  region.register, region.space, layout.block_bytes, region.sync)
        keys = [f"block{i}".encode() for i in range(8)]
        saved = transfer.save(keys, [b""] + keys[:-1], [layout.spans(b) for b in range(8)])
        assert saved == 8, f"saved {saved} of 8 blocks: {transfer.stats} (see the daemon's log)"
        ns = client.open_namespace_with(opts).id
        base = t.data_ptr()
        for b, k in enumerate(keys):  # the daemon's copy is the block's K then V
            want = b"".join(pattern[a - base:a - base + n] for a, n in layout.spans(b))
            assert client.get(ns, [k])[0] == want, f"block {b} differs in the daemon"
        loaded = transfer.load(keys, [layout.spans(b) for b in range(32, 40)])
        assert loaded == 8, f"loaded {loaded} of 8 blocks: {transfer.stats}"
        got = t.read()
        span = BS * H * D * 2
        for kv in (0, 1):
            for b in range(8):
                src = (kv * NB + b) * span
                dst = (kv * NB + 32 + b) * span
                assert got[dst:dst + span] == pattern[src:src + span], f"block {b} half {kv}"
        transfer.close()
        client.close()
        print(f"cuda_ipc_test: 8 blocks of {layout.block_bytes} bytes saved from and loaded "
              "into GPU memory by CUDA IPC, byte-exact")
    finally:
        proc.kill()
        proc.wait(10)
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
