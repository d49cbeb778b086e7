"""kvtier for vLLM: KvtierConnectorV1, a KV connector vLLM loads by module path.

    vllm serve MODEL --kv-transfer-config '{"kv_connector": "KvtierConnectorV1",
        "kv_connector_module_path": "kvtier.vllm", "kv_role": "kv_both",
        "kv_connector_extra_config": {"kvtier_address": "unix:/run/kvtier.sock"}}'

Importing this module imports vLLM (and nothing of CUDA); `import kvtier`
does not. See docs/engines.md.
"""

from kvtier.vllm.connector import KvtierConnectorMetadata, KvtierConnectorV1

__all__ = ["KvtierConnectorMetadata", "KvtierConnectorV1"]
