// fp8 storage encoding end to end over gRPC: a namespace opened with
// encoding fp8 stores a little over half the bytes, Put/Get and Save/Load
// hand engines decoded blocks within fp8 precision, the encoding is part of
// the namespace's identity, clipped values are counted per namespace, and
// bad encodings or partial blocks are refused without changing anything.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "encoding/fp8_e4m3.h"
#include "kvtier/client.h"
#include "kvtier/shared_region.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/test_daemon_config.h"

namespace kvtier {
namespace {

using client::Client;

// 2 layers, 2 KV heads of 64, 16 tokens, bf16: 16 KiB blocks.
constexpr uint32_t kLayers = 2, kHeads = 2, kDim = 64, kTokens = 16;
constexpr size_t kValues = 2 * kLayers * kTokens * kHeads * kDim;
constexpr size_t kBlock = 2 * kValues;

class Fp8NamespaceRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    DaemonConfig c = TestDaemonConfig(8ull << 20, 1ull << 20, 1ull << 20);
    auto d = Daemon::Start(c);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto cl = Client::Connect(daemon_->listen_address());
    ASSERT_TRUE(cl.ok());
    client_ = std::move(*cl);
    admin_ = v1::Admin::NewStub(
        grpc::CreateChannel(daemon_->listen_address(), grpc::InsecureChannelCredentials()));
  }

  client::NamespaceOptions Options(const std::string& encoding) {
    client::NamespaceOptions o;
    o.model_id = "fp8-model";
    o.layout = {kLayers, kHeads, kDim, "bf16", kTokens, 0, 1};
    o.encoding = encoding;
    return o;
  }

  // A bf16 block of smooth values with a per-block phase.
  static std::string Block(int seed) {
    std::string b(kBlock, '\0');
    for (size_t i = 0; i < kValues; ++i) {
      const uint16_t h = fp8::FloatToBf16(std::sin(0.01f * i + seed) * (1.0f + (i % 5)));
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    return b;
  }
  static float Value(const std::string& b, size_t i) {
    uint16_t h;
    std::memcpy(&h, b.data() + 2 * i, 2);
    return fp8::Bf16ToFloat(h);
  }
  // Every value within fp8 precision (3 mantissa bits, plus bf16 rounding
  // and the subnormal floor of the largest scale, 5/448 * 2^-10).
  static void ExpectClose(const std::string& want, const std::string& got) {
    ASSERT_EQ(got.size(), want.size());
    size_t exact = 0;
    for (size_t i = 0; i < kValues; ++i) {
      const float x = Value(want, i), y = Value(got, i);
      ASSERT_LE(std::fabs(x - y), std::fabs(x) * 0.067f + 1.2e-5f) << i;
      exact += x == y;
    }
    EXPECT_LT(exact, kValues);  // it really was quantized
  }

  v1::NamespaceStatus Status(const std::string& id) {
    grpc::ClientContext ctx;
    v1::ListNamespacesResponse resp;
    EXPECT_TRUE(admin_->ListNamespaces(&ctx, v1::ListNamespacesRequest(), &resp).ok());
    for (const v1::NamespaceStatus& n : resp.namespaces()) {
      if (n.namespace_id() == id) return n;
    }
    ADD_FAILURE() << "namespace " << id << " not listed";
    return {};
  }

  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<v1::Admin::Stub> admin_;
};

TEST_F(Fp8NamespaceRpcTest, PutGetSaveLoadDecodeWithinFp8Precision) {
  auto ns = client_->OpenNamespace(Options("fp8"));
  ASSERT_TRUE(ns.ok()) << ns.status();
  EXPECT_EQ(ns->block_bytes, kBlock);
  EXPECT_NE(ns->encoding.find("fp8-e4m3"), std::string::npos) << ns->encoding;
  // codes + K scales per channel per 16 tokens + V scales per token + header
  EXPECT_EQ(ns->stored_block_bytes, 16 + kValues + 4 * kLayers * (kHeads * kDim + kTokens));
  auto plain = client_->OpenNamespace(Options(""));
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->id, ns->id);  // the encoding is part of the identity
  EXPECT_EQ(plain->stored_block_bytes, kBlock);

