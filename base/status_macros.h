// Status propagation, in the spirit of abseil's internal RETURN_IF_ERROR and
// ASSIGN_OR_RETURN:
//
//   RETURN_IF_ERROR(file.Sync());                  // returns the error, if any
//   ASSIGN_OR_RETURN(Slot slot, store.Allocate()); // declares slot, or returns
//   ASSIGN_OR_RETURN(auto reader, Reader::Create(path));
//
// Both work in any function returning absl::Status or absl::StatusOr<T>. The
// expression is evaluated once; its status is returned unchanged (no
// annotation), so callers see exactly the error the callee made.
#ifndef KVTIER_BASE_STATUS_MACROS_H_
#define KVTIER_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#if defined(RETURN_IF_ERROR) || defined(ASSIGN_OR_RETURN)
#error "RETURN_IF_ERROR or ASSIGN_OR_RETURN is already defined by another header"
#endif

#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::absl::Status kvtier_status_macro_status_ = (expr); \
    if (!kvtier_status_macro_status_.ok()) {             \
      return kvtier_status_macro_status_;                \
    }                                                    \
  } while (false)

#define KVTIER_STATUS_MACRO_CONCAT_INNER(a, b) a##b
#define KVTIER_STATUS_MACRO_CONCAT(a, b) KVTIER_STATUS_MACRO_CONCAT_INNER(a, b)

#define ASSIGN_OR_RETURN(lhs, rexpr) \
  KVTIER_ASSIGN_OR_RETURN_IMPL(KVTIER_STATUS_MACRO_CONCAT(kvtier_statusor_, __LINE__), lhs, rexpr)

#define KVTIER_ASSIGN_OR_RETURN_IMPL(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // KVTIER_BASE_STATUS_MACROS_H_
