"""Stand-in of vllm/distributed/kv_transfer/kv_connector/v1/metrics.py for
kvtier's tests: KVConnectorStats, a serialisable dataclass over a dict that
subclasses aggregate (worker results merged), reduce (to numbers for
logging), reset and test for emptiness. No vLLM code.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, Union


@dataclass
class KVConnectorStats:
    data: Dict[str, Any] = field(default_factory=dict)

    def reset(self) -> None:
        raise NotImplementedError

    def aggregate(self, other: "KVConnectorStats") -> "KVConnectorStats":
        raise NotImplementedError

    def reduce(self) -> Dict[str, Union[int, float]]:
        raise NotImplementedError

    def is_empty(self) -> bool:
        raise NotImplementedError
