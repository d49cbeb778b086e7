// Precompiled prelude of the command-line programs and the planner
// (cmake/Prelude.cmake): gRPC and the stubs, CLI11, nlohmann/json. No
// spdlog: the planner does not link it.
#ifndef KVTIER_CMAKE_PRELUDE_CLI_PRELUDE_H_
#define KVTIER_CMAKE_PRELUDE_CLI_PRELUDE_H_

#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "kvtier/v1/peer.grpc.pb.h"

#endif  // KVTIER_CMAKE_PRELUDE_CLI_PRELUDE_H_
