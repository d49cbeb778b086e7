// Tests that need a GPU (ctest label `gpu`): they skip, saying why, where
// ProbeGpus finds none, and run in scripts/gpu-check.sh on a GPU machine.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "datapath/engine_layout.h"
#include "datapath/region_copy.h"
#include "encoding/fp8_codec.h"
#include "gpu/copy_engine_factory.h"
#include "gpu/cuda/cuda_copy_engine.h"
#include "gpu/device_pool.h"
#include "gpu/device_region.h"
#include "gpu/fp8_device.h"
#include "gpu/gpu_probe.h"
#include "storage/block_cache.h"

namespace kvtier {
namespace {

class GpuDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuInventory inv = ProbeGpus();
    if (inv.devices.empty()) GTEST_SKIP() << "needs a GPU: " << inv.detail;
  }
};

// Device memory freed at scope exit.
struct DeviceBuffer {
  explicit DeviceBuffer(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(p); }
  uint8_t* data() const { return static_cast<uint8_t*>(p); }
  void* p = nullptr;
  size_t bytes;
};

std::vector<uint8_t> Random(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST_F(GpuDeviceTest, FactoryPicksCuda) {
  absl::StatusOr<std::unique_ptr<CopyEngine>> engine = CreateCopyEngine({});
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->Capabilities().name, "cuda");
  EXPECT_TRUE((*engine)->Capabilities().device_memory);
}

