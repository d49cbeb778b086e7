"""SGLang's HiCacheStorage interface as recorded from its source (SGLang
commit 001067fffe33, python/sglang/srt/mem_cache/hicache_storage.py and
storage/backend_factory.py): for each member a backend overrides, its
parameters in order (self omitted). The backend test compares
KvtierHiCacheStorage with this.
"""

ABSTRACT = {
    "get": ["key", "target_location", "target_sizes"],
    "batch_get": ["keys", "target_locations", "target_sizes"],
    "set": ["key", "value", "target_location", "target_sizes"],
    "batch_set": ["keys", "values", "target_locations", "target_sizes"],
    "exists": ["key"],
}

WITH_DEFAULTS = {
    # The dynamic backend factory builds cls(storage_config, kwargs).
    "__init__": ["storage_config", "kwargs"],
    "batch_exists": ["keys", "extra_info"],
    "batch_get_v1": ["keys", "host_indices", "extra_info"],
    "batch_set_v1": ["keys", "host_indices", "extra_info"],
    "register_mem_pool_host": ["mem_pool_host"],
    "clear": [],
    "get_stats": [],
}
