// GPU-resident engine memory over real gRPC, on any machine: RegisterMemory
// with cuda_ipc goes through the daemon's CUDA IPC importer and Save/Load
// through its copy engine. Here both are test doubles (DaemonSeams): the
// "GPU tensors" are host buffers and the engine copies them with memcpy, so
// the daemon's device data path (per-layer tensors addressed end to end,
// chunk segments, batch completions, failed copies) runs in CI. With the
// real importer, this build's answer (no GPU, or no CUDA) is checked too.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "gpu/cuda_ipc_region.h"
#include "gpu/device_pool.h"
#include "gpu/device_region.h"
#include "gpu/gpu_probe.h"
#include "kvtier/v1/admin.grpc.pb.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "testing/test_bytes.h"
#include "testing/test_copy_engine.h"
#include "testing/test_daemon_config.h"
#include "testing/test_device_allocator.h"

namespace kvtier {
namespace {

constexpr int kLayers = 4;
constexpr uint64_t kChunk = 16 * 1024;             // one layer's K or V of a block
constexpr uint64_t kBlock = 2 * kLayers * kChunk;  // 128 KiB
constexpr int kEngineBlocks = 8;
constexpr uint64_t kTensor = 2 * kEngineBlocks * kChunk;  // [2, blocks, chunk]

class DeviceRegionRpcTest : public ::testing::Test {
 protected:
  void Start(bool fake_gpu) {
    DaemonConfig c = TestDaemonConfig(16ull << 20, 2ull << 20, 1ull << 20);
    DaemonSeams seams;
    if (fake_gpu) {
      auto engine = std::make_unique<FakeDeviceEngine>();
      engine_ = engine.get();
      seams.copy_engine = std::move(engine);
      // A GPU tier of 8 block slots in "device" memory.
      auto pool =
          DevicePool::Create(0, 8 * kBlock, kBlock, std::make_unique<HostDeviceAllocator>());
      ASSERT_TRUE(pool.ok()) << pool.status();
      seams.gpu_tier = *std::move(pool);
      // The handle's first byte names the test tensor it shares.
      seams.open_cuda_ipc =
          [this](const CudaIpcSpec& spec) -> absl::StatusOr<std::unique_ptr<MemoryRegion>> {
        RETURN_IF_ERROR(ValidateCudaIpcSpec(spec));
        std::vector<DeviceRegion::Tensor> tensors;
        for (const CudaIpcTensorSpec& t : spec.tensors) {
          const size_t i = static_cast<uint8_t>(t.handle[0]);
          if (i >= tensors_.size() || t.offset + t.size > tensors_[i].size()) {
            return absl::InvalidArgumentError("no such test tensor");
          }
          tensors.push_back({tensors_[i].data() + t.offset, t.size});
        }
        ++opened_;
        return std::unique_ptr<MemoryRegion>(new DeviceRegion(
            spec.device, std::move(tensors), "test GPU memory", [this] { ++closed_; }));
      };
    }
    auto d = Daemon::Start(c, std::move(seams));
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = std::move(*d);
    auto channel =
        grpc::CreateChannel(daemon_->listen_address(), grpc::InsecureChannelCredentials());
    kv_ = v1::KvCache::NewStub(channel);
    admin_ = v1::Admin::NewStub(channel);
    v1::OpenNamespaceRequest open;
    open.set_model_id("gpu-model");
    auto* l = open.mutable_layout();
    l->set_num_layers(kLayers);
    l->set_num_kv_heads(1);
    l->set_head_dim(128);
    l->set_dtype(v1::DTYPE_BF16);
    l->set_tokens_per_block(64);  // 64 * 128 * 2 bytes = 16 KiB per layer's K
    l->set_tp_size(1);
    grpc::ClientContext ctx;
    v1::OpenNamespaceResponse resp;
    ASSERT_TRUE(kv_->OpenNamespace(&ctx, open, &resp).ok());
    ns_ = resp.namespace_id();
    ASSERT_EQ(resp.block_bytes(), kBlock);
    tensors_.assign(kLayers, std::vector<uint8_t>(kTensor, 0));
  }

