#include "cluster/member_record.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

using Json = nlohmann::json;

bool NodeIdChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == ':' || c == '-' || c == '[' || c == ']';
}

absl::StatusOr<std::string> StringField(const Json& j, const char* name, bool required) {
  const auto it = j.find(name);
  if (it == j.end()) {
    if (required) return absl::InvalidArgumentError(absl::StrCat("member record: no ", name));
    return std::string();
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("member record: ", name, " is not a string"));
  }
  std::string value = it->get<std::string>();
  if (required && value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("member record: empty ", name));
  }
  return value;
}

absl::StatusOr<uint64_t> CountField(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return 0;
  if (!it->is_number_unsigned()) {
    return absl::InvalidArgumentError(
        absl::StrCat("member record: ", name, " is not a non-negative integer"));
  }
  return it->get<uint64_t>();
}

}  // namespace

absl::Status ValidateNodeId(absl::string_view id) {
  if (id.empty() || id.size() > 128) {
    return absl::InvalidArgumentError(
        absl::StrCat("node id must be 1-128 characters, got ", id.size()));
  }
  for (char c : id) {
    if (!NodeIdChar(c)) {
      return absl::InvalidArgumentError(absl::StrCat("node id '", id, "' has '", std::string(1, c),
                                                     "'; allowed: letters, digits, . _ : - [ ]"));
    }
  }
  return absl::OkStatus();
}

std::string EncodeMemberRecord(const MemberRecord& r) {
  Json j = {{"node_id", r.node_id},
            {"daemon_id", r.daemon_id},
            {"address", r.address},
            {"role", r.role},
            {"version", r.version},
            {"transport", r.transport},
            {"host_capacity_bytes", r.host_capacity_bytes},
            {"host_free_bytes", r.host_free_bytes},
            {"nvme_capacity_bytes", r.nvme_capacity_bytes},
            {"nvme_free_bytes", r.nvme_free_bytes},
            {"started_unix_ms", absl::ToUnixMillis(r.started)}};
  return j.dump();
}

absl::StatusOr<MemberRecord> DecodeMemberRecord(absl::string_view json) {
  Json j = Json::parse(json.begin(), json.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("member record: not a JSON object");
  }
  MemberRecord r;
  ASSIGN_OR_RETURN(r.node_id, StringField(j, "node_id", true));
  RETURN_IF_ERROR(ValidateNodeId(r.node_id));
  ASSIGN_OR_RETURN(r.daemon_id, StringField(j, "daemon_id", true));
  ASSIGN_OR_RETURN(r.address, StringField(j, "address", true));
  ASSIGN_OR_RETURN(r.role, StringField(j, "role", false));
  ASSIGN_OR_RETURN(r.version, StringField(j, "version", false));
  if (const auto it = j.find("transport"); it != j.end()) {
    if (!it->is_boolean()) return absl::InvalidArgumentError("member record: transport not bool");
    r.transport = it->get<bool>();
  }
  ASSIGN_OR_RETURN(r.host_capacity_bytes, CountField(j, "host_capacity_bytes"));
  ASSIGN_OR_RETURN(r.host_free_bytes, CountField(j, "host_free_bytes"));
  ASSIGN_OR_RETURN(r.nvme_capacity_bytes, CountField(j, "nvme_capacity_bytes"));
  ASSIGN_OR_RETURN(r.nvme_free_bytes, CountField(j, "nvme_free_bytes"));
  if (const auto it = j.find("started_unix_ms"); it != j.end()) {
    if (!it->is_number_integer()) {
      return absl::InvalidArgumentError("member record: started_unix_ms not an integer");
    }
    r.started = absl::FromUnixMillis(it->get<int64_t>());
  }
  return r;
}

std::string MembersPrefix(absl::string_view cluster) {
  return absl::StrCat("/kvtier/", cluster, "/members/");
}

std::string MemberKey(absl::string_view cluster, absl::string_view node_id) {
  return absl::StrCat(MembersPrefix(cluster), node_id);
}

}  // namespace kvtier
