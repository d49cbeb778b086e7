// ZmqEventPublisher: publishes the cache's residency events over ZeroMQ in
// vLLM's KV event format (vllm_event_batch.h), with the wire protocol of
// vLLM's own ZmqEventPublisher, so KV-aware routers that index an engine's
// GPU cache from its events index kvtier's host and NVMe tiers the same
// way; to them the daemon is one more publisher:
//  - a PUB socket bound at `endpoint` sends three-frame messages
//    [topic, seq (8-byte big-endian, from 0), payload (a KVEventBatch)],
//    `topic` on every message;
//  - an optional ROUTER socket at `replay_endpoint` answers a request
//    [empty, start seq (8-byte big-endian)] with every buffered message from
//    that seq on, as [empty, seq, payload] each, then [empty, -1 (8 bytes),
//    empty];
//  - the stream starts with AllBlocksCleared followed by the cache's
//    contents as BlockStored (a snapshot: what was recovered from NVMe, say);
//    if the publisher falls behind the cache, it does the same again, so a
//    consumer converges on the truth without a restart;
//  - with `model` set, only namespaces of that model id are published (one
//    router per model: two models' block hashes may coincide).
//
// Thread-safety: thread-safe; its sockets live on its own thread.
#ifndef KVTIER_EVENTS_ZMQ_EVENT_PUBLISHER_H_
#define KVTIER_EVENTS_ZMQ_EVENT_PUBLISHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "events/block_event_bus.h"

namespace kvtier {

struct ZmqEventPublisherOptions {
  std::string endpoint;         // bound, e.g. "tcp://*:5557"
  std::string replay_endpoint;  // bound; "" = no replay
  std::string topic;            // every message's topic
  std::string model;            // publish only this model's namespaces; "" = all
  bool int_hashes = true;       // hashes as uint64 (vLLM's default) or bytes
  size_t buffer_steps = 10000;  // messages kept for replay
  int hwm = 100000;             // the PUB socket's send high-water mark
  size_t max_events_per_batch = 1024;
};

class ZmqEventPublisher {
 public:
  // What the publisher needs of an open namespace; nullopt if it is not
  // open (closed meanwhile, or a hybrid's group).
  struct NamespaceInfo {
    std::string model_id;
    uint32_t tokens_per_block = 0;
  };
  using DescribeNamespace = std::function<std::optional<NamespaceInfo>(const NamespaceId&)>;

  // INVALID_ARGUMENT for an empty or malformed endpoint, UNAVAILABLE if one
  // cannot be bound. `bus` must outlive the publisher.
  static absl::StatusOr<std::unique_ptr<ZmqEventPublisher>> Create(
      const ZmqEventPublisherOptions& options, BlockEventBus* bus, DescribeNamespace describe);
  ~ZmqEventPublisher();
  ZmqEventPublisher(const ZmqEventPublisher&) = delete;
  ZmqEventPublisher& operator=(const ZmqEventPublisher&) = delete;

  uint64_t messages_published() const { return messages_.load(std::memory_order_relaxed); }
  uint64_t events_published() const { return events_.load(std::memory_order_relaxed); }
  uint64_t resyncs() const { return resyncs_.load(std::memory_order_relaxed); }

 private:
  class Sockets;
  ZmqEventPublisher(const ZmqEventPublisherOptions& options, BlockEventBus* bus,
                    DescribeNamespace describe, std::unique_ptr<Sockets> sockets);
  void Run();

  const ZmqEventPublisherOptions options_;
  BlockEventBus* const bus_;
  const DescribeNamespace describe_;
  std::unique_ptr<Sockets> sockets_;  // used by the thread only
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> messages_{0};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> resyncs_{0};
  std::thread thread_;
};

}  // namespace kvtier

#endif  // KVTIER_EVENTS_ZMQ_EVENT_PUBLISHER_H_
