"""The canonical chained block key (docs/api.md): XXH3-128 over the parent key,
the token ids and extra keys, as 16 big-endian bytes. Same bytes as the C++
include/kvtier/chained_hash.h."""

import struct
from typing import Iterable, List, Sequence

import xxhash


def chained_block_key(parent_key: bytes, tokens: Sequence[int],
                      extra_keys: Iterable[bytes] = ()) -> bytes:
    """The key of one block; parent_key is b"" for the first block."""
    if len(parent_key) > 255:
        raise ValueError("parent_key is longer than 255 bytes")
    extra = list(extra_keys)
    parts = [bytes([len(parent_key)]), parent_key, struct.pack("<I", len(tokens)),
             struct.pack("<%di" % len(tokens), *tokens), struct.pack("<I", len(extra))]
    for e in extra:
        parts += [struct.pack("<I", len(e)), e]
    return xxhash.xxh3_128(b"".join(parts)).digest()


def chained_block_keys(tokens: Sequence[int], block_tokens: int) -> List[bytes]:
    """Keys of every full block of tokens (a partial last block has none)."""
    if block_tokens <= 0:
        raise ValueError("block_tokens must be > 0")
    keys, parent = [], b""
    for start in range(0, len(tokens) - block_tokens + 1, block_tokens):
        parent = chained_block_key(parent, tokens[start:start + block_tokens])
        keys.append(parent)
    return keys
