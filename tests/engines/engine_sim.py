"""What the engine connector tests share: a kvtierd of their own, and a
host tensor with torch's methods (data_ptr, shape, stride, element_size) over
ctypes memory, so the tests need no torch.
"""

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from daemon_socket import wait_listening  # noqa: E402


def start_daemon(kvtierd, sock, log_path):
    with open(log_path, "a") as log:
        proc = subprocess.Popen(
            [kvtierd, "--listen", "unix:" + sock, "--host-tier-bytes", "64MiB",
             "--set", "nvme.dirs=", "--set", "costmodel.probe_tiers=false",
             "--set", "metrics.listen=off", "--set", "host_tier.slab_bytes=1MiB",
             "--set", "limits.max_block_bytes=1MiB"],
            stdout=log, stderr=subprocess.STDOUT)
    if wait_listening(proc, sock):
        return proc
    with open(log_path) as f:
        raise RuntimeError("kvtierd did not start: " + f.read()[-2000:])


def contiguous_strides(shape):
    """Row-major strides, in elements, of a tensor of `shape`."""
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc *= d
    return tuple(strides)


def daemon_for(test, kvtierd, prefix):
    """Starts a kvtierd for `test` (a unittest.TestCase) in a fresh directory
    and sets test.dir, test.sock, test.log and test.proc. The daemon (the
    one in test.proc when the test ends) is killed and the directory removed
    by the test's cleanups, which run even when the rest of setUp fails."""
    test.dir = tempfile.mkdtemp(prefix=prefix)
    test.addCleanup(shutil.rmtree, test.dir, True)
    test.sock = os.path.join(test.dir, "kvtier.sock")
    test.log = os.path.join(test.dir, "kvtierd.log")
    test.proc = start_daemon(kvtierd, test.sock, test.log)

    def stop():
        test.proc.kill()
        test.proc.wait(10)
    test.addCleanup(stop)


class HostTensor:
    """A host tensor as the connector reads one (torch's methods)."""

    def __init__(self, shape):
        self.shape = shape
        n = 1
        for d in shape:
            n *= d
        self._buf = (ctypes.c_char * (n * 2))()
        self._strides = contiguous_strides(shape)
        self.is_cuda = False

    def data_ptr(self):
        return ctypes.addressof(self._buf)

    def stride(self):
        return self._strides

    def element_size(self):
        return 2

    # As a GPU tensor (is_cuda set): torch's CUDA IPC export of its storage,
    # with a handle no CUDA process can open (the daemon refuses it).
    device = SimpleNamespace(index=0)

    def untyped_storage(self):
        n = len(self._buf)
        return SimpleNamespace(data_ptr=self.data_ptr, nbytes=lambda: n,
                               _share_cuda_=lambda: (0, b"\x01" * 64, n, 0, b"", 0, b"", False))

    def span(self, kv, block):  # (2, num_blocks, ...): K or V of one block
        return self.data_ptr() + (kv * self._strides[0] + block * self._strides[1]) * 2
