# Required third-party packages (Debian 12; scripts/install-deps installs them).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(RocksDB CONFIG REQUIRED)
find_package(GTest REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
# The event-driven HTTP server under the Prometheus endpoint (libmicrohttpd-dev).
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)
# The HTTP client under the etcd v3 JSON gateway client (cluster/).
find_package(CURL REQUIRED)
# KV events for routers (events/): ZeroMQ (libzmq3-dev, cppzmq-dev) and
# msgpack (libmsgpack-cxx-dev: header-only, used without Boost, so not
# through its CMake package, which links Boost).
pkg_check_modules(ZMQ REQUIRED IMPORTED_TARGET libzmq)
find_path(ZMQ_CPP_INCLUDE zmq.hpp REQUIRED)
find_path(MSGPACK_CXX_INCLUDE msgpack.hpp REQUIRED)
