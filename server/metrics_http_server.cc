#include "server/metrics_http_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/status_macros.h"

namespace kvtier {
namespace {

constexpr char kTextFormat[] = "text/plain; version=0.0.4; charset=utf-8";

// A bound, listening, non-blocking socket for `host`:`port`, or the reason
// there is none.
absl::StatusOr<int> ListenOn(const std::string& host, const std::string& port,
                             const std::string& address, bool* ipv6) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  hints.ai_family = host.empty() ? AF_INET : AF_UNSPEC;  // ":port": every IPv4 interface
  addrinfo* found = nullptr;
  if (const int rc =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", address, "': ", gai_strerror(rc)));
  }
  std::string why = "no address";
  int fd = -1;
  for (const addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));  // not SO_REUSEPORT: one owner
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
      continue;
    }
    *ipv6 = a->ai_family == AF_INET6;
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on '", address, "': ", why));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0) return 0;
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

}  // namespace

// libmicrohttpd calls Access once the headers of a request are in (a client
// that never finishes them costs a connection slot until the timeout, and
// nothing else).
class MetricsHttpHandler {
 public:
  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url,
                           const char* method, const char* /*version*/, const char* /*upload_data*/,
                           size_t* upload_data_size, void** request) {
    // The first call has the headers, the next ones the body (ignored),
    // the last none left. A scrape is answered on the last (answering
    // before the body is read closes the connection; Prometheus keeps it
    // for its next scrape), anything else at once.
    static int headers_seen;
    const auto* server = static_cast<const MetricsHttpServer*>(cls);
    MetricsHttpServer::Reply reply = server->Answer(url, method, /*render=*/false);
    if (reply.status == MHD_HTTP_OK) {
      if (*request == nullptr) {
        *request = &headers_seen;
        return MHD_YES;
      }
      if (*upload_data_size != 0) {
        *upload_data_size = 0;
        return MHD_YES;
      }
      reply = server->Answer(url, method, /*render=*/true);
    }
    MHD_Response* response = MHD_create_response_from_buffer(
        reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
    if (response == nullptr) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type.c_str());
    if (reply.status == MHD_HTTP_METHOD_NOT_ALLOWED) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    }
    const MHD_Result queued = MHD_queue_response(connection, reply.status, response);
    MHD_destroy_response(response);
    return queued;
  }
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(
    const MetricsHttpServerOptions& options, Render render) {
  const std::string& address = options.address;
  const size_t colon = address.rfind(':');
  uint32_t port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", address, "' is not host:port"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  bool ipv6 = false;
  ASSIGN_OR_RETURN(int fd, ListenOn(host, address.substr(colon + 1), address, &ipv6));
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer(
      std::move(render), absl::StrCat(address.substr(0, colon), ":", BoundPort(fd))));
  const unsigned int timeout_s = static_cast<unsigned int>(
      std::max<int64_t>(1, absl::ToInt64Seconds(options.connection_timeout)));
  server->daemon_ = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | (ipv6 ? MHD_USE_IPv6 : 0), /*port=*/0,
      /*apc=*/nullptr, /*apc_cls=*/nullptr, &MetricsHttpHandler::Access, server.get(),
      MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT, timeout_s,
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned int>(options.max_connections),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, static_cast<size_t>(options.connection_memory_bytes),
      MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", address, "': the HTTP server did not start"));
  }
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // closes the listening socket too
}

MetricsHttpServer::Reply MetricsHttpServer::Answer(const std::string& url,
                                                   const std::string& method, bool render) const {
  if (url != "/metrics") return Reply{404, "text/plain; charset=utf-8", "not found\n"};
  if (method != "GET" && method != "HEAD") {
    return Reply{405, "text/plain; charset=utf-8", "method not allowed\n"};
  }
  try {
    return Reply{200, kTextFormat,
                 render ? render_() : std::string()};  // libmicrohttpd sends no body to HEAD
  } catch (const std::exception& e) {
    return Reply{500, "text/plain; charset=utf-8",
                 absl::StrCat("metrics failed: ", e.what(), "\n")};
  }
}

}  // namespace kvtier