  // vLLM's per-layer tensors, one IPC handle each.
  grpc::Status RegisterLayers(int tensors, std::string* id) {
    v1::RegisterMemoryRequest req;
    auto* ipc = req.mutable_region()->mutable_cuda_ipc();
    for (int i = 0; i < tensors; ++i) {
      auto* t = ipc->add_tensors();
      std::string handle(kCudaIpcHandleBytes, '\0');
      handle[0] = static_cast<char>(i);
      t->set_handle(handle);
      t->set_size_bytes(kTensor);
    }
    v1::RegisterMemoryResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = kv_->RegisterMemory(&ctx, req, &resp);
    if (s.ok()) {
      *id = resp.region_id();
      EXPECT_EQ(resp.size_bytes(), tensors * kTensor);
    }
    return s;
  }

  // Engine block `b` of the layer tensors as 2L segments (layer, K/V).
  static void AddSegments(v1::BlockRef* r, int b) {
    for (int l = 0; l < kLayers; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        auto* seg = r->add_segments();
        seg->set_offset(l * kTensor + (kv * kEngineBlocks + b) * kChunk);
        seg->set_size_bytes(kChunk);
      }
    }
  }

  // Writes block `key`'s bytes into engine block b, chunk by chunk.
  void WriteEngineBlock(int key, int b) {
    const std::vector<uint8_t> bytes = DeterministicBytes(absl::StrCat("g", key), kBlock);
    for (int c = 0; c < 2 * kLayers; ++c) {
      std::memcpy(tensors_[c / 2].data() + ((c % 2) * kEngineBlocks + b) * kChunk,
                  bytes.data() + c * kChunk, kChunk);
    }
  }
  bool EngineBlockHolds(int key, int b) {
    const std::vector<uint8_t> bytes = DeterministicBytes(absl::StrCat("g", key), kBlock);
    for (int c = 0; c < 2 * kLayers; ++c) {
      if (std::memcmp(tensors_[c / 2].data() + ((c % 2) * kEngineBlocks + b) * kChunk,
                      bytes.data() + c * kChunk, kChunk) != 0) {
        return false;
      }
    }
    return true;
  }

  // Save (keys first.., engine blocks b0..) or Load; returns the status and
  // fills the completions.
  grpc::Status Transfer(bool save, const std::string& region, int first, int n, int b0,
                        std::vector<v1::BlockCompletion>* out) {
    v1::SaveRequest save_req;
    v1::LoadRequest load_req;
    for (int i = 0; i < n; ++i) {
      v1::BlockRef* r = save ? save_req.add_blocks() : load_req.add_blocks();
      r->set_key(absl::StrCat("g", first + i));
      if (save && first + i > 0) r->set_parent_key(absl::StrCat("g", first + i - 1));
      AddSegments(r, b0 + i);
    }
    save_req.set_namespace_id(ns_);
    save_req.set_region_id(region);
    load_req.set_namespace_id(ns_);
    load_req.set_region_id(region);
    grpc::ClientContext ctx;
    auto reader = save ? kv_->Save(&ctx, save_req) : kv_->Load(&ctx, load_req);
    v1::BlockCompletion c;
    while (reader->Read(&c)) out->push_back(c);
    return reader->Finish();
  }

  std::vector<std::vector<uint8_t>> tensors_;
  FakeDeviceEngine* engine_ = nullptr;
  int opened_ = 0, closed_ = 0;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::KvCache::Stub> kv_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::string ns_;

