#include "transfer/ucx/ucx_transport.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

absl::Status FromUcs(ucs_status_t status, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", ucs_status_string(status));
  switch (status) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(message);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(message);
    default:
      // Unreachable or failed peers, cancelled operations, timeouts.
      return absl::UnavailableError(message);
  }
}

// The transports of an endpoint's lanes, from ucp_ep_print_info's report
// (lines like "#   lane[0]:  1:tcp/lo.0 md[1] ..."), e.g. "tcp/lo".
std::string LanesOf(ucp_ep_h ep) {
  char* buffer = nullptr;
  size_t size = 0;
  FILE* stream = open_memstream(&buffer, &size);
  if (stream == nullptr) return "";
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::set<std::string> lanes;
  for (absl::string_view line : absl::StrSplit(absl::string_view(buffer, size), '\n')) {
    const size_t at = line.find("lane[");
    if (at == absl::string_view::npos) continue;
    // The first token after "]:" that has the shape N:tl/dev.
    for (absl::string_view token : absl::StrSplit(line.substr(at), ' ', absl::SkipEmpty())) {
      const size_t colon = token.find(':');
      const size_t slash = token.find('/');
      if (colon == absl::string_view::npos || slash == absl::string_view::npos || slash < colon) {
        continue;
      }
      absl::string_view lane = token.substr(colon + 1);
      if (const size_t dot = lane.rfind('.');
          dot != absl::string_view::npos && dot > lane.find('/')) {
        lane = lane.substr(0, dot);
      }
      lanes.emplace(lane);
      break;
    }
  }
  std::free(buffer);
  return absl::StrJoin(lanes, ",");
}

}  // namespace

struct UcxTransport::Connection {
  explicit Connection(ExposedMemory r) : remote(std::move(r)) {}

  const ExposedMemory remote;
  Mutex mu;
  ucp_ep_h ep ABSL_GUARDED_BY(mu) = nullptr;
  ucp_rkey_h rkey ABSL_GUARDED_BY(mu) = nullptr;
  std::string lanes ABSL_GUARDED_BY(mu);
  bool lanes_settled ABSL_GUARDED_BY(mu) = false;
  // Set by the endpoint's error handler on the progress thread.
  std::atomic<bool> failed{false};
  Mutex error_mu;
  std::string error ABSL_GUARDED_BY(error_mu);

  void Fail(const std::string& why) {
    MutexLock lock(&error_mu);
    if (error.empty()) error = why;
    failed = true;
  }
  std::string Error() {
    MutexLock lock(&error_mu);
    return error;
  }
};

// The completions of one Execute call, shared with the request callbacks.
struct UcxTransport::Batch {
  Mutex mu;
  // Set when the caller gave up waiting: later completions (the cancels of
  // the forced close) keep the DEADLINE_EXCEEDED already recorded.
  bool timed_out ABSL_GUARDED_BY(mu) = false;
  size_t pending ABSL_GUARDED_BY(mu) = 0;
  std::vector<absl::Status> statuses ABSL_GUARDED_BY(mu);
  std::vector<bool> done ABSL_GUARDED_BY(mu);
};

