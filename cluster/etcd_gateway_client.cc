#include "cluster/etcd_gateway_client.h"

#include <curl/curl.h>

#include <cmath>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

using Json = nlohmann::json;

size_t AppendBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

Json ParseJson(absl::string_view text) {
  return Json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
}

// etcd's errors carry their gRPC code; absl's codes are numbered alike.
absl::Status EtcdError(const Json& error, long http_status) {
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  std::string message = absl::StrCat("HTTP ", http_status);
  if (error.is_object()) {
    // Unary errors carry "code"; a stream's (keepalive) "grpc_code".
    for (const char* field : {"code", "grpc_code"}) {
      if (auto it = error.find(field); it != error.end() && it->is_number_integer()) {
        code = it->get<int>();
      }
    }
    if (auto it = error.find("message"); it != error.end() && it->is_string()) {
      message = it->get<std::string>();
    } else if (auto e = error.find("error"); e != error.end() && e->is_string()) {
      message = e->get<std::string>();
    }
  }
  if (code <= 0 || code > 16) code = static_cast<int>(absl::StatusCode::kUnknown);
  return absl::Status(static_cast<absl::StatusCode>(code), absl::StrCat("etcd: ", message));
}

absl::StatusOr<int64_t> Int64Field(const Json& j, const char* name) {
  const auto it = j.find(name);
  if (it == j.end()) return absl::NotFoundError(absl::StrCat("etcd answer has no ", name));
  int64_t v = 0;
  if (it->is_string() && absl::SimpleAtoi(it->get<std::string>(), &v)) return v;
  if (it->is_number_integer()) return it->get<int64_t>();
  return absl::InternalError(absl::StrCat("etcd answer's ", name, " is not an integer"));
}

std::string B64(absl::string_view s) { return absl::Base64Escape(s); }

// The first key after every key that starts with `prefix` (etcd's
// range_end for a prefix read); "\0" (all keys) when none exists.
std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdGatewayClient>> EtcdGatewayClient::Create(
    EtcdGatewayOptions options) {
  if (options.endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints");
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd: timeout must be positive");
  }
  std::vector<std::string> urls;
  for (std::string endpoint : options.endpoints) {
    if (endpoint.empty()) return absl::InvalidArgumentError("etcd: empty endpoint");
    if (absl::StrContains(endpoint, "://")) {
      if (!absl::StartsWith(endpoint, "http://")) {
        return absl::InvalidArgumentError(
            absl::StrCat("etcd endpoint '", endpoint,
                         "': only http:// is supported (run etcd's client URL on a "
                         "trusted network or loopback)"));
      }
    } else {
      endpoint = absl::StrCat("http://", endpoint);
    }
    while (absl::EndsWith(endpoint, "/")) endpoint.pop_back();
    urls.push_back(std::move(endpoint));
  }
  static std::once_flag curl_init;  // libcurl's one-time, not-thread-safe setup
  std::call_once(curl_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("etcd: curl_easy_init failed");
  return std::unique_ptr<EtcdGatewayClient>(
      new EtcdGatewayClient(std::move(urls), options.timeout, curl));
}

EtcdGatewayClient::EtcdGatewayClient(std::vector<std::string> base_urls, absl::Duration timeout,
                                     void* curl)
    : base_urls_(std::move(base_urls)), timeout_(timeout), curl_(curl) {}

EtcdGatewayClient::~EtcdGatewayClient() {
  MutexLock lock(&mu_);
  curl_easy_cleanup(static_cast<CURL*>(curl_));
}

absl::StatusOr<std::string> EtcdGatewayClient::Call(absl::string_view path,
                                                    const std::string& body) {
  MutexLock lock(&mu_);
  CURL* curl = static_cast<CURL*>(curl_);
  std::string last_error;
  const long timeout_ms =
      static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout_)));
  for (size_t attempt = 0; attempt < base_urls_.size(); ++attempt) {
    const size_t i = (next_ + attempt) % base_urls_.size();
    const std::string url = absl::StrCat(base_urls_[i], path);
    std::string answer;
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    curl_easy_reset(curl);
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in a threaded daemon
    curl_easy_setopt(curl, CURLOPT_PROXY, "");     // never through an environment proxy
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, &AppendBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
    const CURLcode rc = curl_easy_perform(curl);
    curl_slist_free_all(headers);
    if (rc != CURLE_OK) {
      last_error = absl::StrCat(base_urls_[i], ": ", curl_easy_strerror(rc));
      continue;  // this endpoint is down; try the next
    }
    long http_status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
    if (http_status == 200) {
      // A stream's error comes with HTTP 200 as {"error": {...}}; an
      // endpoint that cannot serve (no leader, partitioned) gives way to
      // the next.
      const Json j = ParseJson(answer);
      if (auto e = j.is_object() ? j.find("error") : j.end(); e != j.end() && e->is_object()) {
        const absl::Status status = EtcdError(*e, 200);
        if (status.code() == absl::StatusCode::kUnavailable) {
          last_error = absl::StrCat(base_urls_[i], ": ", status.message());
          continue;
        }
      }
      next_ = i;
      return answer;
    }
    next_ = i;
    if (http_status >= 500 && http_status != 503) {
      // The gateway answered but its server side failed: etcd's error.
      return EtcdError(ParseJson(answer), http_status);
    }
    if (http_status == 503) {  // no leader: another endpoint may do better
      last_error = absl::StrCat(base_urls_[i], ": ", EtcdError(ParseJson(answer), 503).message());
      continue;
    }
    return EtcdError(ParseJson(answer), http_status);
  }
  return absl::UnavailableError(absl::StrCat("etcd unreachable (", last_error, ")"));
}

