#include "transfer/listen_devices.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvtier {
namespace {

bool SameAddress(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  }
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

bool IsLoopback(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr) >> 24) == 127;
  }
  return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

bool IsWildcard(const sockaddr* a) {
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr == htonl(INADDR_ANY);
  }
  return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr);
}

}  // namespace

absl::StatusOr<std::string> NetDevicesForListen(absl::string_view listen) {
  if (absl::StartsWith(listen, "unix:") || absl::StartsWith(listen, "unix-abstract:")) {
    listen = "127.0.0.1:0";  // only local callers reach a Unix socket
  }
  absl::string_view host = listen;
  if (absl::StartsWith(listen, "dns:")) host.remove_prefix(4);
  if (absl::StartsWith(listen, "ipv4:") || absl::StartsWith(listen, "ipv6:")) host.remove_prefix(5);
  if (!host.empty() && host.front() == '[') {
    const size_t close = host.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("listen address '", listen, "' lacks a ']'"));
    }
    host = host.substr(1, close - 1);
  } else {
    const size_t colon = host.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("listen address '", listen, "' is not host:port"));
    }
    host = host.substr(0, colon);
  }
  if (host.empty() || host == "*") return std::string("all");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  const std::string host_text(host);
  if (int rc = getaddrinfo(host_text.c_str(), nullptr, &hints, &resolved); rc != 0) {
    return absl::NotFoundError(
        absl::StrCat("cannot resolve the listen host '", host_text, "': ", gai_strerror(rc)));
  }
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) {
    freeaddrinfo(resolved);
    return absl::NotFoundError("cannot list this machine's network interfaces (getifaddrs)");
  }
  std::set<std::string> devices;
  bool wildcard = false;
  for (const addrinfo* r = resolved; r != nullptr; r = r->ai_next) {
    if (IsWildcard(r->ai_addr)) wildcard = true;
    for (const ifaddrs* i = interfaces; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr ||
          (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
        continue;
      }
      const bool loopback_iface = (i->ifa_flags & IFF_LOOPBACK) != 0;
      if (SameAddress(i->ifa_addr, r->ai_addr) || (loopback_iface && IsLoopback(r->ai_addr))) {
        devices.emplace(i->ifa_name);
      }
    }
  }
  freeifaddrs(interfaces);
  freeaddrinfo(resolved);
  if (wildcard) return std::string("all");
  if (devices.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no network interface of this machine owns the listen host '", host_text, "'"));
  }
  return absl::StrJoin(devices, ",");
}

}  // namespace kvtier
