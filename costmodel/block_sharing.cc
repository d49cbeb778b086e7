#include "costmodel/block_sharing.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace kvtier::costmodel {
namespace {

using nlohmann::json;

// Interns (parent, content) pairs as node ids.
template <typename Content>
class ChainInterner {
 public:
  explicit ChainInterner(PromptSet* set) : set_(set) {}
  uint32_t Node(uint32_t parent_plus_one, Content content) {
    auto [it, inserted] = ids_.try_emplace({parent_plus_one, std::move(content)}, set_->node_count);
    if (inserted) {
      ++set_->node_count;
      set_->parent.push_back(parent_plus_one);
    }
    return it->second;
  }

 private:
  PromptSet* set_;
  std::map<std::pair<uint32_t, Content>, uint32_t> ids_;
};

absl::StatusOr<std::vector<int64_t>> IntList(const json& v, size_t line, const char* what) {
  std::vector<int64_t> out;
  if (!v.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", what, " is not a list"));
  }
  for (const json& e : v) {
    if (!e.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line, ": ", what, " holds a non-integer ", e.dump()));
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

}  // namespace

absl::StatusOr<PromptSet> ParsePrompts(absl::string_view jsonl, uint32_t block_tokens,
                                       uint32_t trace_block_tokens) {
  if (block_tokens == 0 || trace_block_tokens == 0) {
    return absl::InvalidArgumentError("block size must be >= 1");
  }
  PromptSet set;
  set.block_tokens = block_tokens;
  ChainInterner<std::vector<int64_t>> tokens_interner(&set);
  ChainInterner<int64_t> hash_interner(&set);
  bool saw_tokens = false;
  size_t line_no = 0;
  for (absl::string_view line : absl::StrSplit(jsonl, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    json v = json::parse(line.begin(), line.end(), nullptr, false);
    if (v.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": not valid JSON"));
    }
    PromptChain chain;
    if (v.is_object() && v.contains("hash_ids")) {
      ASSIGN_OR_RETURN(auto ids, IntList(v.at("hash_ids"), line_no, "hash_ids"));
      if (!v.contains("input_length") || !v.at("input_length").is_number_integer() ||
          v.at("input_length").get<int64_t>() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("line ", line_no, ": a hash_ids record needs input_length >= 0"));
      }
      const uint64_t len = v.at("input_length").get<uint64_t>();
      const uint64_t full = len / trace_block_tokens;
      if (ids.size() < full || ids.size() > full + 1) {
        return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", ids.size(),
                                                       " hash_ids do not cover input_length ", len,
                                                       " in blocks of ", trace_block_tokens));
      }
      uint32_t parent = 0;
      for (uint64_t i = 0; i < full; ++i) {
        const uint32_t id = hash_interner.Node(parent, ids[i]);
        chain.blocks.push_back(id);
        parent = id + 1;
      }
      chain.partial_tail = ids.size() > full;
      set.from_trace_hash_ids = true;
      set.block_tokens = trace_block_tokens;
    } else {
      const json& tokens = v.is_object() && v.contains("tokens") ? v.at("tokens") : v;
      ASSIGN_OR_RETURN(auto list, IntList(tokens, line_no, "the token list"));
      saw_tokens = true;
      uint32_t parent = 0;
      const size_t full = list.size() / block_tokens;
      for (size_t i = 0; i < full; ++i) {
        std::vector<int64_t> block(list.begin() + i * block_tokens,
                                   list.begin() + (i + 1) * block_tokens);
        const uint32_t id = tokens_interner.Node(parent, std::move(block));
        chain.blocks.push_back(id);
        parent = id + 1;
      }
      chain.partial_tail = list.size() % block_tokens != 0;
    }
    set.prompts.push_back(std::move(chain));
  }
  if (saw_tokens && set.from_trace_hash_ids) {
    return absl::InvalidArgumentError("mix of token lists and hash_ids records in one file");
  }
  if (set.prompts.empty()) return absl::InvalidArgumentError("no prompts in the file");
  return set;
}

SharingReport AnalyzeSharing(const PromptSet& set, uint32_t samples) {
  SharingReport r;
  const uint64_t n = samples == 0 ? 1 : samples;
  r.prompts = set.prompts.size();
  for (const PromptChain& p : set.prompts) {
    const uint64_t blocks = p.blocks.size() + (p.partial_tail ? 1 : 0);
    r.blocks_without_sharing += n * blocks;
    if (p.partial_tail) {
      ++r.partial_blocks;
      r.cow_copies += n - 1;
    }
  }
  r.blocks_with_sharing = set.node_count + r.partial_blocks + r.cow_copies;
  r.saving_fraction =
      r.blocks_without_sharing == 0
          ? 0
          : 1.0 - static_cast<double>(r.blocks_with_sharing) / r.blocks_without_sharing;
  return r;
}

