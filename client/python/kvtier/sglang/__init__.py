"""kvtier for SGLang: KvtierHiCacheStorage, a HiCache storage backend.

    python -m sglang.launch_server --model-path MODEL --enable-hierarchical-cache \\
        --hicache-storage-backend dynamic --hicache-storage-backend-extra-config \\
        '{"backend_name": "kvtier", "module_path": "kvtier.sglang",
          "class_name": "KvtierHiCacheStorage", "interface_v1": 1,
          "kvtier_address": "unix:/run/kvtier.sock"}'

Importing this module imports SGLang's hicache_storage (and nothing of
CUDA); `import kvtier` does not. See docs/engines.md.
"""

from kvtier.sglang.backend import KvtierHiCacheStorage

__all__ = ["KvtierHiCacheStorage"]