  // Put / Get.
  const std::vector<std::string> keys = {"k0", "k1"}, data = {Block(0), Block(1)};
  ASSERT_TRUE(client_->Put(ns->id, keys, data).ok());
  auto got = client_->Get(ns->id, keys);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int i = 0; i < 2; ++i) ExpectClose(data[i], (*got)[i]);
  auto hit = client_->Lookup(ns->id, keys);
  ASSERT_TRUE(hit.ok());
  EXPECT_EQ(hit->matched, 2u);

  // Save / Load through shared memory.
  auto region = client::SharedRegion::Create(4 * kBlock);
  ASSERT_TRUE(region.ok());
  auto id = client_->RegisterMemory((*region)->path(), (*region)->size());
  ASSERT_TRUE(id.ok()) << id.status();
  const std::string b2 = Block(2);
  std::memcpy((*region)->data(), b2.data(), kBlock);
  std::vector<client::RegionBlockRef> save = {{"k2", "k1", 0, kBlock, {}}};
  std::vector<absl::Status> outcomes;
  auto collect = [&](const client::BlockCompletion& c) { outcomes.push_back(c.status); };
  ASSERT_TRUE(client_->Save(ns->id, *id, save, collect).ok());
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok()) << outcomes[0];
  outcomes.clear();
  std::vector<client::RegionBlockRef> load = {{"k2", "", 2 * kBlock, kBlock, {}}};
  ASSERT_TRUE(client_->Load(ns->id, *id, load, collect).ok());
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].ok()) << outcomes[0];
  ExpectClose(b2,
              std::string(reinterpret_cast<const char*>((*region)->data()) + 2 * kBlock, kBlock));

  const v1::NamespaceStatus st = Status(ns->id);
  EXPECT_NE(st.encoding().find("fp8"), std::string::npos);
  EXPECT_EQ(st.fp8_values(), 3 * kValues);
  EXPECT_EQ(st.fp8_clipped(), 0u);
  EXPECT_EQ(st.bytes(), 3 * ns->stored_block_bytes);  // the tiers hold the fp8 form
  EXPECT_TRUE(Status(plain->id).encoding().empty());
}

TEST_F(Fp8NamespaceRpcTest, ClippedValuesAreCountedPerNamespace) {
  auto ns = client_->OpenNamespace(Options("fp8"));
  ASSERT_TRUE(ns.ok());
  std::string b = Block(3);
  const uint16_t inf = fp8::FloatToBf16(std::numeric_limits<float>::infinity());
  std::memcpy(b.data() + 2 * 10, &inf, 2);
  std::memcpy(b.data() + 2 * (kValues - 1), &inf, 2);
  ASSERT_TRUE(client_->Put(ns->id, {"c0"}, {b}).ok());
  EXPECT_EQ(Status(ns->id).fp8_clipped(), 2u);
}

TEST_F(Fp8NamespaceRpcTest, BadEncodingsAndPartialBlocksChangeNothing) {
  client::NamespaceOptions o = Options("fp8");
  o.engine_layout = "tensorrt";
  EXPECT_EQ(client_->OpenNamespace(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options("fp8");
  o.k_group_tokens = kTokens + 1;
  EXPECT_EQ(client_->OpenNamespace(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options("fp8");
  o.layout.dtype = "fp8_e4m3";  // already 8-bit
  EXPECT_EQ(client_->OpenNamespace(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options("");
  o.engine_layout = "vllm-hnd";  // layout options without an encoding
  EXPECT_EQ(client_->OpenNamespace(o).status().code(), absl::StatusCode::kInvalidArgument);
  grpc::ClientContext ctx;
  v1::ListNamespacesResponse listed;
  ASSERT_TRUE(admin_->ListNamespaces(&ctx, v1::ListNamespacesRequest(), &listed).ok());
  EXPECT_EQ(listed.namespaces_size(), 0);

  auto ns = client_->OpenNamespace(Options("fp8"));
  ASSERT_TRUE(ns.ok());
  const absl::Status half = client_->Put(ns->id, {"h"}, {Block(4).substr(0, kBlock / 2)});
  EXPECT_EQ(half.code(), absl::StatusCode::kInvalidArgument) << half;
  EXPECT_EQ(client_->Get(ns->id, {"h"}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Status(ns->id).fp8_values(), 0u);
}

}  // namespace
}  // namespace kvtier
