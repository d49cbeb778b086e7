// Precompiled prelude of every GoogleTest binary (cmake/Prelude.cmake):
// GoogleTest, gRPC and the stubs, the standard library and abseil. No
// spdlog: not every test links it.
#ifndef KVTIER_CMAKE_PRELUDE_TEST_PRELUDE_H_
#define KVTIER_CMAKE_PRELUDE_TEST_PRELUDE_H_

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
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

#endif  // KVTIER_CMAKE_PRELUDE_TEST_PRELUDE_H_
