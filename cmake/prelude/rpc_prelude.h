// Precompiled prelude of the gRPC-facing libraries (cmake/Prelude.cmake):
// gRPC, kvtier's generated stubs, the standard library and abseil. No
// spdlog: the C++ client library does not link it.
#ifndef KVTIER_CMAKE_PRELUDE_RPC_PRELUDE_H_
#define KVTIER_CMAKE_PRELUDE_RPC_PRELUDE_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "kvtier/v1/peer.grpc.pb.h"

#endif  // KVTIER_CMAKE_PRELUDE_RPC_PRELUDE_H_
