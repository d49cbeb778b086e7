// Hardware specs the cost model reads: GPUs, links and SSDs. Values come from
// the catalog (catalog.h) or from flags; every figure is a peak from a
// datasheet unless its field says otherwise.
//
// Thread-safety: plain values.
#ifndef KVTIER_COSTMODEL_HARDWARE_H_
#define KVTIER_COSTMODEL_HARDWARE_H_

#include <string>

namespace kvtier::costmodel {

struct GpuSpec {
  std::string name;
  double memory_bytes = 0;
  double bf16_flops = 0;  // dense (no sparsity) FLOP/s
  double fp8_flops = 0;   // dense FLOP/s; 0 = no FP8 tensor cores
  double hbm_bytes_per_s = 0;
  double host_link_bytes_per_s = 0;  // per direction
  std::string host_link;             // e.g. "pcie5"
};

// A point-to-point link: bandwidth per direction and one-way latency.
struct LinkSpec {
  std::string name;
  double bytes_per_s = 0;
  double latency_s = 0;
  std::string description;
};

struct SsdSpec {
  std::string name;
  double capacity_bytes = 0;
  double dwpd = 0;  // drive writes per day over the warranty
  double warranty_years = 0;
  double read_bytes_per_s = 0;  // sequential
  double write_bytes_per_s = 0;
  double read_latency_s = 100e-6;  // a 4 KiB random read, typical
};

// Peak FLOP/s for a compute dtype ("bf16" or "fp8"); falls back to bf16 on a
// GPU without FP8.
double PeakFlops(const GpuSpec& gpu, bool fp8);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_HARDWARE_H_