TEST_F(GpuDeviceTest, GatherAndScatterThroughTheDeviceInEveryDirection) {
  auto engine = CudaCopyEngine::Create(0);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Llama-8B-like vLLM layout, 4 layers to keep it small: 8 chunks of 32 KiB.
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(EngineLayoutKind::kVllmNhd, {4, 32, 16, 8, 128, 2});
  ASSERT_TRUE(layout.ok());
  std::vector<std::vector<uint8_t>> host_tensors;
  std::vector<std::unique_ptr<DeviceBuffer>> dev_tensors;
  std::vector<void*> host_bases, dev_bases;
  for (int i = 0; i < layout->num_tensors(); ++i) {
    host_tensors.push_back(Random(layout->tensor_bytes(), 10 + i));
    dev_tensors.push_back(std::make_unique<DeviceBuffer>(layout->tensor_bytes()));
    host_bases.push_back(host_tensors.back().data());
    dev_bases.push_back(dev_tensors.back()->p);
    ASSERT_EQ(cudaMemcpy(dev_tensors.back()->p, host_tensors.back().data(), layout->tensor_bytes(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  const std::vector<int64_t> blocks = {5, 0, 31, 7};
  const size_t bytes = blocks.size() * layout->block_bytes();
  // Expected: the CPU gather of the host copy.
  std::vector<uint8_t> want(bytes);
  auto cpu = CpuCopyEngine::Create(1);
  ASSERT_TRUE(cpu.ok());
  ASSERT_TRUE((*cpu)
                  ->CopySync({MemoryKind::kHost, MemoryKind::kHost, 0,
                              *PlanGather(*layout, host_bases, blocks, want.data())})
                  .ok());
  // device tensors -> host (pinned) in one batch.
  std::vector<uint8_t> host_out(bytes);
  ASSERT_TRUE((*engine)->RegisterHost(host_out.data(), bytes).ok());
  ASSERT_TRUE((*engine)
                  ->CopySync({MemoryKind::kDevice, MemoryKind::kHost, 0,
                              *PlanGather(*layout, dev_bases, blocks, host_out.data())})
                  .ok());
  EXPECT_EQ(host_out, want);
  // device tensors -> contiguous device buffer (the kernel), then back.
  DeviceBuffer staging(bytes);
  ASSERT_TRUE((*engine)
                  ->CopySync({MemoryKind::kDevice, MemoryKind::kDevice, 0,
                              *PlanGather(*layout, dev_bases, blocks, staging.p)})
                  .ok());
  std::vector<uint8_t> from_staging(bytes);
  ASSERT_EQ(cudaMemcpy(from_staging.data(), staging.p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(from_staging, want);
  // host -> device tensors (scatter to other block ids), read back.
  const std::vector<int64_t> targets = {1, 2, 3, 4};
  ASSERT_TRUE((*engine)
                  ->CopySync({MemoryKind::kHost, MemoryKind::kDevice, 0,
                              *PlanScatter(*layout, dev_bases, targets, host_out.data())})
                  .ok());
  std::vector<uint8_t> back(bytes);
  ASSERT_TRUE((*engine)
                  ->CopySync({MemoryKind::kDevice, MemoryKind::kHost, 0,
                              *PlanGather(*layout, dev_bases, targets, back.data())})
                  .ok());
  EXPECT_EQ(back, want);
  EXPECT_TRUE((*engine)->UnregisterHost(host_out.data()).ok());
  // A batch for another GPU is refused.
  EXPECT_EQ((*engine)->CopySync({MemoryKind::kDevice, MemoryKind::kHost, 99, {}}).code(),
            absl::StatusCode::kInvalidArgument);
}

void ExpectKernelsMatchReference(EngineLayoutKind kind, KvDtype dtype, int group, int valid) {
  SCOPED_TRACE(EngineLayoutKindName(kind) + " " + KvDtypeName(dtype) +
               " G=" + std::to_string(group) + " n=" + std::to_string(valid));
  absl::StatusOr<EngineLayout> layout =
      EngineLayout::Create(kind, {3, 1, 16, 4, 64, KvDtypeBytes(dtype)});
  ASSERT_TRUE(layout.ok());
  const Fp8Format format{dtype, group, valid};
  absl::StatusOr<fp8::Geometry> geo = MakeFp8Geometry(*layout, format);
  ASSERT_TRUE(geo.ok());
  constexpr int kBlocks = 5;
  const size_t plain_bytes = layout->block_bytes(), enc_bytes = geo->encoded_bytes;
  // Normal-ish values with outliers, some subnormal-scale, a few non-finite.
  std::vector<uint8_t> plain(kBlocks * plain_bytes);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t elems = plain.size() / KvDtypeBytes(dtype);
  for (size_t i = 0; i < elems; ++i) {
    float x = normal(rng) * (i % 97 == 0 ? 300.0f : 1.0f) * (i % 13 == 0 ? 1e-6f : 1.0f);
    if (i == 77) x = std::numeric_limits<float>::infinity();
    if (i == 1234) x = std::nanf("");
    if (i == 2345) x = -std::nanf("");
    if (dtype == KvDtype::kF32) {
      std::memcpy(plain.data() + 4 * i, &x, 4);
    } else {
      const uint16_t h = dtype == KvDtype::kBf16 ? fp8::FloatToBf16(x) : fp8::FloatToFp16(x);
      std::memcpy(plain.data() + 2 * i, &h, 2);
    }
  }
  std::vector<uint8_t> want(kBlocks * enc_bytes), want_plain(plain.size());
  uint64_t want_clipped = 0;
  for (int b = 0; b < kBlocks; ++b) {
    absl::StatusOr<Fp8Stats> s = EncodeFp8Block(
        *layout, format, absl::MakeConstSpan(plain.data() + b * plain_bytes, plain_bytes),
        absl::MakeSpan(want.data() + b * enc_bytes, enc_bytes));
    ASSERT_TRUE(s.ok()) << s.status();
    want_clipped += s->clipped;
    ASSERT_TRUE(DecodeFp8Block(*layout, absl::MakeConstSpan(want.data() + b * enc_bytes, enc_bytes),
                               absl::MakeSpan(want_plain.data() + b * plain_bytes, plain_bytes))
                    .ok());
  }
  DeviceBuffer dplain(plain.size()), denc(want.size()), dout(plain.size());
  ASSERT_EQ(cudaMemcpy(dplain.p, plain.data(), plain.size(), cudaMemcpyHostToDevice), cudaSuccess);
  absl::StatusOr<Fp8Stats> stats = EncodeFp8OnDevice(0, *geo, dplain.p, denc.p, kBlocks);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->clipped, want_clipped);
  std::vector<uint8_t> got(want.size());
  ASSERT_EQ(cudaMemcpy(got.data(), denc.p, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, want) << "encoded bytes differ from the CPU reference";
  ASSERT_TRUE(DecodeFp8OnDevice(0, *geo, denc.p, dout.p, kBlocks).ok());
  std::vector<uint8_t> got_plain(plain.size());
  ASSERT_EQ(cudaMemcpy(got_plain.data(), dout.p, got_plain.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(got_plain, want_plain) << "decoded bytes differ from the CPU reference";
}

TEST_F(GpuDeviceTest, Fp8KernelsMatchTheCpuReferenceBitForBit) {
  for (EngineLayoutKind kind :
       {EngineLayoutKind::kVllmNhd, EngineLayoutKind::kVllmHnd, EngineLayoutKind::kCrossLayer,
        EngineLayoutKind::kSglangPageFirst}) {
    ExpectKernelsMatchReference(kind, KvDtype::kBf16, 16, 0);
  }
  ExpectKernelsMatchReference(EngineLayoutKind::kVllmNhd, KvDtype::kFp16, 4, 13);
  ExpectKernelsMatchReference(EngineLayoutKind::kVllmHnd, KvDtype::kF32, 8, 11);
  ExpectKernelsMatchReference(EngineLayoutKind::kSglangPageFirst, KvDtype::kBf16, 5, 16);
}

// The daemon's GPU data path on a real GPU: Save out of device memory, Load
// into device memory (host to device, promoting into a cudaMalloc'd GPU
// tier), Load again (device to device from the tier), byte-exact each time.
TEST_F(GpuDeviceTest, RegionCopiesThroughTheGpuTier) {
  SystemClock clock;
  BlockCacheOptions o;
  o.host_bytes = 64 << 20;
  o.slab_bytes = 8 << 20;
  o.max_block_bytes = 2 << 20;
  std::unique_ptr<BlockCache> cache = *BlockCache::Create(o, &clock);
  const NamespaceId ns =
      cache->OpenNamespace({"m", KvLayout{32, 8, 128, DType::kBf16, 16, 0, 1}, "", "", "", {}})->id;
  constexpr uint64_t kBlock = 2 << 20;
  auto engine = CudaCopyEngine::Create(0);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto pool = DevicePool::Create(0, 8 * kBlock, kBlock, CudaDeviceAllocator());
  ASSERT_TRUE(pool.ok()) << pool.status();
  const std::vector<uint8_t> bytes = Random(4 * kBlock, 77);
  DeviceBuffer src_mem(bytes.size()), dst_mem(bytes.size());
  ASSERT_EQ(cudaMemcpy(src_mem.p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  DeviceRegion src(0, {{src_mem.data(), bytes.size()}}, "src", nullptr);
  DeviceRegion dst(0, {{dst_mem.data(), bytes.size()}}, "dst", nullptr);
  std::vector<RegionBlock> blocks;
  for (int i = 0; i < 4; ++i) {
    blocks.push_back({*BlockKey::Create(absl::StrCat("g", i)),
                      i ? *BlockKey::Create(absl::StrCat("g", i - 1)) : BlockKey(),
                      i * kBlock,
                      kBlock,
                      {}});
  }
  int ok = 0;
  auto sink = [&](const BlockOutcome& b) {
    ok += b.status.ok();
    return true;
  };
  const KeepGoing go = [] { return true; };
  ASSERT_TRUE(SaveFromRegion(*cache, ns, src, blocks, sink, go, engine->get()).ok());
  EXPECT_EQ(ok, 4);
  for (int round = 0; round < 2; ++round) {
    ok = 0;
    ASSERT_EQ(cudaMemset(dst_mem.p, 0, bytes.size()), cudaSuccess);
    ASSERT_TRUE(
        LoadIntoRegion(*cache, ns, dst, blocks, sink, go, engine->get(), nullptr, pool->get())
            .ok());
    EXPECT_EQ(ok, 4) << "round " << round;
    std::vector<uint8_t> back(bytes.size());
    ASSERT_EQ(cudaMemcpy(back.data(), dst_mem.p, back.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(back, bytes) << "round " << round;
  }
  EXPECT_EQ((*pool)->stats().promotions, 4u);
  EXPECT_EQ((*pool)->stats().hits, 4u);
}

}  // namespace
}  // namespace kvtier
