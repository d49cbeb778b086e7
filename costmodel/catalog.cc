#include "costmodel/catalog.h"

#include <algorithm>
#include <cctype>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvtier::costmodel {

double PeakFlops(const GpuSpec& gpu, bool fp8) {
  return fp8 && gpu.fp8_flops > 0 ? gpu.fp8_flops : gpu.bf16_flops;
}

namespace {

constexpr double kMiB = 1024.0 * 1024;

ModelSpec Dense(std::string name, uint32_t layers, uint32_t hidden, uint32_t heads,
                uint32_t kv_heads, uint32_t head_dim, uint32_t intermediate, uint32_t vocab,
                bool tied, double published_total) {
  ModelSpec m = DenseModel(std::move(name), layers, hidden, heads, kv_heads, head_dim, intermediate,
                           vocab, tied);
  m.published_total_params = published_total;
  return m;
}

std::vector<ModelSpec> Models() {
  std::vector<ModelSpec> out;
  // Source: meta-llama/Llama-3.1-8B config.json (32 layers, hidden 4096, 32
  // heads, 8 KV heads, intermediate 14336, vocab 128256, untied); 8.03 B
  // parameters per the Llama 3.1 model card.
  out.push_back(Dense("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256, false, 8.03e9));
  // Source: meta-llama/Llama-3.1-70B config.json (80 layers, hidden 8192, 64
  // heads, 8 KV heads, intermediate 28672); 70.6 B per the model card.
  out.push_back(Dense("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256, false, 70.6e9));
  // Source: meta-llama/Llama-3.2-1B config.json (16 layers, hidden 2048, 32
  // heads, 8 KV heads, head_dim 64, intermediate 8192, tied embeddings);
  // 1.23 B per the Llama 3.2 model card.
  out.push_back(Dense("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, true, 1.23e9));
  // Source: Qwen/Qwen2.5-7B config.json (28 layers, hidden 3584, 28 heads, 4
  // KV heads, intermediate 18944, vocab 152064, untied); 7.61 B per the model
  // card. The QKV biases (0.5 M) are left out of the formula.
  out.push_back(Dense("qwen2.5-7b", 28, 3584, 28, 4, 128, 18944, 152064, false, 7.61e9));
  {
    // Source: deepseek-ai/DeepSeek-V3 config.json (61 layers, hidden 7168,
    // 128 heads, q_lora_rank 1536, kv_lora_rank 512, rope 64, nope 128, v 128,
    // dense intermediate 18432, 256 routed experts of 2048, 8 per token, 1
    // shared, first 3 layers dense, vocab 129280); 671 B total / 37 B active
    // per the DeepSeek-V3 technical report (arXiv 2412.19437), without the
    // 14 B multi-token-prediction module. Weights are FP8 (1 byte).
    ModelSpec m = Dense("deepseek-v3", 61, 7168, 128, 128, 192, 18432, 129280, false, 671e9);
    m.mla = MlaShape{1536, 512, 64, 128, 128};
    m.moe = MoeShape{256, 8, 1, 2048, 3};
    m.weight_bytes_per_param = 1;
    m.published_active_params = 37e9;
    out.push_back(std::move(m));
  }
  {
    // Source: openai/gpt-oss-120b config.json (36 layers alternating
    // sliding_attention (window 128) and full_attention, hidden 2880, 64
    // heads, 8 KV heads, head_dim 64, 128 experts of 2880, 4 per token, vocab
    // 201088, untied); 116.83 B total / 5.13 B active per the gpt-oss model
    // card (arXiv 2508.10925), table 1. Experts ship in MXFP4 (4.25 bits) and
    // the rest in bf16: 0.557 bytes per parameter on average (~65 GB).
    ModelSpec m = Dense("gpt-oss-120b", 36, 2880, 64, 8, 64, 2880, 201088, false, 116.83e9);
    m.moe = MoeShape{128, 4, 0, 2880, 0};
    m.groups = {{LayerKind::kSlidingWindow, 18, 128}, {LayerKind::kFullAttention, 18, 0}};
    m.weight_bytes_per_param = 0.557;
    m.published_active_params = 5.13e9;
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<GpuSpec> Gpus() {
  return {
      // Memory is the total nvidia-smi reports (what an engine can size
      // against), e.g. 81559 MiB on an H100 SXM 80GB; the datasheet figure is
      // in each comment.
      // Source: NVIDIA H100 Tensor Core GPU datasheet, SXM column: 80 GB
      // HBM3, 3.35 TB/s, BF16 1,979 TFLOPS and FP8 3,958 TFLOPS with
      // sparsity (half dense), PCIe Gen5 128 GB/s (64 GB/s per direction).
      {"h100-sxm", 81559 * kMiB, 989.4e12, 1978.9e12, 3.35e12, 64e9, "pcie5"},
      // Source: NVIDIA H200 datasheet, SXM: 141 GB HBM3e, 4.8 TB/s, same
      // tensor-core peaks as H100 SXM, PCIe Gen5.
      {"h200", 143771 * kMiB, 989.4e12, 1978.9e12, 4.8e12, 64e9, "pcie5"},
      // Source: NVIDIA A100 datasheet, 80 GB SXM: HBM2e 2,039 GB/s, BF16 312
      // TFLOPS dense, no FP8, PCIe Gen4 64 GB/s (32 GB/s per direction).
      {"a100-80gb", 81920 * kMiB, 312e12, 0, 2.039e12, 32e9, "pcie4"},
      // Source: NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s, BF16 362.05
      // TFLOPS and FP8 733 TFLOPS dense, PCIe Gen4 x16.
      {"l40s", 46068 * kMiB, 362.05e12, 733e12, 864e9, 32e9, "pcie4"},
      // Source: NVIDIA HGX B200 datasheet (8 GPUs): 1,440 GB HBM3e and 64 TB/s
      // in all, FP8 72 PFLOPS and BF16 36 PFLOPS with sparsity; per GPU 180
      // GB, 8 TB/s, 4.5 PFLOPS FP8 and 2.25 PFLOPS BF16 dense. Host link
      // PCIe Gen5 x16 in HGX systems.
      {"b200", 183359 * kMiB, 2.25e15, 4.5e15, 8e12, 64e9, "pcie5"},
  };
}

std::vector<LinkSpec> Links() {
  return {
      // PCIe 4.0 x16: 16 GT/s per lane x 16 lanes = 32 GB/s per direction, as
      // NVIDIA's datasheets count it (PCI-SIG PCIe 4.0; 128b/130b encoding
      // leaves 31.5); ~5 us per DMA copy launch (cudaMemcpyAsync overhead,
      // CUDA C++ Best Practices Guide).
      {"pcie4", 32e9, 5e-6, "PCIe 4.0 x16"},
      // PCIe 5.0 x16: 32 GT/s per lane = 64 GB/s per direction (PCI-SIG 5.0;
      // the GPU datasheets' "128 GB/s" counts both directions).
      {"pcie5", 64e9, 5e-6, "PCIe 5.0 x16"},
      // Ethernet/InfiniBand NICs: line rate / 8. RDMA one-way latency of a
      // few microseconds (NVIDIA ConnectX-7 product brief: sub-microsecond
      // port-to-port; ~3 us end to end through verbs is typical).
      {"nic-100g", 12.5e9, 3e-6, "100 Gb/s NIC (ConnectX-6)"},
      {"nic-200g", 25e9, 3e-6, "200 Gb/s NIC (ConnectX-6/7)"},
      {"nic-400g", 50e9, 3e-6, "400 Gb/s NIC (ConnectX-7)"},
      // NVLink 4 (H100): 900 GB/s total per GPU = 450 GB/s per direction
      // (NVIDIA H100 datasheet).
      {"nvlink4", 450e9, 2e-6, "NVLink 4, 18 links (H100/H200)"},
  };
}

std::vector<SsdSpec> Ssds() {
  return {
      // Source: Samsung PM9A3 U.2 datasheet, 3.84 TB: 1 DWPD for 5 years,
      // sequential read 6,900 MB/s, write 4,100 MB/s.
      {"samsung-pm9a3-3.84tb", 3.84e12, 1, 5, 6.9e9, 4.1e9, 90e-6},
      // Source: Micron 7450 product brief, PRO 3.84 TB U.3: 1 DWPD, 5 years,
      // 6,800 MB/s read, 5,300 MB/s write.
      {"micron-7450-pro-3.84tb", 3.84e12, 1, 5, 6.8e9, 5.3e9, 80e-6},
      // Source: Micron 7450 product brief, MAX 3.2 TB U.3: 3 DWPD, 5 years.
      {"micron-7450-max-3.2tb", 3.2e12, 3, 5, 6.8e9, 5.3e9, 80e-6},
      // Source: Solidigm D7-P5520 product brief, 3.84 TB: 1 DWPD, 5 years,
      // 7,100 MB/s read, 4,200 MB/s write.
      {"solidigm-d7-p5520-3.84tb", 3.84e12, 1, 5, 7.1e9, 4.2e9, 90e-6},
      // Source: Samsung 990 PRO datasheet, 2 TB (client drive): 1,200 TBW over
      // a 5-year warranty = 0.33 DWPD; 7,450 MB/s read, 6,900 MB/s write.
      {"samsung-990pro-2tb", 2e12, 1200e12 / (2e12 * 365 * 5), 5, 7.45e9, 6.9e9, 60e-6},
  };
}

template <typename T>
absl::StatusOr<T> FindByName(const std::vector<T>& all, absl::string_view name,
                             absl::string_view what) {
  const std::string want = absl::AsciiStrToLower(name);
  std::vector<std::string> names;
  for (const T& t : all) {
    if (t.name == want) return t;
    names.push_back(t.name);
  }
  return absl::NotFoundError(absl::StrCat("unknown ", what, " '", name,
                                          "'; the catalog has: ", absl::StrJoin(names, ", ")));
}

template <typename T>
std::vector<std::string> Names(const std::vector<T>& all) {
  std::vector<std::string> names;
  for (const T& t : all) names.push_back(t.name);
  return names;
}

}  // namespace

absl::StatusOr<ModelSpec> CatalogModel(absl::string_view name) {
  return FindByName(Models(), name, "model");
}
absl::StatusOr<GpuSpec> CatalogGpu(absl::string_view name) {
  return FindByName(Gpus(), name, "GPU");
}
absl::StatusOr<LinkSpec> CatalogLink(absl::string_view name) {
  return FindByName(Links(), name, "link");
}
absl::StatusOr<SsdSpec> CatalogSsd(absl::string_view name) {
  return FindByName(Ssds(), name, "SSD");
}
std::vector<std::string> CatalogModelNames() { return Names(Models()); }
std::vector<std::string> CatalogGpuNames() { return Names(Gpus()); }
std::vector<LinkSpec> CatalogLinks() { return Links(); }
std::vector<std::string> CatalogSsdNames() { return Names(Ssds()); }

absl::StatusOr<GpuSpec> CatalogGpuForDevice(absl::string_view device_name) {
  const std::string d = absl::AsciiStrToLower(device_name);
  // Most specific first: "H100" also matches H100 PCIe/NVL, which differ;
  // only the SXM part is in the catalog, so PCIe/NVL names are not matched.
  const std::pair<const char*, const char*> rules[] = {
      {"h200", "h200"},           {"b200", "b200"},
      {"l40s", "l40s"},           {"a100-sxm4-80gb", "a100-80gb"},
      {"a100 80gb", "a100-80gb"},
  };
  for (const auto& [needle, name] : rules) {
    if (absl::StrContains(d, needle)) return CatalogGpu(name);
  }
  if (absl::StrContains(d, "h100") && !absl::StrContains(d, "pcie") &&
      !absl::StrContains(d, "nvl")) {
    return CatalogGpu("h100-sxm");
  }
  return absl::NotFoundError(
      absl::StrCat("no catalog GPU matches device '", device_name,
                   "'; set costmodel.gpu to one of: ", absl::StrJoin(Names(Gpus()), ", ")));
}

}  // namespace kvtier::costmodel
