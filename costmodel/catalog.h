// The built-in catalog: models, GPUs, links and SSDs with the published
// figures the planner starts from. Each value cites its public source in
// catalog.cc. Lookups are by lowercase name ("llama-3.1-8b", "h100-sxm").
//
// Thread-safety: the catalog is immutable; all functions are thread-safe.
#ifndef KVTIER_COSTMODEL_CATALOG_H_
#define KVTIER_COSTMODEL_CATALOG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "costmodel/hardware.h"
#include "costmodel/model_spec.h"

namespace kvtier::costmodel {

// NOT_FOUND listing the known names.
absl::StatusOr<ModelSpec> CatalogModel(absl::string_view name);
absl::StatusOr<GpuSpec> CatalogGpu(absl::string_view name);
absl::StatusOr<LinkSpec> CatalogLink(absl::string_view name);
absl::StatusOr<SsdSpec> CatalogSsd(absl::string_view name);

std::vector<std::string> CatalogModelNames();
std::vector<std::string> CatalogGpuNames();
std::vector<LinkSpec> CatalogLinks();
std::vector<std::string> CatalogSsdNames();

// The catalog GPU whose name matches a device name reported by the driver
// (e.g. "NVIDIA H100 80GB HBM3" -> h100-sxm); NOT_FOUND if none does.
absl::StatusOr<GpuSpec> CatalogGpuForDevice(absl::string_view device_name);

}  // namespace kvtier::costmodel

#endif  // KVTIER_COSTMODEL_CATALOG_H_
