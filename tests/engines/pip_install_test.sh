#!/usr/bin/env bash
# `pip install client/python` from the source tree, offline (Debian's
# python3-pip, -setuptools, -wheel; no build isolation, no dependencies
# fetched), into a scratch target; then the installed packages import:
# kvtier with its generated stubs, kvtier.engines, and kvtier.vllm and
# kvtier.sglang over the engines' stand-ins (tests/engines/standins).
# Usage: pip_install_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
target=$(mktemp -d)
copy=$(mktemp -d)
trap 'rm -rf "$target" "$copy"' EXIT
# Built from a copy, so the source tree gets no build/ or egg-info.
tar -C "$src/client/python" --exclude=build --exclude='*.egg-info' --exclude=v1 -cf - . |
  tar -C "$copy" -xf -
KVTIER_PROTO_DIR="$src/proto" /usr/bin/python3 -m pip install --quiet --no-build-isolation \
  --no-deps --no-index --target "$target" "$copy" 2>&1 |
  grep -v "Running pip as the 'root' user" || true
for m in kvtier kvtier.v1.kvcache_pb2 kvtier.engines.kv_layout kvtier.vllm kvtier.sglang; do
  [[ -e "$target/${m//.//}.py" || -e "$target/${m//.//}/__init__.py" ]] ||
    { echo "pip install did not install $m" >&2; exit 1; }
done
cd "$target"  # import the installed copy, not the source tree
PYTHONPATH="$target:$src/tests/engines/standins" /usr/bin/python3 -c '
import kvtier, kvtier.engines.kv_layout, kvtier.vllm, kvtier.sglang
from kvtier.v1 import kvcache_pb2
assert kvtier.__file__.startswith("'"$target"'"), kvtier.__file__
assert kvtier.vllm.KvtierConnectorV1.__module__ == "kvtier.vllm.connector"
print("installed:", kvtier.__file__)
'
