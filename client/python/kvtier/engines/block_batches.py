"""How a transfer cuts a call's blocks into daemon calls.

A hybrid model stores one block per layer group under each key, and the
daemon judges a Save whole: what no restorable cut can use when the call
ends is dropped (docs/api.md, layer groups). So the blocks of one key, which
a caller passes consecutively, always travel in the same call.
"""

from typing import Iterator, Sequence


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
