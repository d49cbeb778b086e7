"""kvtier: Python client for kvtierd (see docs/api.md).

    from kvtier import Client, NamespaceOptions, KvLayoutSpec, chained_block_keys

    with Client("127.0.0.1:50051") as c:
        ns = c.open_namespace(NamespaceOptions("my-model", KvLayoutSpec(32, 8, 128)))

Needs grpcio, protobuf and xxhash (Debian: python3-grpcio, python3-protobuf,
python3-xxhash). The gRPC stubs (kvtier.v1) are generated, never committed:
by the CMake build into build/python, or by `pip install client/python`
(see client/python/README.md).
"""

from kvtier.chained_hash import chained_block_key, chained_block_keys
from kvtier.client import (BlockRef, Client, Completion, GroupLoad, KvtierError, LookupResult,
                           Namespace, SharedRegion)
from kvtier.namespace_options import KvLayoutSpec, LayerGroupSpec, NamespaceOptions

__all__ = ["BlockRef", "Client", "Completion", "GroupLoad", "KvLayoutSpec", "KvtierError",
           "LayerGroupSpec", "LookupResult", "Namespace", "NamespaceOptions", "SharedRegion",
           "chained_block_key", "chained_block_keys"]
