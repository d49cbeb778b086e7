"""NamespaceOptions and KvLayoutSpec: what Client.open_namespace sends, as
dataclasses mirroring the C++ client's kvtier::client::NamespaceOptions and
KvLayoutSpec (include/kvtier/client.h; NamespaceLayout in
proto/kvtier/v1/types.proto).
"""

from dataclasses import dataclass, field
from typing import List


@dataclass
class LayerGroupSpec:
    """A layer group of a hybrid model (LayerGroup in types.proto).

    kind: "full_attention", "sliding_window" (window_tokens > 0) or
    "recurrent" (state_bytes of one snapshot on this rank, and
    checkpoint_tokens, a multiple of tokens_per_block).
    """
    kind: str = "full_attention"
    layers: List[int] = field(default_factory=list)
    window_tokens: int = 0
    state_bytes: int = 0
    checkpoint_tokens: int = 0


@dataclass
class KvLayoutSpec:
    """One rank's KV layout."""
    num_layers: int = 0
    num_kv_heads: int = 0
    head_dim: int = 0
    dtype: str = "bf16"  # bf16, fp16, fp32, fp8_e4m3, fp8_e5m2
    tokens_per_block: int = 16
    tp_rank: int = 0
    tp_size: int = 1
    # Hybrid models: the layer groups (empty: every layer full attention).
    groups: List[LayerGroupSpec] = field(default_factory=list)
    # MLA: one latent vector (head_dim elements) per token and layer, no V;
    # num_kv_heads 1. The same on every TP rank: store it as rank 0 of 1.
    latent: bool = False


@dataclass
class NamespaceOptions:
    """A namespace: the model, its layout, and how blocks are stored.

    encoding "" stores blocks as given; "fp8" stores them as fp8 e4m3 with
    scales (lossy; part of the namespace's identity), with engine_layout
    saying how a block's bytes are ordered ("vllm-nhd" by default) and
    k_group_tokens the K scale group (0: the default).
    """
    model_id: str = ""
    layout: KvLayoutSpec = field(default_factory=KvLayoutSpec)
    salt: bytes = b""
    cost_model: str = ""  # catalog name for plans, e.g. "llama-3.1-8b"
    model_config_json: str = ""  # or the model's config.json
    encoding: str = ""
    engine_layout: str = ""
    k_group_tokens: int = 0
