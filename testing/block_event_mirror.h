// BlockEventMirror (test-only): a BlockEventSink that replays the events it
// receives into the set of (namespace, key, medium) they describe, and
// records every event that contradicts it (a block stored twice on one
// medium, a removal of what is not there, a child before its parent).
// Comparing a mirror fed from the start with one fed by SnapshotInto checks
// that the events describe the cache's contents.
#ifndef KVTIER_TESTING_BLOCK_EVENT_MIRROR_H_
#define KVTIER_TESTING_BLOCK_EVENT_MIRROR_H_

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "storage/block_event.h"

namespace kvtier {

class BlockEventMirror final : public BlockEventSink {
 public:
  using Entry = std::tuple<std::string, std::string, Medium>;  // ns hex, key hex, medium

  void OnBlockEvent(const BlockEvent& e) override {
    MutexLock lock(&mu_);
    Apply(e);
  }
  void ApplyAll(const std::vector<BlockEvent>& events) {
    MutexLock lock(&mu_);
    for (const BlockEvent& e : events) Apply(e);
  }

  std::set<Entry> contents() const {
    MutexLock lock(&mu_);
    return contents_;
  }
  std::vector<std::string> errors() const {
    MutexLock lock(&mu_);
    return errors_;
  }
  size_t events() const {
    MutexLock lock(&mu_);
    return events_;
  }
  size_t stored(Medium m) const {
    MutexLock lock(&mu_);
    return m == Medium::kHost ? host_stored_ : nvme_stored_;
  }
  size_t removed(Medium m) const {
    MutexLock lock(&mu_);
    return m == Medium::kHost ? host_removed_ : nvme_removed_;
  }

 private:
  void Apply(const BlockEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    ++events_;
    Entry entry{e.ns.ToHex(), e.key.ToHex(), e.medium};
    const std::string what = absl::StrCat(e.key.ToHex(), " on ", MediumName(e.medium));
    if (e.kind == BlockEvent::Kind::kStored) {
      (e.medium == Medium::kHost ? host_stored_ : nvme_stored_) += 1;
      if (!contents_.insert(entry).second) errors_.push_back("stored twice: " + what);
      if (!e.parent.empty() && !HasAnywhere(e.ns.ToHex(), e.parent.ToHex())) {
        errors_.push_back("stored before its parent: " + what);
      }
    } else {
      (e.medium == Medium::kHost ? host_removed_ : nvme_removed_) += 1;
      if (contents_.erase(entry) == 0) errors_.push_back("removed but absent: " + what);
    }
  }
  bool HasAnywhere(const std::string& ns, const std::string& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return contents_.contains({ns, key, Medium::kHost}) ||
           contents_.contains({ns, key, Medium::kNvme});
  }

  mutable Mutex mu_;
  std::set<Entry> contents_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
  size_t events_ ABSL_GUARDED_BY(mu_) = 0;
  size_t host_stored_ ABSL_GUARDED_BY(mu_) = 0;
  size_t nvme_stored_ ABSL_GUARDED_BY(mu_) = 0;
  size_t host_removed_ ABSL_GUARDED_BY(mu_) = 0;
  size_t nvme_removed_ ABSL_GUARDED_BY(mu_) = 0;
};

// What `cache` holds now, as a mirror fed by a snapshot.
template <typename Cache>
std::set<BlockEventMirror::Entry> SnapshotContents(Cache& cache) {
  BlockEventMirror m;
  cache.SnapshotInto(&m, [] {});
  return m.contents();
}

}  // namespace kvtier

#endif  // KVTIER_TESTING_BLOCK_EVENT_MIRROR_H_
