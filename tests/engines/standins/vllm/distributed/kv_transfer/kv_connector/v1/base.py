"""Stand-in of vllm/distributed/kv_transfer/kv_connector/v1/base.py, written
for kvtier's tests from the interface facts recorded in
tests/engines/vllm_interface.py (vLLM 003df2961dd8); no vLLM code. Only what a
connector touches: the roles, the metadata base, the base class with its
defaults, SupportsHMA.
"""

import enum
from abc import ABC, abstractmethod
from typing import Any, Optional


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata(ABC):  # noqa: B024 - empty, must serialise
    pass


class KVConnectorBase_V1(ABC):
    def __init__(self, vllm_config: Any, role: KVConnectorRole, kv_cache_config: Any = None):
        if vllm_config.kv_transfer_config is None:
            raise ValueError("kv_transfer_config must be set for a KV connector")
        self._vllm_config = vllm_config
        self._kv_transfer_config = vllm_config.kv_transfer_config
        self._kv_cache_config = kv_cache_config
        self._role = role
        self._connector_metadata: Optional[KVConnectorMetadata] = None

    @property
    def role(self) -> KVConnectorRole:
        return self._role

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: Any) -> bool:
        return False

    # worker side, with defaults
    def bind_connector_metadata(self, connector_metadata: KVConnectorMetadata) -> None:
        self._connector_metadata = connector_metadata

    def clear_connector_metadata(self) -> None:
        self._connector_metadata = None

    def _get_connector_metadata(self) -> KVConnectorMetadata:
        assert self._connector_metadata is not None
        return self._connector_metadata

    def has_connector_metadata(self) -> bool:
        return self._connector_metadata is not None

    def register_kv_caches(self, kv_caches):
        return None

    def get_finished(self, finished_req_ids):
        return None, None

    def get_block_ids_with_load_errors(self):
        return set()

    def shutdown(self):
        return None

    def get_kv_connector_stats(self):
        return None

    # scheduler side, with defaults
    def update_connector_output(self, connector_output):
        return None

    def request_finished(self, request, block_ids):
        return False, None

    # abstract
    @abstractmethod
    def start_load_kv(self, forward_context, **kwargs):
        ...

    @abstractmethod
    def wait_for_layer_load(self, layer_name):
        ...

    @abstractmethod
    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs):
        ...

    @abstractmethod
    def wait_for_save(self):
        ...

    @abstractmethod
    def get_num_new_matched_tokens(self, request, num_computed_tokens):
        ...

    @abstractmethod
    def update_state_after_alloc(self, request, blocks, num_external_tokens):
        ...

    @abstractmethod
    def build_connector_meta(self, scheduler_output):
        ...


class SupportsHMA(ABC):
    @abstractmethod
    def request_finished_all_groups(self, request, block_ids):
        ...


def supports_hma(connector: Any) -> bool:
    cls = connector if isinstance(connector, type) else type(connector)
    return issubclass(cls, SupportsHMA)
