// PeerChannel: the calls one daemon makes on a peer daemon's Peer service
// (proto/kvtier/v1/peer.proto), in domain types. The gRPC implementation is
// server/grpc_peer_channel.h; tests may substitute their own.
//
// Thread-safety: implementations are thread-safe.
#ifndef KVTIER_TRANSFER_PEER_CHANNEL_H_
#define KVTIER_TRANSFER_PEER_CHANNEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "storage/block_key.h"
#include "storage/namespace_spec.h"
#include "transfer/transport.h"

namespace kvtier {

struct PeerHello {
  std::string daemon_id;
  std::string role;
  std::string transport_address;
  ExposedMemory memory;
  std::string transport;
  std::string transports;
  std::string net_devices;  // the devices the peer's transport listens on
};

// One block of a transfer: what the source knows of it and where its bytes
// are (Export) or go (Stage).
struct PeerBlockInfo {
  BlockKey key;
  BlockKey parent;
  uint64_t size = 0;
  uint64_t checksum = 0;
  uint64_t address = 0;
  bool already_cached = false;
};

struct StageResult {
  std::string daemon_id;              // of the daemon that staged
  std::string stage_id;               // empty when nothing was staged
  std::vector<PeerBlockInfo> blocks;  // the staged prefix
  absl::Status refused;               // why the next block was not staged
};

struct ExportResult {
  std::string daemon_id;              // of the daemon that exported
  std::string export_id;              // empty when nothing is cached
  std::vector<PeerBlockInfo> blocks;  // the cached prefix
};

class PeerChannel {
 public:
  virtual ~PeerChannel() = default;
  virtual absl::StatusOr<PeerHello> Hello(const std::string& caller_id, absl::Time deadline) = 0;
  virtual absl::StatusOr<StageResult> Stage(const NamespaceId& ns,
                                            absl::Span<const PeerBlockInfo> blocks,
                                            absl::Duration ttl, absl::Time deadline) = 0;
  // One status per staged block.
  virtual absl::StatusOr<std::vector<absl::Status>> Commit(const std::string& stage_id,
                                                           uint32_t received,
                                                           absl::Time deadline) = 0;
  virtual absl::StatusOr<ExportResult> Export(const NamespaceId& ns,
                                              absl::Span<const BlockKey> keys, absl::Duration ttl,
                                              absl::Time deadline) = 0;
  virtual absl::Status ReleaseExport(const std::string& export_id, absl::Time deadline) = 0;
};

// Opens a channel to the daemon at a gRPC target ("host:port").
using PeerChannelFactory = std::function<std::unique_ptr<PeerChannel>(const std::string& target)>;

}  // namespace kvtier

#endif  // KVTIER_TRANSFER_PEER_CHANNEL_H_
