// MetricsHttpServer: the HTTP server under kvtierd's Prometheus endpoint.
// GET (or HEAD) /metrics answers 200 with what `render` returns, in the
// Prometheus text format (text/plain; version=0.0.4); any other path is 404,
// any other method 405.
//
// It is event-driven (libmicrohttpd, one internal thread polling with
// epoll), so a slow or stalled client holds one connection, never the
// thread: a scrape is answered while hundreds of clients dribble their
// headers. Such clients are closed after `connection_timeout` without
// traffic; `max_connections` (each with at most `connection_memory_bytes`
// of buffers) bound what they can hold at once. There is no per-address
// limit: the scraper usually shares its address (loopback) with the
// clients that would exhaust it.
//
// Thread-safety: thread-safe; `render` is called on the server's thread,
// one request at a time.
#ifndef KVTIER_SERVER_METRICS_HTTP_SERVER_H_
#define KVTIER_SERVER_METRICS_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

struct MHD_Daemon;

namespace kvtier {

struct MetricsHttpServerOptions {
  // "host:port": a numeric address or a name ("localhost"), "[v6]:port", or
  // "0.0.0.0:port" for every IPv4 interface. Port 0 picks a free one.
  std::string address;
  absl::Duration connection_timeout = absl::Seconds(5);
  uint32_t max_connections = 4096;
  uint32_t connection_memory_bytes = 16 * 1024;  // a GET /metrics head fits many times
};

class MetricsHttpServer final {
 public:
  using Render = std::function<std::string()>;

  // Listening once it returns. INVALID_ARGUMENT for an address that is not
  // host:port; UNAVAILABLE naming the address and the system's reason when
  // it cannot be bound (in use, no such interface).
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Create(
      const MetricsHttpServerOptions& options, Render render);
  ~MetricsHttpServer();  // stops serving; open connections are closed
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The requested host with the port bound: "127.0.0.1:9400".
  const std::string& address() const { return address_; }

 private:
  friend class MetricsHttpHandler;  // libmicrohttpd's callback, in the .cc
  struct Reply {
    unsigned int status = 200;
    std::string content_type;
    std::string body;
  };

  MetricsHttpServer(Render render, std::string address)
      : render_(std::move(render)), address_(std::move(address)) {}
  // What a request for `url` with `method` is answered; without `render`,
  // an answer of 200 has no body yet.
  Reply Answer(const std::string& url, const std::string& method, bool render) const;

  const Render render_;
  const std::string address_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace kvtier

#endif  // KVTIER_SERVER_METRICS_HTTP_SERVER_H_