namespace {

class EvictionSim {
 public:
  EvictionSim(const PromptSet& set, uint64_t capacity, bool leaf_first)
      : set_(set),
        capacity_(capacity),
        leaf_first_(leaf_first),
        cached_(set.node_count, false),
        last_use_(set.node_count, 0),
        cached_children_(set.node_count, 0),
        // Stranded counts cost O(nodes): sample so a replay stays ~1e8 steps.
        stride_(std::max<uint64_t>(
            1, static_cast<uint64_t>(set.prompts.size()) * set.node_count / 100000000)) {}

  EvictionReport Run() {
    for (size_t i = 0; i < set_.prompts.size(); ++i) {
      const PromptChain& p = set_.prompts[i];
      report_.lookups += p.blocks.size();
      for (uint32_t id : p.blocks) {
        if (!cached_[id]) break;
        ++report_.hits;
      }
      for (uint32_t id : p.blocks) {
        // Leaf-first caching keeps the cached set prefix-closed: a block whose
        // parent was just evicted is not cached (it could never be reached).
        if (leaf_first_ && Parent(id) != 0 && !cached_[Parent(id) - 1]) break;
        Touch(id);
      }
      if (i % stride_ == 0) {
        report_.stranded_blocks_peak = std::max(report_.stranded_blocks_peak, Stranded());
      }
    }
    report_.stranded_blocks_final = Stranded();
    report_.stranded_blocks_peak =
        std::max(report_.stranded_blocks_peak, report_.stranded_blocks_final);
    return report_;
  }

 private:
  uint32_t Parent(uint32_t id) const { return set_.parent[id]; }  // id + 1, 0 = root

  void Touch(uint32_t id) {
    if (cached_[id]) {
      Forget(id);
    } else {
      cached_[id] = true;
      ++size_;
      if (Parent(id) != 0) {
        const uint32_t parent = Parent(id) - 1;
        if (cached_children_[parent]++ == 0 && cached_[parent]) {
          leaves_.erase({last_use_[parent], parent});
        }
      }
    }
    last_use_[id] = ++clock_;
    Remember(id);
    while (size_ > capacity_) {
      const auto& pool = leaf_first_ ? leaves_ : all_;
      if (pool.empty()) break;
      Evict(pool.begin()->second);
    }
  }

  void Remember(uint32_t id) {
    all_.insert({last_use_[id], id});
    if (cached_children_[id] == 0) leaves_.insert({last_use_[id], id});
  }
  void Forget(uint32_t id) {
    all_.erase({last_use_[id], id});
    leaves_.erase({last_use_[id], id});
  }

  void Evict(uint32_t id) {
    Forget(id);
    cached_[id] = false;
    --size_;
    ++report_.evictions;
    if (Parent(id) != 0) {
      const uint32_t parent = Parent(id) - 1;
      if (--cached_children_[parent] == 0 && cached_[parent]) {
        leaves_.insert({last_use_[parent], parent});
      }
    }
  }

  // Node ids are assigned parents first, so one pass in id order suffices.
  uint64_t Stranded() const {
    std::vector<bool> reachable(set_.node_count, false);
    uint64_t stranded = 0;
    for (uint32_t id = 0; id < set_.node_count; ++id) {
      if (!cached_[id]) continue;
      reachable[id] = Parent(id) == 0 || reachable[Parent(id) - 1];
      if (!reachable[id]) ++stranded;
    }
    return stranded;
  }

  const PromptSet& set_;
  const uint64_t capacity_;
  const bool leaf_first_;
  std::vector<bool> cached_;
  std::vector<uint64_t> last_use_;
  std::vector<uint32_t> cached_children_;
  const uint64_t stride_;
  std::set<std::pair<uint64_t, uint32_t>> all_, leaves_;
  uint64_t size_ = 0;
  uint64_t clock_ = 0;
  EvictionReport report_;
};

}  // namespace

EvictionReport SimulateEviction(const PromptSet& set, uint64_t capacity_blocks, bool leaf_first) {
  return EvictionSim(set, capacity_blocks, leaf_first).Run();
}

}  // namespace kvtier::costmodel
