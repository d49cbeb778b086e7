"""vLLM's KV cache groups as the daemon's layer groups.

One group of full attention (or MLA) is a plain namespace. Several groups
(a hybrid model under vLLM's hybrid allocator: full-attention layers beside
sliding-window ones, as in Gemma 3 or gpt-oss) become `layout.groups`, one
daemon layer group per vLLM group, in vLLM's order. Group 0 must be full
attention: vLLM rolls back failed loads by group 0's blocks, and the daemon
chains a hybrid's keys on its first full-attention group. Every group must
share the attention fields (block size, KV heads, head size, dtype), since
the daemon's layout has one set of them, and kvtier blocks must be vLLM
blocks (kvtier_block_ratio 1).

Layer-wise loads (kvtier_layer_groups N > 1, one full-attention group):
the layers are split into N contiguous daemon layer groups (at most 16) of
the same vLLM blocks, so a load can bring one group of layers after another
while the forward pass runs. The groups are part of the namespace id: such a
namespace is not shared with the whole-block one.

Not yet: recurrent (Mamba) groups, whose state vLLM keeps per request
rather than per block, chunked-local and cross attention, and MLA in a
hybrid model.
"""

import re
from dataclasses import dataclass, field
from typing import Any, Dict, List

from kvtier.engines.kv_layout import LayoutError
from kvtier.namespace_options import LayerGroupSpec


@dataclass
class KvGroups:
    # The daemon's layer groups; empty for one full-attention group.
    layer_groups: List[LayerGroupSpec] = field(default_factory=list)
    # Per vLLM group 1..: 0 for full attention, else its window in blocks.
    windows: List[int] = field(default_factory=list)
    # The model's layers, numbered as layout.groups names them.
    num_layers: int = 0
    # Per daemon group, its layers' names; which vLLM group's block ids it
    # takes (its own, or group 0's for the layer-wise split).
    layer_names: List[List[str]] = field(default_factory=list)
    engine_group: List[int] = field(default_factory=list)

    @property
    def layerwise(self) -> bool:
        """Several daemon groups over vLLM's one group of blocks."""
        return len(self.engine_group) > 1 and max(self.engine_group) == 0


def group_kind(spec: Any) -> str:
    """full_attention, sliding_window, or why the spec is not served."""
    name = type(spec).__name__
    if "Mamba" in name or hasattr(spec, "shapes"):
        return "recurrent (Mamba) layers are not supported yet"
    if name in ("ChunkedLocalAttentionSpec", "CrossAttentionSpec", "EncoderOnlyAttentionSpec") \
            or getattr(spec, "attention_chunk_size", None):
        return f"{name} layers are not supported yet"
    if not hasattr(spec, "num_kv_heads"):
        return f"{name}: only attention layers are supported"
    if name == "SlidingWindowSpec":
        return "sliding_window"
    # A FullAttentionSpec with sliding_window set (vLLM's hybrid allocator
    # off) keeps every block: full attention as far as storage goes.
    return "full_attention"


def _layer_numbers(names: List[str]) -> Dict[str, int]:
    """Each layer's index 0..n-1: by the first number in its name
    (model.layers.12.self_attn.attn) when those are distinct, else in the
    order vLLM lists the groups' layers."""
    found = [re.search(r"\d+", n) for n in names]
    nums = [int(m.group()) if m else None for m in found]
    if None in nums or len(set(nums)) != len(nums):
        return {n: i for i, n in enumerate(names)}
    order = sorted(range(len(names)), key=lambda i: nums[i])
    return {names[i]: rank for rank, i in enumerate(order)}


MAX_LAYER_GROUPS = 16  # the daemon's kMaxLayerGroups


def kv_groups(kv_cache_config: Any, ratio: int, layer_groups: int = 1) -> KvGroups:
    """The layer groups of `kv_cache_config` (split into `layer_groups`
    for layer-wise loads); LayoutError for what is not served."""
    groups = kv_cache_config.kv_cache_groups
    if not groups:
        raise LayoutError("no KV cache groups")
    kinds = [group_kind(g.kv_cache_spec) for g in groups]
    for kind in kinds:
        if kind not in ("full_attention", "sliding_window"):
            raise LayoutError(kind)
    if len(groups) == 1 and kinds[0] != "full_attention":
        raise LayoutError("a model of sliding-window layers alone is not supported "
                          "(the daemon keeps window blocks beside full-attention ones)")
    if layer_groups != 1:
        return _split(groups[0].layer_names, ratio, layer_groups, len(groups))
    if len(groups) == 1:
        return KvGroups(num_layers=len(groups[0].layer_names),
                        layer_names=[list(groups[0].layer_names)], engine_group=[0])
    if kinds[0] != "full_attention":
        raise LayoutError("KV cache group 0 is not full attention (vLLM rolls back failed "
                          "loads by group 0)")
    if ratio != 1:
        raise LayoutError("hybrid models need kvtier_block_ratio 1")
    first = groups[0].kv_cache_spec
    for i, g in enumerate(groups):
        spec = g.kv_cache_spec
        for name in ("block_size", "num_kv_heads", "head_size", "dtype"):
            if getattr(spec, name) != getattr(first, name):
                raise LayoutError(f"KV cache group {i}'s {name} {getattr(spec, name)} differs "
                                  f"from group 0's {getattr(first, name)}")
    names = [n for g in groups for n in g.layer_names]
    if len(set(names)) != len(names):
        raise LayoutError("a layer is in two KV cache groups")
    number = _layer_numbers(names)
    out = KvGroups(num_layers=len(names), layer_names=[list(g.layer_names) for g in groups],
                   engine_group=list(range(len(groups))))
    for g, kind in zip(groups, kinds):
        spec = g.kv_cache_spec
        window = int(spec.sliding_window) if kind == "sliding_window" else 0
        if kind == "sliding_window" and window < 1:
            raise LayoutError(f"a sliding window of {window} tokens")
        out.layer_groups.append(LayerGroupSpec(kind=kind,
                                               layers=sorted(number[n] for n in g.layer_names),
                                               window_tokens=window))
    out.windows = [-(-lg.window_tokens // int(first.block_size)) for lg in out.layer_groups[1:]]
    return out


def _split(names: List[str], ratio: int, n: int, vllm_groups: int) -> KvGroups:
    """One full-attention group's layers as `n` contiguous daemon groups."""
    if vllm_groups != 1:
        raise LayoutError("kvtier_layer_groups with a hybrid model is not supported yet")
    if not 1 <= n <= min(MAX_LAYER_GROUPS, len(names)):
        raise LayoutError(f"kvtier_layer_groups {n} must be 1..{min(MAX_LAYER_GROUPS, len(names))}"
                          f" ({len(names)} layers; the daemon takes {MAX_LAYER_GROUPS} groups)")
    if ratio != 1:
        raise LayoutError("kvtier_layer_groups needs kvtier_block_ratio 1")
    number = _layer_numbers(list(names))
    ordered = sorted(names, key=lambda name: number[name])
    out = KvGroups(num_layers=len(names), engine_group=[0] * n)
    start = 0
    for i in range(n):
        end = start + len(ordered) // n + (1 if i < len(ordered) % n else 0)
        part = ordered[start:end]
        out.layer_names.append(part)
        out.layer_groups.append(LayerGroupSpec(kind="full_attention",
                                               layers=[number[name] for name in part]))
        start = end
    out.windows = [0] * (n - 1)
    return out
