"""Build hook of the kvtier package (metadata is in pyproject.toml).

build_py generates the gRPC stubs, kvtier/v1/{types,kvcache,admin,peer}_pb2*.py,
from the repository's proto/ (or $KVTIER_PROTO_DIR) into the build tree, as
client/python/CMakeLists.txt does for build/python. It uses grpc_tools.protoc
when grpcio-tools is installed, else protoc and grpc_python_plugin from PATH
(or $PROTOC and $GRPC_PYTHON_PLUGIN; Debian: protobuf-compiler-grpc).
"""

import os
import shutil
import subprocess
import sys
from typing import List

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ["types", "kvcache", "admin", "peer"]


def proto_dir() -> str:
    d = os.environ.get("KVTIER_PROTO_DIR", os.path.join(HERE, "..", "..", "proto"))
    if not os.path.isfile(os.path.join(d, "kvtier", "v1", "kvcache.proto")):
        sys.exit(f"kvtier: no kvtier/v1/*.proto under {d}; install from a kvtier source tree "
                 "or set KVTIER_PROTO_DIR")
    return os.path.abspath(d)


def generate_stubs(out: str) -> None:
    src = proto_dir()
    files = [os.path.join(src, "kvtier", "v1", f"{name}.proto") for name in PROTOS]
    args: List[str] = [f"--proto_path={src}", f"--python_out={out}", f"--grpc_python_out={out}"]
    try:
        from grpc_tools import protoc  # grpcio-tools
        if protoc.main(["protoc"] + args + files) != 0:
            sys.exit("kvtier: grpc_tools.protoc failed")
    except ImportError:
        protoc_bin = os.environ.get("PROTOC") or shutil.which("protoc")
        plugin = os.environ.get("GRPC_PYTHON_PLUGIN") or shutil.which("grpc_python_plugin")
        if not protoc_bin or not plugin:
            sys.exit("kvtier: generating the gRPC stubs needs grpcio-tools, or protoc and "
                     "grpc_python_plugin on PATH")
        subprocess.run([protoc_bin, f"--plugin=protoc-gen-grpc_python={plugin}"] + args + files,
                       check=True)
    open(os.path.join(out, "kvtier", "v1", "__init__.py"), "a").close()


class BuildPyWithStubs(build_py):
    """build_py, then the generated kvtier.v1 package beside kvtier."""

    def run(self) -> None:
        super().run()
        os.makedirs(os.path.join(self.build_lib, "kvtier", "v1"), exist_ok=True)
        generate_stubs(self.build_lib)


setup(cmdclass={"build_py": BuildPyWithStubs})
