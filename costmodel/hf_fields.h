// Internal to the Hugging Face config.json reader (hf_config.cc and
// hf_hybrid_layers.cc): typed access to one config object whose errors name
// the field. Not part of the costmodel API.
//
// Thread-safety: Fields only reads the JSON object it wraps.
#ifndef KVTIER_COSTMODEL_HF_FIELDS_H_
#define KVTIER_COSTMODEL_HF_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace kvtier::costmodel::hf_internal {

using nlohmann::json;

// Typed access to one config object; errors name the field.
class Fields {
 public:
  explicit Fields(const json& obj) : obj_(obj) {}

  const json& object() const { return obj_; }

  bool Has(const char* key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }

  absl::StatusOr<std::optional<uint32_t>> Uint(const char* key) const {
    if (!Has(key)) return std::optional<uint32_t>();
    const json& v = obj_.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > UINT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config.json: field '", key, "' must be a non-negative integer, got ", v.dump()));
    }
    return std::optional<uint32_t>(v.get<uint32_t>());
  }

  // The first of several alias keys that is present.
  absl::StatusOr<std::optional<uint32_t>> UintAny(std::initializer_list<const char*> keys) const {
    for (const char* k : keys) {
      if (Has(k)) return Uint(k);
    }
    return std::optional<uint32_t>();
  }

  absl::StatusOr<uint32_t> RequiredUint(const char* key) const {
    ASSIGN_OR_RETURN(std::optional<uint32_t> v, Uint(key));
    if (!v.has_value()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: missing required field '", key, "'"));
    }
    return *v;
  }

  // A required integer that must also be > 0.
  absl::StatusOr<uint32_t> RequiredPositive(const char* key) const {
    ASSIGN_OR_RETURN(uint32_t v, RequiredUint(key));
    if (v == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: field '", key, "' must be > 0, got 0"));
    }
    return v;
  }

  // Any JSON number (Mamba2Config's `expand` may be 1.5).
  absl::StatusOr<std::optional<double>> Number(const char* key) const {
    if (!Has(key)) return std::optional<double>();
    const json& v = obj_.at(key);
    if (!v.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: field '", key, "' must be a number, got ", v.dump()));
    }
    return std::optional<double>(v.get<double>());
  }

  absl::StatusOr<std::optional<bool>> Bool(const char* key) const {
    if (!Has(key)) return std::optional<bool>();
    const json& v = obj_.at(key);
    if (!v.is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: field '", key, "' must be true or false, got ", v.dump()));
    }
    return std::optional<bool>(v.get<bool>());
  }

  absl::StatusOr<std::optional<std::string>> String(const char* key) const {
    if (!Has(key)) return std::optional<std::string>();
    const json& v = obj_.at(key);
    if (!v.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config.json: field '", key, "' must be a string, got ", v.dump()));
    }
    return std::optional<std::string>(v.get<std::string>());
  }

  absl::StatusOr<std::optional<std::vector<std::string>>> StringList(const char* key) const {
    if (!Has(key)) return std::optional<std::vector<std::string>>();
    const json& v = obj_.at(key);
    std::vector<std::string> out;
    if (v.is_array()) {
      for (const json& e : v) {
        if (!e.is_string()) break;
        out.push_back(e.get<std::string>());
      }
      if (out.size() == v.size()) return std::optional<std::vector<std::string>>(out);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: field '", key, "' must be a list of strings, got ", v.dump().substr(0, 80)));
  }

 private:
  const json& obj_;
};

// Bytes per weight of a torch_dtype / dtype value; 2 (bfloat16) if absent.
inline absl::StatusOr<double> DtypeBytes(const std::optional<std::string>& dtype) {
  if (!dtype.has_value()) return 2.0;
  static const std::map<std::string, double> kBytes = {
      {"bfloat16", 2}, {"float16", 2},       {"half", 2},       {"float32", 4},
      {"float", 4},    {"float8_e4m3fn", 1}, {"float8_e5m2", 1}};
  auto it = kBytes.find(*dtype);
  if (it == kBytes.end()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: torch_dtype/dtype '", *dtype,
                                                   "' is not one of bfloat16, float16, float32, "
                                                   "float8_e4m3fn, float8_e5m2"));
  }
  return it->second;
}

}  // namespace kvtier::costmodel::hf_internal

#endif  // KVTIER_COSTMODEL_HF_FIELDS_H_
