// Conversions between kvtier.v1 protobuf messages and domain types, and the
// one place where absl::Status becomes grpc::Status. Every parse error is
// INVALID_ARGUMENT and names the offending field.
//
// Thread-safety: pure functions.
#ifndef KVTIER_SERVER_PROTO_CONVERT_H_
#define KVTIER_SERVER_PROTO_CONVERT_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "base/grpc_status.h"
#include "google/protobuf/repeated_field.h"
#include "kvtier/v1/kvcache.pb.h"
#include "kvtier/v1/types.pb.h"
#include "storage/block_key.h"
#include "storage/eviction/eviction_policy.h"
#include "storage/namespace_spec.h"

namespace kvtier {

absl::StatusOr<NamespaceSpec> NamespaceSpecFromProto(const v1::OpenNamespaceRequest& request);
void LayoutToProto(const KvLayout& layout, v1::NamespaceLayout* out);
// A hybrid namespace's groups into its layout's `groups`.
void GroupsToProto(absl::Span<const LayerGroup> groups, v1::NamespaceLayout* out);

absl::StatusOr<NamespaceId> NamespaceIdFromProto(absl::string_view hex);

// The call's deadline; InfiniteFuture when the caller set none.
absl::Time CallDeadline(const grpc::ServerContextBase& context);

// Each entry must be a valid key; "keys[3]: block key is 40 bytes ...".
absl::StatusOr<std::vector<BlockKey>> KeysFromProto(
    const google::protobuf::RepeatedPtrField<std::string>& keys);
// The (namespace_id, keys) pair that Lookup, Get and Delete share.
struct NamespaceKeys {
  NamespaceId ns;
  std::vector<BlockKey> keys;
};
// INVALID_ARGUMENT for more than `max_keys` keys, before any is parsed: a
// request the cache would refuse for its count does no work first (a
// cluster tier's Fill from a peer, parsing a million keys).
absl::Status CheckKeyCount(size_t keys, size_t max_keys);
// A request's namespace and keys; more than `max_keys` are refused first.
absl::StatusOr<NamespaceKeys> NamespaceKeysFromProto(
    const std::string& namespace_id, const google::protobuf::RepeatedPtrField<std::string>& keys,
    size_t max_keys = std::numeric_limits<size_t>::max());
// A Lookup's namespace and keys, from `keys` or from `packed_keys`
// (LookupRequest's comment says which requests are refused). Packed keys
// beyond `max_keys` are refused before any is parsed (a 16 MiB field of
// 1-byte keys would otherwise be 16 M BlockKeys).
absl::StatusOr<NamespaceKeys> LookupKeysFromProto(const v1::LookupRequest& request,
                                                  size_t max_keys);
// How many keys a Lookup asks for, read as LookupKeysFromProto would (a
// packed length that is not a whole number of keys counts the whole ones).
size_t LookupKeyCount(const v1::LookupRequest& request);
// Empty bytes give an empty BlockKey (no parent).
absl::StatusOr<BlockKey> OptionalKeyFromProto(absl::string_view bytes, const char* field);
// A request's optional retention_priority: nullopt when unset;
// INVALID_ARGUMENT above kMaxRetention (100).
absl::StatusOr<std::optional<uint8_t>> RetentionFromProto(bool has, uint32_t value);

}  // namespace kvtier

#endif  // KVTIER_SERVER_PROTO_CONVERT_H_
