// GrpcPeerChannel: PeerChannel over the peer daemon's gRPC Peer service.
//
// Thread-safety: thread-safe (one gRPC channel, shared by all calls).
#ifndef KVTIER_SERVER_GRPC_PEER_CHANNEL_H_
#define KVTIER_SERVER_GRPC_PEER_CHANNEL_H_

#include <memory>
#include <string>

#include "server/peer_channel.h"

namespace kvtier {

// A channel to the daemon at `target` ("host:port"); connects lazily.
std::unique_ptr<PeerChannel> MakeGrpcPeerChannel(const std::string& target);

}  // namespace kvtier

#endif  // KVTIER_SERVER_GRPC_PEER_CHANNEL_H_
