"""The engine's GPU KV tensors as one CUDA IPC region for DirectTransfer.

Each distinct storage under the tensors (vLLM's layers often share one
buffer) is one piece of the region, exported with PyTorch's CUDA IPC
sharing (`untyped_storage()._share_cuda_()`: the allocation's
cudaIpcMemHandle_t and the storage's byte offset in that allocation), which
the daemon opens with cudaIpcOpenMemHandle (Client.register_cuda_ipc).
Older torch gives the 64-byte handle itself; newer torch prefixes it with
a version byte and a type byte ('c': a cudaMalloc block; 'e': an
expandable segment, which has no cudaIpcMemHandle_t and is refused: run the
engine without PYTORCH_CUDA_ALLOC_CONF=expandable_segments). Sharing keeps
torch's reference count on the storage for the process's life, as the KV
caches live that long anyway. torch is imported lazily; nothing here runs
without GPU tensors.

The daemon addresses devices by its own ordinals: the engine's device index
is mapped through CUDA_VISIBLE_DEVICES when that lists plain ordinals, and
`device` overrides it (kvtier_cuda_device in the connector's config).
"""

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from kvtier.client import Client
from kvtier.engines.direct_transfer import RegionSpace
from kvtier.engines.kv_layout import LayoutError

_MAX_TENSORS = 4096  # CudaIpcMemory.tensors
_IPC_HANDLE_BYTES = 64  # cudaIpcMemHandle_t


@dataclass
class CudaRegion:
    space: RegionSpace
    device: int  # as the daemon sees it
    tensors: List[Tuple[bytes, int, int]]  # (handle, offset in its allocation, bytes)
    sync: Callable[[], None]

    def register(self, client: Client) -> str:
        return client.register_cuda_ipc(self.device, self.tensors)


def daemon_device(engine_index: int, visible: Optional[str] = None) -> int:
    """The daemon's ordinal of the engine's device `engine_index`: through
    CUDA_VISIBLE_DEVICES when it lists ordinals (not UUIDs), else the same."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if visible:
        ids = [v.strip() for v in visible.split(",")]
        if all(v.isdigit() for v in ids) and engine_index < len(ids):
            return int(ids[engine_index])
    return engine_index


def ipc_handle(shared: bytes) -> bytes:
    """The cudaIpcMemHandle_t in what _share_cuda_() gives as the handle:
    the 64 bytes themselves (older torch), or after torch's version and
    type bytes (type 'c'); LayoutError for anything else."""
    if len(shared) == _IPC_HANDLE_BYTES:
        return shared
    if len(shared) == _IPC_HANDLE_BYTES + 2 and shared[1:2] == b"c":
        return shared[2:]
    if len(shared) >= 2 and shared[1:2] == b"e":
        raise LayoutError("KV caches in torch expandable segments cannot be shared by "
                          "cudaIpcMemHandle; unset PYTORCH_CUDA_ALLOC_CONF=expandable_segments")
    raise LayoutError(f"a CUDA IPC handle of {len(shared)} bytes in a format kvtier does not "
                      "know")


def _device_sync(device: int) -> Callable[[], None]:
    """Waits for every stream of `device` (whichever one the engine computes
    on), before the daemon reads KV or overwrites blocks. Nothing to wait for
    where this process has no CUDA through torch."""
    try:
        import torch
    except ImportError:
        return lambda: None
    if not torch.cuda.is_available():
        return lambda: None
    return lambda: torch.cuda.synchronize(device)


def cuda_region(tensors: Sequence[Any], device: Optional[int] = None) -> CudaRegion:
    """The region of the storages under `tensors` (all on one GPU)."""
    storages: Dict[int, Any] = {}
    indices = set()
    for t in tensors:
        indices.add(t.device.index or 0)
        storage = t.untyped_storage()
        storages.setdefault(storage.data_ptr(), storage)
    if len(indices) != 1:
        raise LayoutError(f"KV tensors on {len(indices)} GPUs; a worker's must be on one")
    if len(storages) > _MAX_TENSORS:
        raise LayoutError(f"{len(storages)} KV buffers; the daemon registers at most "
                          f"{_MAX_TENSORS}")
    pieces, ipc = [], []
    for ptr, storage in sorted(storages.items()):
        shared = storage._share_cuda_()
        handle, size, offset = ipc_handle(bytes(shared[1])), int(shared[2]), int(shared[3])
        pieces.append((ptr, size))
        ipc.append((handle, offset, size))
    engine_index = indices.pop()
    return CudaRegion(RegionSpace(pieces),
                      daemon_device(engine_index) if device is None else device, ipc,
                      _device_sync(engine_index))
