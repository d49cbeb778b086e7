"""Engine block hashes as kvtier keys.

An engine hashes each full block of a prompt, chaining every hash to the one
before (vLLM: request.block_hashes; extra keys such as LoRA adapters,
multimodal inputs and cache_salt are already in them). A kvtier block may
span `ratio` engine blocks; it is keyed by the hash of its last engine block,
which names the whole prefix up to it, and its parent is the previous kvtier
block's key.
"""

import hashlib
from dataclasses import dataclass
from typing import List, Sequence

MAX_KEY_BYTES = 32  # kvtier keys are 1..32 bytes


def as_key(block_hash: bytes) -> bytes:
    """An engine hash as a kvtier key: itself when it fits, else its
    32-byte BLAKE2b digest (the same hash gives the same key)."""
    if 0 < len(block_hash) <= MAX_KEY_BYTES:
        return bytes(block_hash)
    return hashlib.blake2b(bytes(block_hash), digest_size=MAX_KEY_BYTES).digest()


@dataclass(frozen=True)
class KvtierBlock:
    index: int        # kvtier block j: engine blocks [j * ratio, (j + 1) * ratio)
    key: bytes
    parent: bytes     # b"" for the first block


def kvtier_block_count(num_hashes: int, ratio: int, limit: int) -> int:
    """Whole kvtier blocks among the first `limit` of `num_hashes` hashes."""
    return min(num_hashes, max(0, limit)) // ratio


def kvtier_block_range(block_hashes: Sequence[bytes], ratio: int, begin: int,
                       end: int) -> List[KvtierBlock]:
    """Kvtier blocks [begin, end) (all whole): only their hashes are read."""
    out: List[KvtierBlock] = []
    parent = as_key(block_hashes[begin * ratio - 1]) if begin > 0 else b""
    for j in range(begin, end):
        key = as_key(block_hashes[(j + 1) * ratio - 1])
        out.append(KvtierBlock(j, key, parent))
        parent = key
    return out


def kvtier_blocks(block_hashes: Sequence[bytes], ratio: int, limit: int) -> List[KvtierBlock]:
    """The whole kvtier blocks among the first `limit` engine block hashes."""
    if ratio < 1:
        raise ValueError("ratio must be >= 1")
    return kvtier_block_range(block_hashes, ratio, 0,
                              kvtier_block_count(len(block_hashes), ratio, limit))
