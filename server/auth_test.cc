#include "server/auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"

namespace kvtier {
namespace {

constexpr char kIdentities[] = R"(
identities:
  - name: engine-a
    token: alpha-token-0123456789
    tenant: alpha
  - name: engine-b
    token_sha256: SHA_OF_BETA
    tenant: beta
    role: tenant
  - name: ops
    token: admin-token-0123456789
    role: admin
  - subject: kvtierd-decode
    role: peer
)";

std::string WithBetaHash() {
  std::string yaml = kIdentities;
  yaml.replace(yaml.find("SHA_OF_BETA"), 11, Sha256Hex("beta-token-0123456789"));
  return yaml;
}

TEST(AuthTest, Sha256OfAKnownString) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(AuthTest, OpenAuthenticatorAdmitsEveryoneAsTheSingleTenant) {
  std::unique_ptr<Authenticator> open = Authenticator::Open();
  EXPECT_FALSE(open->enabled());
  absl::StatusOr<Identity> who = open->Identify("", std::nullopt);
  ASSERT_TRUE(who.ok());
  EXPECT_TRUE(who->anonymous);
  EXPECT_EQ(who->tenant, "");
  for (Role r : {Role::kTenant, Role::kPeer, Role::kAdmin}) {
    EXPECT_TRUE(Authenticator::Authorize(*who, r).ok());
  }
}

TEST(AuthTest, TokensAndSubjectsNameTheirIdentity) {
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::FromYaml(WithBetaHash());
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_TRUE((*auth)->enabled());
  EXPECT_EQ((*auth)->size(), 4u);
  absl::StatusOr<Identity> a = (*auth)->Identify("alpha-token-0123456789", std::nullopt);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->name, "engine-a");
  EXPECT_EQ(a->tenant, "alpha");
  EXPECT_EQ(a->role, Role::kTenant);
  EXPECT_FALSE(a->anonymous);
  absl::StatusOr<Identity> b = (*auth)->Identify("beta-token-0123456789", std::nullopt);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->tenant, "beta");
  absl::StatusOr<Identity> peer = (*auth)->Identify("", "kvtierd-decode");
  ASSERT_TRUE(peer.ok());
  EXPECT_EQ(peer->role, Role::kPeer);
  EXPECT_EQ(peer->name, "kvtierd-decode");
}

TEST(AuthTest, UnknownOrMissingCredentialsAreUnauthenticated) {
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::FromYaml(WithBetaHash());
  ASSERT_TRUE(auth.ok());
  EXPECT_EQ((*auth)->Identify("", std::nullopt).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*auth)->Identify("alpha-token-012345678", std::nullopt).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*auth)->Identify("", "someone-else").status().code(),
            absl::StatusCode::kUnauthenticated);
  // A wrong token is refused even from a known certificate.
  EXPECT_EQ((*auth)->Identify("wrong-token-0123456789", "kvtierd-decode").status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthTest, RolesLimitWhatACallerMayCall) {
  const Identity tenant{"engine-a", "alpha", Role::kTenant};
  const Identity peer{"decode", "", Role::kPeer};
  const Identity admin{"ops", "", Role::kAdmin};
  const Identity admin_with_tenant{"ops", "alpha", Role::kAdmin};
  EXPECT_TRUE(Authenticator::Authorize(tenant, Role::kTenant).ok());
  EXPECT_EQ(Authenticator::Authorize(tenant, Role::kAdmin).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authenticator::Authorize(tenant, Role::kPeer).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Authenticator::Authorize(peer, Role::kPeer).ok());
  EXPECT_EQ(Authenticator::Authorize(peer, Role::kTenant).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Authenticator::Authorize(peer, Role::kAdmin).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Authenticator::Authorize(admin, Role::kAdmin).ok());
  EXPECT_TRUE(Authenticator::Authorize(admin, Role::kPeer).ok());
  // KvCache needs a tenant, even for an admin.
  EXPECT_EQ(Authenticator::Authorize(admin, Role::kTenant).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(Authenticator::Authorize(admin_with_tenant, Role::kTenant).ok());
}

TEST(AuthTest, BadFilesAreRefusedWithTheEntryNamed) {
  struct Case {
    const char* yaml;
    const char* says;
  };
  const Case cases[] = {
      {"identities: [", "identities"},
      {"users: []", "list 'identities'"},
      {"identities: []", "empty"},
      {"identities:\n  - {tenant: a}", "identities[0]: needs exactly one"},
      {"identities:\n  - {token: short, tenant: a}", "shorter than 16"},
      {"identities:\n  - {token_sha256: abc, tenant: a}", "not 64 hex digits"},
      {"identities:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: 'a b'}", "tenant: 'a b'"},
      {"identities:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, role: root}", "role: 'root'"},
      {"identities:\n  - {token: aaaaaaaaaaaaaaaaaaaa}", "role tenant needs a tenant"},
      {"identities:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a, colour: red}", "unknown key"},
      {"identities:\n  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: a}\n"
       "  - {token: aaaaaaaaaaaaaaaaaaaa, tenant: b}",
       "identities[1]"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::FromYaml(c.yaml);
    ASSERT_FALSE(auth.ok()) << c.yaml;
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument) << c.yaml;
    EXPECT_NE(auth.status().message().find(c.says), std::string::npos)
        << c.yaml << " -> " << auth.status();
  }
}

TEST(AuthTest, AnIdentitiesFileOthersCanReadIsRefused) {
  char path[] = "/tmp/kvtier-identities-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(path);
    out << WithBetaHash();
  }
  ASSERT_EQ(chmod(path, 0644), 0);
  EXPECT_EQ(Authenticator::FromFile(path).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_EQ(chmod(path, 0600), 0);
  absl::StatusOr<std::unique_ptr<Authenticator>> auth = Authenticator::FromFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->size(), 4u);
  unlink(path);
  EXPECT_EQ(Authenticator::FromFile(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(AuthTest, TenantNames) {
  EXPECT_TRUE(ValidTenantName("alpha"));
  EXPECT_TRUE(ValidTenantName("team-7.prod_a"));
  EXPECT_FALSE(ValidTenantName(""));
  EXPECT_FALSE(ValidTenantName("a b"));
  EXPECT_FALSE(ValidTenantName("a/b"));
  EXPECT_FALSE(ValidTenantName(std::string(65, 'a')));
  for (const char* reserved : {"none", "other", "unauthenticated", ".", "..", ".hidden"}) {
    EXPECT_FALSE(ValidTenantName(reserved)) << reserved;
  }
}

}  // namespace
}  // namespace kvtier
