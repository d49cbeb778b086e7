// The role each RPC of kvtier.v1.KvCache, Admin and Peer requires, declared
// once, here. Handlers admit their caller with RoleOf("Service", "Method"),
// evaluated at compile time: a method missing from the table does not
// compile, and rpc_roles_test.cc checks the table against the services'
// descriptors in both directions.
//
// Thread-safety: constants only.
#ifndef KVTIER_SERVER_RPC_ROLES_H_
#define KVTIER_SERVER_RPC_ROLES_H_

#include <string_view>

#include "server/auth.h"

namespace kvtier {

struct RpcRole {
  std::string_view service;  // short name: "KvCache", "Admin" or "Peer"
  std::string_view method;   // as in the .proto
  Role role;
};

// Every service below lives in this proto package.
inline constexpr std::string_view kRpcPackage = "kvtier.v1";

inline constexpr RpcRole kRpcRoles[] = {
    // KvCache: an engine, in its own tenant's namespaces.
    {"KvCache", "OpenNamespace", Role::kTenant},
    {"KvCache", "Lookup", Role::kTenant},
    {"KvCache", "Put", Role::kTenant},
    {"KvCache", "Get", Role::kTenant},
    {"KvCache", "Release", Role::kTenant},
    {"KvCache", "Delete", Role::kTenant},
    {"KvCache", "CloseNamespace", Role::kTenant},
    {"KvCache", "RegisterMemory", Role::kTenant},
    {"KvCache", "UnregisterMemory", Role::kTenant},
    {"KvCache", "Save", Role::kTenant},
    {"KvCache", "Load", Role::kTenant},
    {"KvCache", "Transfer", Role::kTenant},
    // Admin: the operator's views and actions.
    {"Admin", "GetStatus", Role::kAdmin},
    {"Admin", "ListTiers", Role::kAdmin},
    {"Admin", "ListNamespaces", Role::kAdmin},
    {"Admin", "GetWear", Role::kAdmin},
    {"Admin", "ListPeers", Role::kAdmin},
    {"Admin", "ListBlocks", Role::kAdmin},
    {"Admin", "Evict", Role::kAdmin},
    {"Admin", "GetCluster", Role::kAdmin},
    {"Admin", "WatchBlocks", Role::kAdmin},
    // Peer: another daemon (the service hands out the arena's remote key).
    {"Peer", "Hello", Role::kPeer},
    {"Peer", "Stage", Role::kPeer},
    {"Peer", "Commit", Role::kPeer},
    {"Peer", "Export", Role::kPeer},
    {"Peer", "ReleaseExport", Role::kPeer},
};

namespace rpc_roles_internal {
// Not constexpr: reaching it in a constant evaluation is the compile error.
inline Role RpcMissingFromRoleTable() { return Role::kAdmin; }
}  // namespace rpc_roles_internal

// The role `service`.`method` requires. Compile-time only: an RPC the table
// does not name fails to compile.
consteval Role RoleOf(std::string_view service, std::string_view method) {
  for (const RpcRole& r : kRpcRoles) {
    if (r.service == service && r.method == method) return r.role;
  }
  return rpc_roles_internal::RpcMissingFromRoleTable();
}

}  // namespace kvtier

#endif  // KVTIER_SERVER_RPC_ROLES_H_