namespace {

struct OpContext {
  std::shared_ptr<void> keep_alive;  // the Batch
  void* batch;
  size_t index;
};

}  // namespace

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(const std::string& net_devices) {
  std::unique_ptr<UcxTransport> t(new UcxTransport());
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return FromUcs(s, "ucp_config_read");
  }
  if (!net_devices.empty()) {
    if (ucs_status_t s = ucp_config_modify(config, "NET_DEVICES", net_devices.c_str());
        s != UCS_OK) {
      ucp_config_release(config);
      return absl::InvalidArgumentError(
          absl::StrCat("UCX refuses net devices '", net_devices, "': ", ucs_status_string(s)));
    }
    t->capabilities_.net_devices = net_devices;
  } else {
    const char* env = std::getenv("UCX_NET_DEVICES");
    t->capabilities_.net_devices = (env != nullptr && *env != '\0') ? env : "all";
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  ucs_status_t s = ucp_init(&params, config, &t->context_);
  ucp_config_release(config);
  if (s != UCS_OK) {
    t->context_ = nullptr;
    return absl::UnavailableError(absl::StrCat("UCX cannot start (ucp_init: ", ucs_status_string(s),
                                               "); check UCX_TLS and the net devices (",
                                               t->capabilities_.net_devices, ")"));
  }
  ucp_context_attr_t cattr{};
  cattr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(t->context_, &cattr) == UCS_OK &&
      (cattr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0) {
    t->capabilities_.device_memory = true;
  } else {
    t->capabilities_.detail =
        "this UCX build has no CUDA memory support; GPU blocks travel "
        "through the host arena";
  }
  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_MULTI;
  if (s = ucp_worker_create(t->context_, &wparams, &t->worker_); s != UCS_OK) {
    t->worker_ = nullptr;
    return FromUcs(s, "ucp_worker_create");
  }
  ucp_worker_attr_t wattr{};
  wattr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
  if (s = ucp_worker_query(t->worker_, &wattr); s != UCS_OK) return FromUcs(s, "ucp_worker_query");
  if (wattr.thread_mode != UCS_THREAD_MODE_MULTI) {
    return absl::UnavailableError("this UCX build has no multi-thread support");
  }
  if (s = ucp_worker_get_efd(t->worker_, &t->event_fd_); s != UCS_OK) {
    return FromUcs(s, "ucp_worker_get_efd");
  }
  t->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (t->epoll_fd_ < 0) return absl::UnavailableError("epoll_create1 failed");
  epoll_event ev{};
  ev.events = EPOLLIN;
  if (epoll_ctl(t->epoll_fd_, EPOLL_CTL_ADD, t->event_fd_, &ev) != 0) {
    return absl::UnavailableError("epoll_ctl on the UCX event descriptor failed");
  }
  ucp_address_t* address = nullptr;
  size_t length = 0;
  if (s = ucp_worker_get_address(t->worker_, &address, &length); s != UCS_OK) {
    return FromUcs(s, "ucp_worker_get_address");
  }
  t->address_.assign(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(t->worker_, address);

  t->capabilities_.name = "ucx";
  t->capabilities_.detects_peer_failure = true;
  const char* tls = std::getenv("UCX_TLS");
  t->capabilities_.transports = (tls != nullptr && *tls != '\0') ? tls : "all";
  t->progress_ = std::thread([p = t.get()] { p->ProgressLoop(); });
  return t;
}

UcxTransport::~UcxTransport() {
  std::vector<std::shared_ptr<Connection>> connections;
  {
    MutexLock lock(&mu_);
    for (auto& [id, conn] : connections_) connections.push_back(conn);
    connections_.clear();
  }
  if (progress_.joinable()) {
    for (auto& conn : connections) Close(conn, "transport shut down");
    Quiesce();
    stop_ = true;
    Wake();
    progress_.join();
  }
  MutexLock lock(&mu_);
  if (context_ != nullptr) {
    if (exposed_ != nullptr) ucp_mem_unmap(context_, exposed_);
    for (ucp_mem_h m : retired_) ucp_mem_unmap(context_, m);
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxTransport::Wake() { ucp_worker_signal(worker_); }

absl::Status UcxTransport::WaitForWireUp(Connection& conn) {
  ucs_status_ptr_t request;
  {
    MutexLock lock(&conn.mu);
    ucp_request_param_t param{};
    request = ucp_ep_flush_nbx(conn.ep, &param);
  }
  if (UCS_PTR_IS_ERR(request)) return FromUcs(UCS_PTR_STATUS(request), "connecting to the peer");
  if (!UCS_PTR_IS_PTR(request)) return absl::OkStatus();
  const ucs_status_t status = AwaitRequest(request, absl::Now() + absl::Seconds(10));
  if (status == UCS_INPROGRESS) {
    ucp_request_cancel(worker_, request);
    AwaitRequest(request, absl::InfiniteFuture());
    ucp_request_free(request);
    return absl::UnavailableError("the peer did not complete the connection within 10 s");
  }
  ucp_request_free(request);
  return FromUcs(status, "connecting to the peer");
}

void UcxTransport::Quiesce() {
  // Endpoints UCX made for peers' connections to us may still have wire-up
  // messages queued; UCX 1.13 asserts (and aborts) if the worker is
  // destroyed with one pending, so let them go out first. A dead peer may
  // never take them: bounded.
  ucp_request_param_t param{};
  ucs_status_ptr_t request = ucp_worker_flush_nbx(worker_, &param);
  if (!UCS_PTR_IS_PTR(request)) return;
  if (AwaitRequest(request, absl::Now() + absl::Milliseconds(500)) == UCS_INPROGRESS) {
    ucp_request_cancel(worker_, request);
  }
  ucp_request_free(request);
}

ucs_status_t UcxTransport::AwaitRequest(void* request, absl::Time deadline) {
  ucs_status_t status;
  while ((status = ucp_request_check_status(request)) == UCS_INPROGRESS && absl::Now() < deadline) {
    // The progress thread completes it; once that thread has stopped (the
    // destructor), progress here.
    if (stop_.load()) ucp_worker_progress(worker_);
    Wake();
    absl::SleepFor(absl::Microseconds(200));
  }
  return status;
}

void UcxTransport::ProgressLoop() {
  while (!stop_.load()) {
    if (ucp_worker_progress(worker_) != 0) continue;
    if (ucp_worker_arm(worker_) == UCS_ERR_BUSY) continue;
    epoll_event ev;
    epoll_wait(epoll_fd_, &ev, 1, 100);
  }
}

absl::StatusOr<ExposedMemory> UcxTransport::Expose(absl::Span<uint8_t> memory) {
  if (memory.empty()) return absl::InvalidArgumentError("cannot expose an empty memory range");
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = memory.data();
  params.length = memory.size();
  ucp_mem_h memh = nullptr;
  if (ucs_status_t s = ucp_mem_map(context_, &params, &memh); s != UCS_OK) {
    return FromUcs(s, "ucp_mem_map");
  }
  void* packed = nullptr;
  size_t packed_size = 0;
  if (ucs_status_t s = ucp_rkey_pack(context_, memh, &packed, &packed_size); s != UCS_OK) {
    ucp_mem_unmap(context_, memh);
    return FromUcs(s, "ucp_rkey_pack");
  }
  ExposedMemory out;
  out.base = reinterpret_cast<uint64_t>(memory.data());
  out.size = memory.size();
  out.remote_key.assign(static_cast<const char*>(packed), packed_size);
  ucp_rkey_buffer_release(packed);
  MutexLock lock(&mu_);
  // Peers may still address the old range through existing connections.
  if (exposed_ != nullptr) retired_.push_back(exposed_);
  exposed_ = memh;
  return out;
}

absl::StatusOr<uint64_t> UcxTransport::Connect(absl::string_view peer_address,
                                               const ExposedMemory& remote) {
  if (peer_address.empty()) return absl::InvalidArgumentError("empty peer transport address");
  if (remote.remote_key.empty() || remote.size == 0) {
    return absl::InvalidArgumentError("the peer exposed no memory");
  }
  if (remote.base + remote.size < remote.base) {
    return absl::InvalidArgumentError("the peer's exposed range wraps around");
  }
  auto conn = std::make_shared<Connection>(remote);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t status) {
    static_cast<Connection*>(arg)->Fail(
        absl::StrCat("peer connection failed: ", ucs_status_string(status)));
  };
  params.err_handler.arg = conn.get();
  ucs_status_t unpacked = UCS_OK;
  {
    MutexLock lock(&conn->mu);
    if (ucs_status_t s = ucp_ep_create(worker_, &params, &conn->ep); s != UCS_OK) {
      conn->ep = nullptr;
      return FromUcs(s, "connecting to the peer (ucp_ep_create)");
    }
    unpacked = ucp_ep_rkey_unpack(conn->ep, remote.remote_key.data(), &conn->rkey);
    if (unpacked != UCS_OK) {
      conn->rkey = nullptr;
    } else {
      conn->lanes = LanesOf(conn->ep);
    }
  }
  if (unpacked != UCS_OK) {
    Close(conn, "bad remote key");
    return FromUcs(unpacked, "unpacking the peer's remote key");
  }
  // Complete the wire-up now (one round trip): an unreachable peer shows
  // here rather than in the first transfer, and no endpoint is left
  // half-connected (UCX 1.13 aborts when a worker is destroyed with wire-up
  // replies still queued).
  if (absl::Status wired = WaitForWireUp(*conn); !wired.ok()) {
    Close(conn, std::string(wired.message()));
    return wired;
  }
  Wake();
  MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  connections_.emplace(id, std::move(conn));
  return id;
}

std::shared_ptr<UcxTransport::Connection> UcxTransport::Find(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = connections_.find(id);
  return it == connections_.end() ? nullptr : it->second;
}

void UcxTransport::Close(const std::shared_ptr<Connection>& shared, const std::string& why) {
  Connection& conn = *shared;
  conn.Fail(why);
  MutexLock lock(&conn.mu);
  if (conn.ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  ucs_status_ptr_t request = ucp_ep_close_nbx(conn.ep, &param);
  conn.ep = nullptr;
  if (UCS_PTR_IS_ERR(request)) {
    // Not expected with peer error handling; the endpoint is unusable
    // either way, and its requests are still waited for by Execute.
    spdlog::error("closing a UCX endpoint failed: {}", ucs_status_string(UCS_PTR_STATUS(request)));
    // UCX may still call the endpoint's error handler with this connection:
    // keep it (and its rkey) alive as long as the worker.
    MutexLock keep(&mu_);
    unclosed_.push_back(shared);
    return;
  } else if (UCS_PTR_IS_PTR(request)) {
    AwaitRequest(request, absl::InfiniteFuture());
    ucp_request_free(request);
  }
  if (conn.rkey != nullptr) {
    ucp_rkey_destroy(conn.rkey);
    conn.rkey = nullptr;
  }
}

void UcxTransport::Disconnect(uint64_t connection) {
  std::shared_ptr<Connection> conn;
  {
    MutexLock lock(&mu_);
    auto it = connections_.find(connection);
    if (it == connections_.end()) return;
    conn = std::move(it->second);
    connections_.erase(it);
  }
  Close(conn, "disconnected");
}

std::vector<absl::Status> UcxTransport::Execute(uint64_t connection, RmaKind kind,
                                                absl::Span<const RmaOp> ops, absl::Time deadline) {
  std::vector<absl::Status> result(ops.size());
  std::shared_ptr<Connection> conn = Find(connection);
  if (conn == nullptr) {
    for (auto& s : result) s = absl::UnavailableError("no such peer connection");
    return result;
  }
  if (absl::Now() >= deadline) {
    // Nothing issued, so nothing to cancel: the connection stays usable.
    for (auto& s : result) {
      s = absl::DeadlineExceededError("the transfer's deadline passed before the bytes moved");
    }
    return result;
  }
  auto batch = std::make_shared<Batch>();
  {
    MutexLock lock(&batch->mu);
    batch->statuses.assign(ops.size() + 1, absl::OkStatus());  // + the flush
    batch->done.assign(ops.size() + 1, true);
  }
  auto on_done = [](void* request, ucs_status_t status, void* user_data) {
    auto* ctx = static_cast<OpContext*>(user_data);
    auto* b = static_cast<Batch*>(ctx->batch);
    {
      MutexLock lock(&b->mu);
      if (!b->timed_out) b->statuses[ctx->index] = FromUcs(status, "remote memory operation");
      b->done[ctx->index] = true;
      --b->pending;
    }
    ucp_request_free(request);
    delete ctx;
  };
  // Issues one request; its completion lands in batch slot `index`. The
  // batch lock is not held across the UCX call: the progress thread runs
  // completions while holding the worker's lock.
  auto issue = [&](size_t index, auto&& start) {
    auto* ctx = new OpContext{batch, batch.get(), index};
    {
      MutexLock lock(&batch->mu);
      ++batch->pending;
      batch->done[index] = false;
    }
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = on_done;
    param.user_data = ctx;
    ucs_status_ptr_t request = start(param);
    if (UCS_PTR_IS_PTR(request)) return;  // on_done will run
    delete ctx;
    MutexLock lock(&batch->mu);
    batch->statuses[index] = FromUcs(UCS_PTR_STATUS(request), "remote memory operation");
    batch->done[index] = true;
    --batch->pending;
  };
  {
    MutexLock lock(&conn->mu);
    const bool usable = conn->ep != nullptr && !conn->failed.load();
    for (size_t i = 0; i < ops.size(); ++i) {
      const RmaOp& op = ops[i];
      const ExposedMemory& r = conn->remote;
      if (op.remote_address < r.base || op.bytes > r.size ||
          op.remote_address - r.base > r.size - op.bytes) {
        result[i] = absl::InvalidArgumentError(absl::StrCat("remote range [", op.remote_address,
                                                            ", +", op.bytes,
                                                            ") leaves the peer's exposed memory"));
        continue;
      }
      if (op.local == nullptr && op.bytes != 0) {
        result[i] = absl::InvalidArgumentError("null local buffer");
        continue;
      }
      if (!usable) {
        result[i] =
            absl::UnavailableError(conn->ep == nullptr ? "peer connection closed" : conn->Error());
        continue;
      }
      if (op.bytes == 0) continue;
      ucp_ep_h ep = conn->ep;
      ucp_rkey_h rkey = conn->rkey;
      issue(i, [&](const ucp_request_param_t& param) {
        return kind == RmaKind::kPut
                   ? ucp_put_nbx(ep, op.local, op.bytes, op.remote_address, rkey, &param)
                   : ucp_get_nbx(ep, op.local, op.bytes, op.remote_address, rkey, &param);
      });
    }
    if (usable && kind == RmaKind::kPut) {
      // Puts complete locally; the flush says they reached the peer.
      ucp_ep_h ep = conn->ep;
      issue(ops.size(),
            [&](const ucp_request_param_t& param) { return ucp_ep_flush_nbx(ep, &param); });
    }
  }
  Wake();
  bool timed_out = false;
  {
    MutexLock lock(&batch->mu);
    auto finished = [b = batch.get()]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->pending == 0; };
    timed_out = !batch->mu.AwaitWithDeadline(Condition(&finished), deadline);
    if (timed_out) {
      batch->timed_out = true;
      for (size_t i = 0; i < batch->done.size(); ++i) {
        if (!batch->done[i]) {
          batch->statuses[i] =
              absl::DeadlineExceededError("the peer did not complete the transfer in time");
        }
      }
    }
  }
  if (timed_out) {
    // Cancels what is in flight so that no op touches local memory after we
    // return; the connection is unusable from now on.
    // A forced close completes every request of the endpoint; until they
    // have all completed the caller's buffers may still be touched, so wait
    // for them however long it takes rather than return early.
    Close(conn, "transfer deadline exceeded");
    MutexLock lock(&batch->mu);
    auto finished = [b = batch.get()]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return b->pending == 0; };
    while (!batch->mu.AwaitWithTimeout(Condition(&finished), absl::Seconds(10))) {
      spdlog::error("UCX still has {} operations of a closed connection in flight", batch->pending);
    }
  }
  {
    MutexLock lock(&batch->mu);
    const absl::Status flush = batch->statuses[ops.size()];
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!result[i].ok()) continue;
      if (!batch->statuses[i].ok()) {
        result[i] = batch->statuses[i];
      } else if (!flush.ok()) {
        result[i] = flush;
      }
    }
  }
  if (!timed_out && !conn->failed.load() && !ops.empty() &&
      std::all_of(result.begin(), result.end(), [](const absl::Status& s) { return s.ok(); })) {
    // Wire-up is complete once operations have gone through: note the
    // transports the endpoint settled on. Only a healthy endpoint is asked
    // (UCX does not describe a failed one safely).
    MutexLock conn_lock(&conn->mu);
    if (!conn->lanes_settled && conn->ep != nullptr && !conn->failed.load()) {
      conn->lanes = LanesOf(conn->ep);
      conn->lanes_settled = true;
    }
  }
  if (!timed_out && conn->failed.load()) {
    // A peer failure during the batch: whatever did not already fail is
    // not known to have arrived.
    for (auto& s : result) {
      if (s.ok()) s = absl::UnavailableError(conn->Error());
    }
  }
  return result;
}

ConnectionInfo UcxTransport::Describe(uint64_t connection) {
  ConnectionInfo info;
  std::shared_ptr<Connection> conn = Find(connection);
  if (conn == nullptr) return info;
  {
    MutexLock lock(&conn->mu);
    info.connected = conn->ep != nullptr && !conn->failed.load();
    info.lanes = conn->lanes;
  }
  info.last_error = conn->Error();
  return info;
}

}  // namespace kvtier
