// ZmqEventPublisher: publishes the cache's residency events over ZeroMQ in
// vLLM's KV event format (vllm_event_batch.h), the way vLLM's own
// ZmqEventPublisher does, so KV-aware routers that index an engine's GPU
// cache from its events can index kvtier's host and NVMe tiers the same
// way:
//  - a PUB socket bound at `endpoint` sends three-frame messages
//    [topic, seq (8-byte big-endian, from 0), payload (a KVEventBatch)];
//    the topic is `topic` followed by the namespace id in hex, and each
//    batch holds events of that one namespace (a subscriber filtering on
//    the prefix of one namespace's topic sees only that model's blocks);
//  - an optional ROUTER socket at `replay_endpoint` answers a request
//    [empty, start seq (8-byte big-endian)] with every buffered message from
//    that seq on, as [empty, topic, seq, payload] each, then
//    [empty, empty, -1 (8 bytes), empty];
//  - a namespace's first batch, and the first after the publisher fell
//    behind, start with AllBlocksCleared; after falling behind it
//    republishes the cache's contents as BlockStored events (the bus's
//    snapshot), so a consumer converges on the truth without a restart.
//
// Thread-safety: thread-safe; its sockets live on its own thread.
#ifndef KVTIER_EVENTS_ZMQ_EVENT_PUBLISHER_H_
#define KVTIER_EVENTS_ZMQ_EVENT_PUBLISHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "events/block_event_bus.h"

namespace kvtier {

struct ZmqEventPublisherOptions {
  std::string endpoint;         // bound, e.g. "tcp://*:5557"
  std::string replay_endpoint;  // bound; "" = no replay
  std::string topic;            // prefix of every message's topic
  size_t buffer_steps = 10000;  // messages kept for replay
  int hwm = 100000;             // the PUB socket's send high-water mark
  size_t max_events_per_batch = 1024;
};

class ZmqEventPublisher {
 public:
  // Tokens per block of a namespace (the batches' block_size); 0 if unknown.
  using TokensPerBlock = std::function<uint32_t(const NamespaceId&)>;

  // INVALID_ARGUMENT for an empty or malformed endpoint, UNAVAILABLE if one
  // cannot be bound. `bus` must outlive the publisher.
  static absl::StatusOr<std::unique_ptr<ZmqEventPublisher>> Create(
      const ZmqEventPublisherOptions& options, BlockEventBus* bus, TokensPerBlock tokens);
  ~ZmqEventPublisher();
  ZmqEventPublisher(const ZmqEventPublisher&) = delete;
  ZmqEventPublisher& operator=(const ZmqEventPublisher&) = delete;

  uint64_t messages_published() const { return messages_.load(std::memory_order_relaxed); }
  uint64_t events_published() const { return events_.load(std::memory_order_relaxed); }
  uint64_t resyncs() const { return resyncs_.load(std::memory_order_relaxed); }

 private:
  class Sockets;
  ZmqEventPublisher(const ZmqEventPublisherOptions& options, BlockEventBus* bus,
                    TokensPerBlock tokens, std::unique_ptr<Sockets> sockets);
  void Run();

  const ZmqEventPublisherOptions options_;
  BlockEventBus* const bus_;
  const TokensPerBlock tokens_;
  std::unique_ptr<Sockets> sockets_;  // used by the thread only
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> resyncs_{0};
  std::thread thread_;
};

}  // namespace kvtier

#endif  // KVTIER_EVENTS_ZMQ_EVENT_PUBLISHER_H_
