#include "server/heap_tuning.h"

#include <malloc.h>

#include "absl/strings/str_cat.h"

namespace kvtier {

absl::Status TuneHeapForMessages() {
  struct Setting {
    int param;
    const char* name;
    int value;
  };
  constexpr Setting kSettings[] = {
      {M_MMAP_THRESHOLD, "M_MMAP_THRESHOLD", 32 << 20},  // glibc's largest on 64-bit
      {M_TRIM_THRESHOLD, "M_TRIM_THRESHOLD", 256 << 20},
      {M_TOP_PAD, "M_TOP_PAD", 16 << 20},
  };
  absl::Status status;
  for (const Setting& s : kSettings) {
    if (mallopt(s.param, s.value) != 1) {
      status.Update(
          absl::InternalError(absl::StrCat("mallopt(", s.name, ", ", s.value, ") refused")));
    }
  }
  return status;
}

}  // namespace kvtier
