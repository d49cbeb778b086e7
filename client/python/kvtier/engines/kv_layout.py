"""Where an engine block's bytes lie in the engine's KV cache tensors.

Engines keep KV caches as tensors with a block dimension somewhere in them:
vLLM's FlashAttention backend (2, num_blocks, block_size, heads, head_dim),
FlashInfer (num_blocks, 2, block_size, heads, head_dim), MLA (num_blocks,
block_size, dim), in NHD or HND stride order, or one cross-layer tensor per
cache. Rather than knowing each backend, a tensor is read from its shape and
strides: the block dimension is the one of size num_blocks; the dimensions
with a smaller stride must cover one block densely; each index of the
dimensions with a larger stride (K/V, layers, heads...) gives one span of the
block. A block's bytes are its spans over every tensor, in registration
order and then index order; saves and loads use the same order, so a block
round-trips byte-exact whatever the layout.
"""

import itertools
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

Span = Tuple[int, int]  # (address, bytes)


@dataclass(frozen=True)
class TensorGeometry:
    """What the layout needs of one tensor (torch: data_ptr(), tuple(shape),
    stride(), element_size())."""
    address: int
    shape: Tuple[int, ...]
    strides: Tuple[int, ...]  # in elements
    element_size: int


class LayoutError(ValueError):
    pass


_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32",
           "float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}


def kvtier_dtype(engine_dtype: object) -> Optional[str]:
    """An engine's element type (torch.bfloat16, or its name) as a namespace
    dtype ("bf16", ...); None for one kvtier does not store."""
    return _DTYPES.get(str(engine_dtype).replace("torch.", ""))


def spans_fit(blocks: Sequence[Sequence[Span]], block_bytes: int) -> bool:
    """Whether each block's spans hold exactly block_bytes."""
    return all(sum(size for _, size in spans) == block_bytes for spans in blocks)


def _block_dim(g: TensorGeometry, num_blocks: int) -> int:
    """The dimension of size num_blocks with the largest stride: the others of
    that size are inner (a head_dim equal to num_blocks). With (2, num_blocks,
    ...) and num_blocks == 2 it is dimension 1 (K/V first, as vLLM's
    FlashAttention); a FlashInfer cache of two blocks cannot be told apart."""
    dims = [d for d, n in enumerate(g.shape) if n == num_blocks]
    if not dims:
        raise LayoutError(f"tensor of shape {g.shape} has no dimension of num_blocks "
                          f"({num_blocks})")
    if len(dims) > 1 and dims[:2] == [0, 1] and num_blocks == 2:
        return 1
    return max(dims, key=lambda d: g.strides[d])


def _tensor_spans(g: TensorGeometry, num_blocks: int) -> Tuple[List[int], int]:
    """The offsets (bytes, from block 0's first span) of one block's spans and
    the block stride and span size, in bytes."""
    if len(g.shape) != len(g.strides):
        raise LayoutError(f"shape {g.shape} and strides {g.strides} differ in rank")
    b = _block_dim(g, num_blocks)
    block_stride = g.strides[b]
    inner = sorted((g.strides[d], g.shape[d]) for d in range(len(g.shape))
                   if d != b and g.strides[d] < block_stride and g.shape[d] > 1)
    expect = 1
    for stride, n in inner:
        if stride != expect:
            raise LayoutError(f"tensor of shape {g.shape}, strides {g.strides}: a block's "
                              "elements are not contiguous (padded pages are not supported)")
        expect *= n
    if expect != block_stride:
        raise LayoutError(f"tensor of shape {g.shape}, strides {g.strides}: a block is "
                          f"{expect} elements but blocks are {block_stride} apart")
    outer = [d for d in range(len(g.shape))
             if d != b and g.strides[d] > block_stride and g.shape[d] > 1]
    offsets = []
    for idx in itertools.product(*(range(g.shape[d]) for d in outer)):
        offsets.append(sum(i * g.strides[d] for i, d in zip(idx, outer)) * g.element_size)
    return offsets, block_stride * g.element_size


class BlockLayout:
    """The spans of every engine block over a set of tensors."""

    def __init__(self, tensors: Sequence[TensorGeometry], num_blocks: int):
        if not tensors:
            raise LayoutError("no KV cache tensors")
        if num_blocks < 1:
            raise LayoutError("num_blocks must be positive")
        self.num_blocks = num_blocks
        self._parts = []  # (address, offsets, block stride bytes, span bytes)
        self.block_bytes = 0
        for g in tensors:
            offsets, stride = _tensor_spans(g, num_blocks)
            self._parts.append((g.address, offsets, stride))
            self.block_bytes += len(offsets) * stride

    def run_spans(self, first: int, count: int) -> List[Span]:
        """The spans of blocks [first, first + count) (e.g. a page of token
        slots): one per outer index of each tensor, since a block's span is
        exactly the block stride and consecutive blocks are adjacent."""
        if count < 1 or first < 0 or first + count > self.num_blocks:
            raise LayoutError(f"blocks {first}..{first + count - 1} are outside "
                              f"0..{self.num_blocks - 1}")
        out: List[Span] = []
        for address, offsets, stride in self._parts:
            base = address + first * stride
            out.extend((base + o, stride * count) for o in offsets)
        return out

    def spans(self, block_id: int) -> List[Span]:
        if not 0 <= block_id < self.num_blocks:
            raise LayoutError(f"block {block_id} is outside 0..{self.num_blocks - 1}")
        out: List[Span] = []
        for address, offsets, stride in self._parts:
            base = address + block_id * stride
            out.extend((base + o, stride) for o in offsets)
        return out
