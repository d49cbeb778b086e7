// Precompiled prelude of the domain libraries (cmake/Prelude.cmake): only
// third-party headers, none of kvtier's own, and nothing whose meaning
// depends on a macro a consumer defines. No gRPC here.
#ifndef KVTIER_CMAKE_PRELUDE_DOMAIN_PRELUDE_H_
#define KVTIER_CMAKE_PRELUDE_DOMAIN_PRELUDE_H_

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

#endif  // KVTIER_CMAKE_PRELUDE_DOMAIN_PRELUDE_H_
