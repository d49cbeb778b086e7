#include "storage/transfer_meter.h"

#include <algorithm>

namespace kvtier {

void TransferMeter::Seed(double bytes_per_s, double latency_s, std::string source) {
  MutexLock lock(&mu_);
  estimate_ = TransferEstimate{bytes_per_s, latency_s, 0, std::move(source)};
}

void TransferMeter::Record(uint64_t bytes, absl::Duration elapsed) {
  if (bytes == 0) return;
  MutexLock lock(&mu_);
  const double seconds = absl::ToDoubleSeconds(elapsed);
  const double transfer =
      std::max(seconds - estimate_.latency_s, std::max(estimate_.latency_s / 2, 1e-9));
  const double sample = static_cast<double>(bytes) / transfer;
  if (estimate_.bytes_per_s <= 0) {
    estimate_.bytes_per_s = sample;
    estimate_.source = "transfers";
  } else {
    estimate_.bytes_per_s = (1 - alpha_) * estimate_.bytes_per_s + alpha_ * sample;
  }
  ++estimate_.samples;
}

TransferEstimate TransferMeter::Estimate() const {
  MutexLock lock(&mu_);
  return estimate_;
}

}  // namespace kvtier
