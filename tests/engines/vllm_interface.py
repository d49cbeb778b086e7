"""vLLM's KV connector interface as recorded from its source (vLLM commit
003df2961dd8, distributed/kv_transfer/kv_connector/v1/base.py): for each
member a connector overrides, its parameters in order (self omitted). The
interface test compares KvtierConnectorV1 with this; a drift in either is a
failing test.
"""

ABSTRACT = {
    "get_num_new_matched_tokens": ["request", "num_computed_tokens"],
    "update_state_after_alloc": ["request", "blocks", "num_external_tokens"],
    "build_connector_meta": ["scheduler_output"],
    "start_load_kv": ["forward_context", "kwargs"],
    "wait_for_layer_load": ["layer_name"],
    "save_kv_layer": ["layer_name", "kv_layer", "attn_metadata", "kwargs"],
    "wait_for_save": [],
    # SupportsHMA
    "request_finished_all_groups": ["request", "block_ids"],
}

WITH_DEFAULTS = {
    "__init__": ["vllm_config", "role", "kv_cache_config"],
    "register_kv_caches": ["kv_caches"],
    "get_finished": ["finished_req_ids"],
    "get_block_ids_with_load_errors": [],
    "shutdown": [],
    "get_kv_connector_stats": [],
    "build_kv_connector_stats": ["data"],  # a classmethod
    "requires_piecewise_for_cudagraph": ["extra_config"],  # a classmethod
    "update_connector_output": ["connector_output"],
    "request_finished": ["request", "block_ids"],
    "bind_connector_metadata": ["connector_metadata"],
    "clear_connector_metadata": [],
    "handle_preemptions": ["kv_connector_metadata"],
    "set_host_xfer_buffer_ops": ["copy_operation"],
    "register_cross_layers_kv_cache": ["kv_cache", "attn_backend"],
    "on_new_request": ["request"],
    "bind_gpu_block_pool": ["gpu_block_pool"],
    "take_events": [],
    "get_finished_count": [],
    "reset_cache": [],
}

MODULE = "vllm.distributed.kv_transfer.kv_connector.v1.base"