  v1::GpuInfo Gpu() {
    grpc::ClientContext ctx;
    v1::GetStatusResponse r;
    EXPECT_TRUE(admin_->GetStatus(&ctx, v1::GetStatusRequest(), &r).ok());
    return r.gpu();
  }
};

TEST_F(DeviceRegionRpcTest, SaveAndLoadPerLayerGpuTensors) {
  Start(/*fake_gpu=*/true);
  std::string region;
  ASSERT_TRUE(RegisterLayers(kLayers, &region).ok());
  EXPECT_EQ(opened_, 1);
  for (int i = 0; i < 3; ++i) WriteEngineBlock(i, i);
  std::vector<v1::BlockCompletion> out;
  ASSERT_TRUE(Transfer(true, region, 0, 3, 0, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  for (const auto& c : out) EXPECT_EQ(c.code(), 0) << c.message();
  EXPECT_EQ(engine_->batches.load(), 1);  // one gather for the group
  // Load into other engine blocks (as after preemption): one scatter batch.
  out.clear();
  ASSERT_TRUE(Transfer(false, region, 0, 3, 4, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  for (const auto& c : out) {
    EXPECT_EQ(c.code(), 0) << c.message();
    EXPECT_EQ(c.size_bytes(), kBlock);
  }
  EXPECT_EQ(engine_->batches.load(), 2);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(EngineBlockHolds(i, 4 + i)) << i;
  // That Load promoted the blocks into the GPU tier; loading them again is
  // device to device, byte-exact.
  EXPECT_EQ(Gpu().tier_promotions(), 3u);
  EXPECT_EQ(Gpu().tier_resident_bytes(), 3 * kBlock);
  EXPECT_EQ(Gpu().copy_engine(), "fake-device");
  for (int b = 4; b < 7; ++b) WriteEngineBlock(99, b);  // scribble over them
  out.clear();
  ASSERT_TRUE(Transfer(false, region, 0, 3, 4, &out).ok());
  for (const auto& c : out) EXPECT_EQ(c.code(), 0) << c.message();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(EngineBlockHolds(i, 4 + i)) << i;
  EXPECT_EQ(Gpu().tier_hits(), 3u);
  EXPECT_EQ(engine_->batches.load(), 3);

  // A failed copy into GPU memory (here from the tier) reports no block loaded.
  engine_->fail = true;
  out.clear();
  ASSERT_TRUE(Transfer(false, region, 0, 3, 4, &out).ok());
  ASSERT_EQ(out.size(), 3u);
  for (const auto& c : out) {
    EXPECT_EQ(c.code(), static_cast<int>(grpc::StatusCode::INTERNAL)) << c.message();
    EXPECT_EQ(c.size_bytes(), 0u);
  }
  engine_->fail = false;

  // Unregistering closes the IPC handles.
  grpc::ClientContext ctx;
  v1::UnregisterMemoryRequest un;
  un.set_region_id(region);
  v1::UnregisterMemoryResponse unr;
  ASSERT_TRUE(kv_->UnregisterMemory(&ctx, un, &unr).ok());
  EXPECT_EQ(closed_, 1);
}

TEST_F(DeviceRegionRpcTest, RangesMustStayInsideOneTensor) {
  Start(/*fake_gpu=*/true);
  std::string region;
  ASSERT_TRUE(RegisterLayers(2, &region).ok());
  v1::SaveRequest req;
  req.set_namespace_id(ns_);
  req.set_region_id(region);
  v1::BlockRef* r = req.add_blocks();
  r->set_key("straddle");
  r->set_offset(kTensor - kChunk / 2);  // half in tensor 0, half in tensor 1
  r->set_size_bytes(kChunk);
  grpc::ClientContext ctx;
  auto reader = kv_->Save(&ctx, req);
  v1::BlockCompletion c;
  EXPECT_FALSE(reader->Read(&c));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("straddle"), std::string::npos) << s.error_message();
  EXPECT_EQ(engine_->batches.load(), 0);
}

TEST_F(DeviceRegionRpcTest, ThisBuildsImporterSaysWhatItCanDo) {
  Start(/*fake_gpu=*/false);
  if (ProbeGpus().devices.empty()) {
    EXPECT_EQ(Gpu().tier_capacity_bytes(), 0u);
    EXPECT_FALSE(Gpu().tier_note().empty());
  }
  std::string region;
  // Malformed: a handle of the wrong size is refused before any CUDA call.
  v1::RegisterMemoryRequest bad;
  bad.mutable_region()->mutable_cuda_ipc()->add_tensors()->set_handle("short");
  bad.mutable_region()->mutable_cuda_ipc()->mutable_tensors(0)->set_size_bytes(4096);
  v1::RegisterMemoryResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = kv_->RegisterMemory(&ctx, bad, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  v1::RegisterMemoryRequest none;
  none.mutable_region()->mutable_cuda_ipc();
  grpc::ClientContext ctx2;
  EXPECT_EQ(kv_->RegisterMemory(&ctx2, none, &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  // Well-formed but bogus: without a GPU (or without CUDA) the daemon says
  // it cannot import GPU memory; with one, CUDA rejects the handle.
  s = RegisterLayers(1, &region);
  EXPECT_FALSE(s.ok());
  if (ProbeGpus().devices.empty()) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  }
}

}  // namespace
}  // namespace kvtier
