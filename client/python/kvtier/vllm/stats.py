"""KvtierConnectorStats: the worker's transfer counts for vLLM's connector
metrics (KVConnectorStats): blocks loaded and saved, failures, saves dropped
after a failed load, daemon errors. Counts add up across workers and steps.
"""

from dataclasses import dataclass
from typing import Dict, Union

from vllm.distributed.kv_transfer.kv_connector.v1.metrics import KVConnectorStats


@dataclass
class KvtierConnectorStats(KVConnectorStats):
    def reset(self) -> None:
        self.data = {}

    def aggregate(self, other: KVConnectorStats) -> "KvtierConnectorStats":
        for k, v in (other.data or {}).items():
            self.data[k] = self.data.get(k, 0) + v
        return self

    def reduce(self) -> Dict[str, Union[int, float]]:
        return dict(self.data)

    def is_empty(self) -> bool:
        return not any(self.data.values())
