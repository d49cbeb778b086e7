#include "server/rpc_roles.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "kvtier/v1/peer.grpc.pb.h"

namespace kvtier {
namespace {

using google::protobuf::ServiceDescriptor;

// The generated stubs here have no Service::descriptor(): each service is
// found in the file of one of its messages.
std::vector<const ServiceDescriptor*> Services() {
  return {
      v1::PutChunk::descriptor()->file()->FindServiceByName("KvCache"),
      v1::GetStatusRequest::descriptor()->file()->FindServiceByName("Admin"),
      v1::HelloRequest::descriptor()->file()->FindServiceByName("Peer"),
  };
}

std::string FullName(std::string_view service, std::string_view method) {
  return absl::StrCat("/", std::string(kRpcPackage), ".", std::string(service), "/",
                      std::string(method));
}

std::set<std::string> TableMethods() {
  std::set<std::string> out;
  for (const RpcRole& r : kRpcRoles) out.insert(FullName(r.service, r.method));
  return out;
}

TEST(RpcRolesTest, EveryRpcOfEveryServiceHasARole) {
  const std::set<std::string> table = TableMethods();
  for (const ServiceDescriptor* s : Services()) {
    ASSERT_NE(s, nullptr);
    ASSERT_EQ(s->file()->package(), std::string(kRpcPackage));
    for (int i = 0; i < s->method_count(); ++i) {
      const std::string name = absl::StrCat("/", s->full_name(), "/", s->method(i)->name());
      EXPECT_TRUE(table.contains(name)) << name << " has no entry in kRpcRoles";
    }
  }
}

TEST(RpcRolesTest, TableNamesOnlyRpcsThatExist) {
  std::set<std::string> rpcs;
  for (const ServiceDescriptor* s : Services()) {
    ASSERT_NE(s, nullptr);
    for (int i = 0; i < s->method_count(); ++i) {
      rpcs.insert(absl::StrCat("/", s->full_name(), "/", s->method(i)->name()));
    }
  }
  for (const RpcRole& r : kRpcRoles) {
    EXPECT_TRUE(rpcs.contains(FullName(r.service, r.method)))
        << FullName(r.service, r.method) << " is in kRpcRoles but no service has it";
  }
}

TEST(RpcRolesTest, EachRpcIsNamedOnce) { EXPECT_EQ(TableMethods().size(), std::size(kRpcRoles)); }

TEST(RpcRolesTest, EachServiceNeedsItsRole) {
  // KvCache is the tenants', Admin the operator's, Peer the other daemons'.
  for (const RpcRole& r : kRpcRoles) {
    const Role want = r.service == "KvCache" ? Role::kTenant
                      : r.service == "Admin" ? Role::kAdmin
                                             : Role::kPeer;
    EXPECT_EQ(r.role, want) << FullName(r.service, r.method);
  }
  static_assert(RoleOf("KvCache", "Put") == Role::kTenant);
  static_assert(RoleOf("Admin", "Evict") == Role::kAdmin);
  static_assert(RoleOf("Peer", "Stage") == Role::kPeer);
}

}  // namespace
}  // namespace kvtier
