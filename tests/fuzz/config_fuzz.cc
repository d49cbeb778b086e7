// libFuzzer target: the daemon's YAML configuration (a file operators
// edit by hand). Properties: no crash or sanitizer report on any input; a
// config that applies and validates prints as YAML that reads back to the
// same configuration.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvtier;
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  DaemonConfig c = DefaultConfig(uint64_t{16} << 30, uint64_t{100} << 30);
  if (!ApplyYaml(yaml, &c).ok() || !ValidateConfig(c).ok()) return 0;
  const std::string printed = ConfigToYaml(c);
  DaemonConfig d = DefaultConfig(uint64_t{64} << 30);
  if (!ApplyYaml(printed, &d).ok() || ConfigToYaml(d) != printed) std::abort();
  return 0;
}
