"""What both transfers (staged and direct) need of a call's blocks: each
block's bytes by its layer group, and how the blocks are cut into daemon
calls.

A hybrid model stores one block per layer group under each key, and the
daemon judges a Save whole: what no restorable cut can use when the call
ends is dropped (docs/api.md, layer groups). So the blocks of one key, which
a caller passes consecutively, always travel in the same call.
"""

import logging
from typing import Iterator, List, Optional, Sequence

from kvtier.engines.kv_layout import Span, spans_fit

log = logging.getLogger("kvtier.engines")


def group_block_bytes(block_bytes: int, group_bytes: Optional[Sequence[int]]) -> List[int]:
    """Per layer group, its block bytes (group 0's is `block_bytes`; one
    group when `group_bytes` is not given); ValueError when inconsistent."""
    if block_bytes < 1:
        raise ValueError("block_bytes must be positive")
    out = list(group_bytes) if group_bytes else [block_bytes]
    if out[0] != block_bytes or min(out) < 1:
        raise ValueError("group_bytes must be positive and start with block_bytes")
    return out


def block_sizes(group_bytes: Sequence[int], count: int, spans: Sequence[Sequence[Span]],
                groups: Optional[Sequence[int]]) -> Optional[List[int]]:
    """Each of a call's `count` blocks' bytes, by its group (all group 0
    when `groups` is None); None, logged, when the call is malformed or a
    block's spans do not hold its bytes."""
    if groups is None:
        groups = [0] * count
    if len(spans) != count or len(groups) != count or \
            any(not 0 <= g < len(group_bytes) for g in groups):
        log.error("kvtier: a transfer call's keys, spans and groups disagree")
        return None
    sizes = [group_bytes[g] for g in groups]
    if all(spans_fit([s], n) for s, n in zip(spans, sizes)):
        return sizes
    log.error("kvtier: a block's spans do not hold its bytes (%s per group)", list(group_bytes))
    return None


def batches(keys: Sequence[bytes], limit: int) -> Iterator[range]:
    """Consecutive ranges of `keys` of at most `limit` entries each (more only
    when one key's run of entries alone is longer), never cutting a run of
    equal consecutive keys."""
    if limit < 1:
        raise ValueError("limit must be >= 1")
    start, n = 0, len(keys)
    while start < n:
        end = min(n, start + limit)
        while start < end < n and keys[end] == keys[end - 1]:
            end -= 1  # back to the start of the run the limit cut
        if end == start:  # one run longer than the limit: it goes whole
            end = start + 1
            while end < n and keys[end] == keys[start]:
                end += 1
        yield range(start, end)
        start = end
