#include "events/zmq_event_publisher.h"

#include <algorithm>
#include <array>
#include <climits>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "events/vllm_event_batch.h"
#include "spdlog/spdlog.h"
#include "zmq.hpp"
#include "zmq_addon.hpp"

namespace kvtier {
namespace {

std::array<char, 8> BigEndian(int64_t v) {
  std::array<char, 8> out;
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((u >> (56 - 8 * i)) & 0xff);
  return out;
}

int64_t FromBigEndian(const zmq::message_t& m) {
  uint64_t u = 0;
  const auto* p = static_cast<const uint8_t*>(m.data());
  for (size_t i = 0; i < 8; ++i) u = (u << 8) | p[i];
  return static_cast<int64_t>(u);
}

absl::Status CheckEndpoint(const std::string& endpoint, absl::string_view what) {
  if (!absl::StartsWith(endpoint, "tcp://") && !absl::StartsWith(endpoint, "ipc://") &&
      !absl::StartsWith(endpoint, "inproc://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " '", endpoint, "' is not a ZeroMQ endpoint (tcp://HOST:PORT, ipc://PATH)"));
  }
  return absl::OkStatus();
}

}  // namespace

// The sockets and the state of the stream; touched by the publisher's
// thread only (after Create hands them over).
class ZmqEventPublisher::Sockets {
 public:
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
  int64_t next_seq = 0;
  struct Sent {
    int64_t seq;
    std::string payload;
  };
  std::deque<Sent> buffer;
  // Namespaces described so far; an unknown one (nullopt) is asked again
  // after a second.
  struct Known {
    std::optional<NamespaceInfo> info;
    absl::Time asked;
  };
  absl::flat_hash_map<NamespaceId, Known> namespaces;
};

absl::StatusOr<std::unique_ptr<ZmqEventPublisher>> ZmqEventPublisher::Create(
    const ZmqEventPublisherOptions& options, BlockEventBus* bus, DescribeNamespace describe) {
  if (absl::Status s = CheckEndpoint(options.endpoint, "events endpoint"); !s.ok()) return s;
  if (!options.replay_endpoint.empty()) {
    if (absl::Status s = CheckEndpoint(options.replay_endpoint, "replay endpoint"); !s.ok()) {
      return s;
    }
  }
  if (options.buffer_steps == 0 || options.max_events_per_batch == 0 || options.hwm <= 0) {
    return absl::InvalidArgumentError(
        "buffer_steps, max_events_per_batch and hwm must be positive");
  }
  auto sockets = std::make_unique<Sockets>();
  try {
    sockets->pub.set(zmq::sockopt::sndhwm, options.hwm);
    sockets->pub.set(zmq::sockopt::linger, 0);
    sockets->pub.bind(options.endpoint);
    if (!options.replay_endpoint.empty()) {
      sockets->replay.emplace(sockets->context, zmq::socket_type::router);
      sockets->replay->set(zmq::sockopt::linger, 0);
      // A replay answers with up to the whole buffer and its end marker;
      // ROUTER drops silently past its high-water mark.
      sockets->replay->set(zmq::sockopt::sndhwm,
                           static_cast<int>(std::min<size_t>(options.buffer_steps + 2, INT32_MAX)));
      sockets->replay->bind(options.replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(absl::StrCat("cannot bind the KV event sockets (",
                                               options.endpoint, ", replay '",
                                               options.replay_endpoint, "'): ", e.what()));
  }
  return std::unique_ptr<ZmqEventPublisher>(
      new ZmqEventPublisher(options, bus, std::move(describe), std::move(sockets)));
}

ZmqEventPublisher::ZmqEventPublisher(const ZmqEventPublisherOptions& options, BlockEventBus* bus,
                                     DescribeNamespace describe, std::unique_ptr<Sockets> sockets)
    : options_(options), bus_(bus), describe_(std::move(describe)), sockets_(std::move(sockets)) {
  thread_ = std::thread([this] { Run(); });
}

ZmqEventPublisher::~ZmqEventPublisher() {
  stop_.store(true);
  thread_.join();
}

void ZmqEventPublisher::Run() {
  Sockets& s = *sockets_;
  auto send = [&](const std::string& payload) {
    const int64_t seq = s.next_seq++;
    const std::array<char, 8> seq_bytes = BigEndian(seq);
    try {
      s.pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore);
      s.pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore);
      s.pub.send(zmq::buffer(payload), zmq::send_flags::none);
    } catch (const zmq::error_t& e) {
      spdlog::warn("KV events: send failed: {}", e.what());
    }
    s.buffer.push_back(Sockets::Sent{seq, payload});
    if (s.buffer.size() > options_.buffer_steps) s.buffer.pop_front();
    messages_.fetch_add(1, std::memory_order_relaxed);
  };
  auto now = [] { return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()); };
  auto describe = [&](const NamespaceId& ns) -> const std::optional<NamespaceInfo>& {
    auto [it, fresh] = s.namespaces.try_emplace(ns);
    if (fresh ||
        (!it->second.info.has_value() && absl::Now() - it->second.asked > absl::Seconds(1))) {
      it->second.info = describe_(ns);
      it->second.asked = absl::Now();
    }
    return it->second.info;
  };
  auto block_size = [&](const NamespaceId& ns) {
    const std::optional<NamespaceInfo>& info = describe(ns);
    return info.has_value() ? info->tokens_per_block : 0u;
  };
  auto published = [&](const BlockEvent& e) {
    if (options_.model.empty()) return true;
    const std::optional<NamespaceInfo>& info = describe(e.ns);
    return info.has_value() && info->model_id == options_.model;
  };
  auto serve_replay = [&] {
    if (!s.replay.has_value()) return;
    try {
      zmq::pollitem_t item{s.replay->handle(), 0, ZMQ_POLLIN, 0};
      while (zmq::poll(&item, 1, std::chrono::milliseconds(0)) > 0) {
        std::vector<zmq::message_t> frames;
        if (!zmq::recv_multipart(*s.replay, std::back_inserter(frames),
                                 zmq::recv_flags::dontwait)) {
          return;
        }
        if (frames.size() != 3 || frames[2].size() != 8) {
          spdlog::warn("KV events: malformed replay request ({} frames) ignored", frames.size());
          continue;
        }
        const int64_t start = FromBigEndian(frames[2]);
        const std::string id = frames[0].to_string();
        auto reply = [&](const std::array<char, 8>& seq, absl::string_view payload) {
          s.replay->send(zmq::buffer(id), zmq::send_flags::sndmore);
          s.replay->send(zmq::message_t(), zmq::send_flags::sndmore);
          s.replay->send(zmq::buffer(seq), zmq::send_flags::sndmore);
          s.replay->send(zmq::buffer(payload.data(), payload.size()), zmq::send_flags::none);
        };
        for (const Sockets::Sent& m : s.buffer) {
          if (m.seq >= start) reply(BigEndian(m.seq), m.payload);
        }
        reply(BigEndian(-1), "");
      }
    } catch (const zmq::error_t& e) {
      spdlog::warn("KV events: replay failed: {}", e.what());
    }
  };

  std::shared_ptr<BlockEventBus::Subscription> sub;
  bool clear_next = false;
  while (!stop_.load()) {
    if (sub == nullptr || sub->lost()) {
      if (sub != nullptr) {
        resyncs_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("KV events: publisher fell behind; clearing and republishing the contents");
      }
      // Consumers drop what they knew, then get the contents.
      sub = bus_->Subscribe(std::nullopt, /*snapshot=*/true);
      clear_next = true;
    }
    serve_replay();
    if (!sub->Wait(absl::Milliseconds(50)) && !clear_next) continue;
    std::vector<BlockEvent> events = sub->Take(options_.max_events_per_batch);
    std::erase_if(events, [&](const BlockEvent& e) { return !published(e); });
    if (events.empty() && !clear_next) continue;
    send(EncodeVllmEventBatch(now(), events,
                              {.int_hashes = options_.int_hashes,
                               .block_size = block_size,
                               .all_cleared_first = clear_next}));
    events_.fetch_add(events.size(), std::memory_order_relaxed);
    clear_next = false;
  }
  if (sub != nullptr) sub->Cancel();
}

}  // namespace kvtier
