// GrpcPeerChannel: PeerChannel over the peer daemon's gRPC Peer service.
//
// Thread-safety: thread-safe (one gRPC channel, shared by all calls).
#ifndef KVTIER_SERVER_GRPC_PEER_CHANNEL_H_
#define KVTIER_SERVER_GRPC_PEER_CHANNEL_H_

#include <memory>
#include <string>

#include "kvtier/credentials.h"
#include "transfer/peer_channel.h"

namespace kvtier {

// Makes channels to the daemons at "host:port" targets, presenting
// `credentials` (TLS, client certificate, token); they connect lazily.
PeerChannelFactory GrpcPeerChannels(Credentials credentials);

}  // namespace kvtier

#endif  // KVTIER_SERVER_GRPC_PEER_CHANNEL_H_