absl::StatusOr<int64_t> EtcdGatewayClient::GrantLease(absl::Duration ttl) {
  const int64_t seconds =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(absl::ToDoubleSeconds(ttl))));
  ASSIGN_OR_RETURN(const std::string answer,
                   Call("/v3/lease/grant", Json{{"TTL", std::to_string(seconds)}}.dump()));
  const Json j = ParseJson(answer);
  if (!j.is_object()) return absl::InternalError("etcd: lease grant answer is not JSON");
  if (j.contains("error")) return EtcdError(j, 200);
  return Int64Field(j, "ID");
}

absl::Status EtcdGatewayClient::KeepAlive(int64_t lease) {
  // A stream in gRPC; the gateway answers one {"result": ...} per request.
  ASSIGN_OR_RETURN(const std::string answer,
                   Call("/v3/lease/keepalive", Json{{"ID", std::to_string(lease)}}.dump()));
  const Json j = ParseJson(answer);
  if (!j.is_object()) return absl::InternalError("etcd: keepalive answer is not JSON");
  if (auto e = j.find("error"); e != j.end()) return EtcdError(*e, 200);
  const auto result = j.find("result");
  if (result == j.end() || !result->is_object()) {
    return absl::InternalError("etcd: keepalive answer has no result");
  }
  const absl::StatusOr<int64_t> ttl = Int64Field(*result, "TTL");
  if (!ttl.ok() || *ttl <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd: lease ", lease, " has expired"));
  }
  return absl::OkStatus();
}

absl::Status EtcdGatewayClient::RevokeLease(int64_t lease) {
  const absl::StatusOr<std::string> answer =
      Call("/v3/lease/revoke", Json{{"ID", std::to_string(lease)}}.dump());
  if (answer.status().code() == absl::StatusCode::kNotFound) return absl::OkStatus();
  return answer.status();
}

absl::Status EtcdGatewayClient::Put(absl::string_view key, absl::string_view value, int64_t lease) {
  Json body = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  return Call("/v3/kv/put", body.dump()).status();
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdGatewayClient::GetPrefix(absl::string_view prefix) {
  ASSIGN_OR_RETURN(const std::string answer,
                   Call("/v3/kv/range",
                        Json{{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}}.dump()));
  const Json j = ParseJson(answer);
  if (!j.is_object()) return absl::InternalError("etcd: range answer is not JSON");
  std::vector<EtcdKeyValue> out;
  const auto kvs = j.find("kvs");
  if (kvs == j.end()) return out;  // no keys: etcd leaves the field out
  if (!kvs->is_array()) return absl::InternalError("etcd: range answer's kvs is not a list");
  for (const Json& kv : *kvs) {
    EtcdKeyValue entry;
    const auto key = kv.find("key");
    if (key == kv.end() || !key->is_string() ||
        !absl::Base64Unescape(key->get<std::string>(), &entry.key)) {
      return absl::InternalError("etcd: range answer has a key that is not base64");
    }
    if (const auto value = kv.find("value"); value != kv.end()) {  // absent when empty
      if (!value->is_string() || !absl::Base64Unescape(value->get<std::string>(), &entry.value)) {
        return absl::InternalError("etcd: range answer has a value that is not base64");
      }
    }
    if (kv.contains("lease")) {
      ASSIGN_OR_RETURN(entry.lease, Int64Field(kv, "lease"));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace kvtier
