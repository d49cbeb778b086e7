#include "server/auth.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace kvtier {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kTenant:
      return "tenant";
    case Role::kPeer:
      return "peer";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

std::string Sha256Hex(absl::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), static_cast<size_t>(len)));
}

bool ValidTenantName(absl::string_view tenant) {
  if (tenant.empty() || tenant.size() > 64) return false;
  // Label values of their own in the metrics.
  if (tenant == "none" || tenant == "other" || tenant == "unauthenticated") return false;
  // A tenant names a directory (server.shm_dir/TENANT): no "." or "..".
  if (tenant[0] == '.') return false;
  for (char c : tenant) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return false;
    }
  }
  return true;
}

size_t Authenticator::tenants() const {
  absl::flat_hash_set<std::string> names;
  for (const auto* table : {&by_token_, &by_subject_}) {
    for (const auto& [credential, who] : *table) {
      if (!who.tenant.empty()) names.insert(who.tenant);
    }
  }
  return names.size();
}

std::unique_ptr<Authenticator> Authenticator::Open() {
  return std::unique_ptr<Authenticator>(new Authenticator());
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromYaml(absl::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("identities: ", e.what()));
  }
  if (!root.IsMap() || !root["identities"] || !root["identities"].IsSequence()) {
    return absl::InvalidArgumentError("identities: expected a mapping with a list 'identities'");
  }
  std::unique_ptr<Authenticator> auth(new Authenticator());
  auth->enabled_ = true;
  int index = 0;
  for (const YAML::Node& entry : root["identities"]) {
    const std::string where = absl::StrCat("identities[", index++, "]");
    if (!entry.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a mapping"));
    std::string token_hash, subject;
    Identity id;
    for (const auto& kv : entry) {
      const std::string key = kv.first.as<std::string>();
      if (!kv.second.IsScalar()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": not a scalar"));
      }
      const std::string value = kv.second.Scalar();
      if (key == "name") {
        id.name = value;
      } else if (key == "token") {
        if (value.size() < 16) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".token: shorter than 16 characters"));
        }
        token_hash = Sha256Hex(value);
      } else if (key == "token_sha256") {
        token_hash = absl::AsciiStrToLower(value);
        if (token_hash.size() != 64 ||
            token_hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ".token_sha256: not 64 hex digits"));
        }
      } else if (key == "subject") {
        subject = value;
      } else if (key == "tenant") {
        if (!ValidTenantName(value)) {
          return absl::InvalidArgumentError(absl::StrCat(where, ".tenant: '", value.substr(0, 80),
                                                         "' is not 1..64 of [A-Za-z0-9._-]"));
        }
        id.tenant = value;
      } else if (key == "role") {
        if (value == "tenant") {
          id.role = Role::kTenant;
        } else if (value == "peer") {
          id.role = Role::kPeer;
        } else if (value == "admin") {
          id.role = Role::kAdmin;
        } else {
          return absl::InvalidArgumentError(absl::StrCat(where, ".role: '", value.substr(0, 80),
                                                         "' is not tenant, peer or admin"));
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown key '", key, "'"));
      }
    }
    if (token_hash.empty() == subject.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": needs exactly one of token, token_sha256 or subject"));
    }
    if (id.role == Role::kTenant && id.tenant.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": role tenant needs a tenant"));
    }
    if (id.name.empty()) id.name = subject.empty() ? where : subject;
    auto& map = subject.empty() ? auth->by_token_ : auth->by_subject_;
    const std::string& key = subject.empty() ? token_hash : subject;
    if (!map.emplace(key, id).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " (", id.name, "): its credential is already given to another entry"));
    }
  }
  if (auth->size() == 0) {
    return absl::InvalidArgumentError(
        "identities: the list is empty (no caller could get in; remove "
        "security.identities_file to turn authentication off)");
  }
  return auth;
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::FromFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("identities file '", path, "': ", std::strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("identities file '", path,
                                                      "' can be read by group or others (it holds ",
                                                      "tokens): chmod 600 it"));
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read identities file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = FromYaml(text.str());
  if (!auth.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", auth.status().message()));
  }
  return auth;
}

absl::StatusOr<Identity> Authenticator::Identify(absl::string_view token,
                                                 std::optional<absl::string_view> subject) const {
  if (!enabled_) return Identity{"anonymous", "", Role::kAdmin, /*anonymous=*/true};
  if (!token.empty()) {
    auto it = by_token_.find(Sha256Hex(token));
    if (it == by_token_.end()) return absl::UnauthenticatedError("unknown token");
    return it->second;
  }
  if (subject.has_value()) {
    auto it = by_subject_.find(*subject);
    if (it == by_subject_.end()) {
      return absl::UnauthenticatedError(
          absl::StrCat("client certificate '", subject->substr(0, 80), "' is not an identity"));
    }
    return it->second;
  }
  return absl::UnauthenticatedError(
      "no credentials: send 'authorization: Bearer <token>' or a client certificate");
}

absl::Status Authenticator::Authorize(const Identity& who, Role needed) {
  if (who.role == Role::kAdmin || who.role == needed) {
    if (needed == Role::kTenant && who.tenant.empty() && !who.anonymous) {
      return absl::PermissionDeniedError(
          absl::StrCat("'", who.name, "' has no tenant, so it cannot use the KvCache service"));
    }
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat("'", who.name, "' (role ", RoleName(who.role),
                                                  ") may not call this; it needs role ",
                                                  RoleName(needed)));
}

}  // namespace kvtier
