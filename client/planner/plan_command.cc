#include "client/planner/plan_command.h"

#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "client/planner/planner_reports.h"
#include "costmodel/catalog.h"
#include "costmodel/hf_config.h"
#include "costmodel/kv_footprint.h"

namespace kvtier::planner {
namespace {

using costmodel::Deployment;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A finite number in [lo, hi] ((lo, hi] when lo_open): NaN, inf and values
// out of range are usage errors, never silently ignored.
CLI::Validator Num(double lo, double hi, bool lo_open) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v < lo || (lo_open && v == lo) ||
            v > hi) {
          return absl::StrCat("'", text, "' is not a number in ", lo_open ? "(" : "[", lo, ", ", hi,
                              "]");
        }
        return "";
      },
      "NUMBER");
}

class PlanCommandImpl final : public PlanCommand {
 public:
  explicit PlanCommandImpl(CLI::App& parent) {
    plan_ = parent.add_subcommand("plan", "capacity and cost planner (no daemon needed)");
    plan_->require_subcommand(1);
    plan_->fallthrough();
    plan_->add_option("--model", model_,
                      "catalog model (" + Join(costmodel::CatalogModelNames()) + ")");
    plan_->add_option("--model-config", model_config_, "Hugging Face config.json of the model");
    plan_->add_option("--total-params", total_params_, "override the total parameter count")
        ->check(Num(0, 1e15, true));
    plan_->add_option("--active-params", active_params_, "override the active parameter count")
        ->check(Num(0, 1e15, true));
    plan_->add_option("--gpu", gpu_, "catalog GPU (" + Join(costmodel::CatalogGpuNames()) + ")")
        ->capture_default_str();
    plan_->add_option("--gpu-mem-bytes", gpu_mem_, "override GPU memory bytes")
        ->check(Num(0, 1e15, true));
    plan_->add_option("--gpu-flops", gpu_flops_, "override peak dense FLOP/s")
        ->check(Num(0, 1e19, true));
    plan_->add_option("--hbm-bandwidth", hbm_, "override HBM bytes/s")->check(Num(0, 1e15, true));
    plan_->add_option("--host-link-bandwidth", host_link_, "override GPU-host bytes/s")
        ->check(Num(0, 1e15, true));
    plan_->add_option("--tp", tp_, "tensor-parallel size")
        ->check(CLI::Range(1, 65536))
        ->capture_default_str();
    plan_->add_option("--kv-dtype", kv_dtype_, "bf16 or fp8")->capture_default_str();
    plan_->add_option("--compute-dtype", compute_dtype_, "prefill matmul dtype: bf16 or fp8")
        ->capture_default_str();
    plan_->add_option("--block-tokens", block_tokens_, "tokens per block")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    plan_->add_option("--mfu", mfu_, "prefill utilisation (0, 1]")
        ->check(Num(0, 1, true))
        ->capture_default_str();

    kv_ =
        plan_->add_subcommand("kv", "KV bytes per token, per GPU, layer groups, TP (q1,2,8,11,12)");
    kv_->add_option("--context", context_, "request length in tokens")
        ->check(Num(0, 1e9, false))
        ->capture_default_str();

    budget_ = plan_->add_subcommand("budget", "GPU memory budget for KV (q1, q10)");
    budget_->add_option("--util", budget_opts_.util, "gpu_memory_utilization")
        ->check(Num(0, 1, true))
        ->capture_default_str();
    budget_->add_option("--weights-bytes-per-gpu", weights_, "measured weights per GPU")
        ->check(Num(0, 1e15, true));
    budget_->add_option("--activation-bytes", activation_, "measured activation peak")
        ->check(Num(0, 1e15, true));
    budget_->add_option("--cudagraph-bytes", graphs_, "measured CUDA graph pools")
        ->check(Num(0, 1e15, false));
    budget_->add_option("--other-bytes", budget_opts_.other_bytes, "other reservations")
        ->check(Num(0, 1e15, false));
    budget_
        ->add_option("--max-batched-tokens", budget_opts_.max_batched_tokens,
                     "tokens of the engine's profile run")
        ->check(Num(0, 1e9, true))
        ->capture_default_str();
    budget_->add_option("--max-seqs", budget_opts_.max_sequences, "sampler batch")
        ->check(Num(0, 1e7, true))
        ->capture_default_str();

    fetch_ = plan_->add_subcommand("fetch", "fetch or recompute a cached prefix (q4)");
    fetch_->add_option("--tokens", tokens_, "prefix tokens")->check(Num(0, 1e8, true))->required();
    fetch_->add_option("--tier", tier_, "host, nvme or peer")->capture_default_str();
    fetch_->add_option("--bandwidth", bandwidth_, "tier bytes/s (overrides the default)")
        ->check(Num(0, 1e15, true));
    fetch_->add_option("--latency", latency_, "tier latency in seconds")
        ->check(Num(0, 3600, false));
    fetch_->add_option("--tiers", tier_blocks_, "prefix layout, e.g. host:10,nvme:20");
    fetch_->add_option("--tier-bandwidth", tier_bw_, "e.g. host=25e9,nvme=3e9");
    fetch_
        ->add_option("--checkpoint-interval", fetch_checkpoint_,
                     "recurrent models: tokens between stored state checkpoints (0: none)")
        ->check(CLI::Range(0, 1 << 30));
    fetch_->add_option("--ssd", ssd_, "catalog SSD for the nvme tier")->capture_default_str();

    tiers_ = plan_->add_subcommand("tiers", "tier value and SSD wear (q9)");
    tiers_->add_option("--tokens", tokens_, "prefix tokens to average over")
        ->check(Num(0, 1e8, true))
        ->capture_default_str();
    tiers_->add_option("--tier-bandwidth", tier_bw_, "e.g. host=25e9,nvme=3e9,peer=12e9");
    tiers_->add_option("--ssd", ssd_, "catalog SSD (" + Join(costmodel::CatalogSsdNames()) + ")")
        ->capture_default_str();
    tiers_
        ->add_option("--ssd-capacity-bytes", ssd_capacity_,
                     "SSD capacity; with --ssd-dwpd and --ssd-warranty-years it replaces the "
                     "catalog SSD's endurance (speeds still come from --ssd)")
        ->check(Num(0, 1e17, true));
    tiers_->add_option("--ssd-dwpd", ssd_dwpd_, "drive writes per day")->check(Num(0, 1000, true));
    tiers_->add_option("--ssd-warranty-years", ssd_years_, "warranty years")
        ->check(Num(0, 100, true));
    tiers_->add_option("--write-rate", write_rate_, "bytes/s written (default: sustainable)")
        ->check(Num(0, 1e15, true));

    pd_ = plan_->add_subcommand("pd", "prefill-to-decode link bandwidth (q14)");
    pd_->add_option("--tokens", tokens_, "prompt tokens")
        ->check(Num(0, 1e8, true))
        ->capture_default_str();
    pd_->add_flag("--peers", pd_peers_,
                  "also judge the bandwidth the daemon at --addr measured to each peer");

    preempt_ = plan_->add_subcommand("preempt", "recompute, swap or wait (q7)");
    preempt_->add_option("--victim-tokens", preempt_opts_.victim_tokens, "victim's tokens")
        ->check(Num(0, 1e8, true))
        ->required();
    preempt_
        ->add_option("--remaining-tokens", preempt_opts_.victim_remaining_tokens,
                     "decode steps the victim still needs")
        ->check(Num(0, 1e8, false))
        ->capture_default_str();
    preempt_->add_option("--decode-step-seconds", decode_step_, "measured decode step")
        ->check(Num(0, 3600, true));

    mla_ = plan_->add_subcommand("mla", "decode attention on the roofline (q13)");

    quant_ = plan_->add_subcommand("quant", "K/V quantization layouts (q15)");
    quant_->add_option("--k-layout", k_layout_, "per-channel or per-token")->capture_default_str();
    quant_->add_option("--v-layout", v_layout_, "per-token or per-channel")->capture_default_str();
    quant_->add_option("--group", quant_layout_.group, "group size")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    quant_->add_option("--bits", quant_layout_.bits, "bits per element")
        ->check(CLI::Range(1, 8))
        ->capture_default_str();
    quant_->add_option("--scale-bytes", quant_layout_.scale_bytes, "bytes per scale")
        ->check(Num(0, 16, true))
        ->capture_default_str();
    quant_->add_flag("--symmetric", symmetric_, "no zero points");

    fp8_ = plan_->add_subcommand("fp8", "FP8 KV: bytes saved and clip rate (q3)");
    fp8_->add_option("--format", fp8_format_, "e4m3 or e5m2")->capture_default_str();
    fp8_->add_option("--scale", fp8_scale_, "per-tensor scale")
        ->check(Num(0, 1e30, true))
        ->capture_default_str();
    fp8_->add_option("--amax-file", amax_file_, "observed |max| values, one per line");

    sharing_ = plan_->add_subcommand("sharing", "block sharing across prompts (q6)");
    sharing_->add_option("--prompts", prompts_, "JSONL: token lists or Mooncake hash_ids")
        ->required();
    sharing_->add_option("--samples", samples_, "sequences per prompt")
        ->check(CLI::Range(1, 1 << 16))
        ->capture_default_str();
    sharing_->add_option("--trace-block-tokens", trace_block_tokens_, "tokens per hash_id block")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();

    strand_ = plan_->add_subcommand("strand", "stranded blocks under LRU vs leaf-first (q5)");
    strand_->add_option("--prompts", prompts_, "JSONL: token lists or Mooncake hash_ids")
        ->required();
    strand_->add_option("--capacity-blocks", capacity_blocks_, "cache size in blocks")
        ->check(CLI::Range(1, 1000000000))
        ->required();
    strand_->add_option("--trace-block-tokens", trace_block_tokens_, "tokens per hash_id block")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();

    state_ = plan_->add_subcommand("state", "recurrent state and restart boundary (q16)");
    state_->add_option("--checkpoint-interval", checkpoint_interval_, "tokens between snapshots")
        ->check(CLI::Range(1, 1 << 30))
        ->capture_default_str();
    state_->add_option("--context", context_, "request length in tokens")
        ->check(Num(0, 1e9, false))
        ->capture_default_str();
  }

  bool parsed() const override { return plan_->parsed(); }
  bool wants_measured_links() const override { return pd_->parsed() && pd_peers_; }
  void AddMeasuredLink(costmodel::LinkSpec link) override { measured_.push_back(std::move(link)); }

  int Run(bool json) override {
    absl::StatusOr<Report> r = Build();
    if (!r.ok()) {
      std::cerr << "kvtier plan: " << r.status().message() << "\n";
      return 2;
    }
    if (json) {
      std::cout << r->json.dump(2) << "\n";
    } else {
      std::cout << r->text;
    }
    return 0;
  }

 private:
  static std::string Join(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) absl::StrAppend(&s, s.empty() ? "" : ", ", x);
    return s;
  }

  absl::StatusOr<Deployment> Resolve() {
    Deployment d;
    if (model_.empty() == model_config_.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("give exactly one of --model NAME (",
                                                     Join(costmodel::CatalogModelNames()),
                                                     ") or --model-config FILE"));
    }
    ASSIGN_OR_RETURN(costmodel::ModelSpec m,
                     model_.empty() ? costmodel::ModelSpecFromHfConfigFile(model_config_)
                                    : costmodel::CatalogModel(model_));
    d.model = m;
    if (total_params_ > 0) d.model.total_params_override = total_params_;
    if (active_params_ > 0) d.model.active_params_override = active_params_;
    ASSIGN_OR_RETURN(costmodel::GpuSpec gpu, costmodel::CatalogGpu(gpu_));
    d.gpu = gpu;
    if (gpu_mem_ > 0) d.gpu.memory_bytes = gpu_mem_;
    if (gpu_flops_ > 0) d.gpu.bf16_flops = d.gpu.fp8_flops = gpu_flops_;
    if (hbm_ > 0) d.gpu.hbm_bytes_per_s = hbm_;
    if (host_link_ > 0) d.gpu.host_link_bytes_per_s = host_link_;
    d.tp = tp_;
    if (kv_dtype_ == "bf16" || kv_dtype_ == "fp16") {
      d.kv_bytes_per_element = 2;
    } else if (kv_dtype_ == "fp8") {
      d.kv_bytes_per_element = 1;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("--kv-dtype '", kv_dtype_, "' is not bf16 or fp8"));
    }
    if (compute_dtype_ != "bf16" && compute_dtype_ != "fp8") {
      return absl::InvalidArgumentError(
          absl::StrCat("--compute-dtype '", compute_dtype_, "' is not bf16 or fp8"));
    }
    d.fp8_compute = compute_dtype_ == "fp8";
    d.block_tokens = block_tokens_;
    d.mfu = mfu_;
    RETURN_IF_ERROR(d.Validate());
    return d;
  }

  absl::StatusOr<costmodel::SsdSpec> Ssd() {
    if (ssd_capacity_ > 0 || ssd_dwpd_ > 0 || ssd_years_ > 0) {
      if (!(ssd_capacity_ > 0 && ssd_dwpd_ > 0 && ssd_years_ > 0)) {
        return absl::InvalidArgumentError(
            "--ssd-capacity-bytes, --ssd-dwpd and --ssd-warranty-years go together, all > 0");
      }
      ASSIGN_OR_RETURN(costmodel::SsdSpec base, costmodel::CatalogSsd(ssd_));
      costmodel::SsdSpec s = base;
      s.name = "custom";
      s.capacity_bytes = ssd_capacity_;
      s.dwpd = ssd_dwpd_;
      s.warranty_years = ssd_years_;
      return s;
    }
    return costmodel::CatalogSsd(ssd_);
  }

  absl::StatusOr<std::vector<costmodel::PromptSet>> Prompts() {
    ASSIGN_OR_RETURN(std::string text, ReadFile(prompts_));
    absl::StatusOr<costmodel::PromptSet> set =
        costmodel::ParsePrompts(text, block_tokens_, trace_block_tokens_);
    if (!set.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(prompts_, ": ", set.status().message()));
    }
    return std::vector<costmodel::PromptSet>{*std::move(set)};
  }

  absl::StatusOr<Report> Build() {
    ASSIGN_OR_RETURN(Deployment d, Resolve());
    if (kv_->parsed()) return KvReport(d, context_);
    if (budget_->parsed()) {
      costmodel::BudgetOptions o = budget_opts_;
      if (!(o.util > 0 && o.util <= 1)) {
        return absl::InvalidArgumentError("--util must be in (0, 1]");
      }
      if (weights_ > 0) o.weights_bytes_per_gpu = weights_;
      if (activation_ > 0) o.activation_bytes = activation_;
      if (graphs_ >= 0) o.cudagraph_bytes = graphs_;
      return BudgetReport(d, o);
    }
    if (fetch_->parsed() || tiers_->parsed()) {
      if (!(tokens_ > 0)) return absl::InvalidArgumentError("--tokens must be > 0");
      ASSIGN_OR_RETURN(costmodel::SsdSpec ssd, Ssd());
      ASSIGN_OR_RETURN(auto bw, ParseTierBandwidths(tier_bw_));
      ASSIGN_OR_RETURN(auto tiers, DefaultTiers(d, ssd, bw));
      if (tiers_->parsed()) {
        std::vector<costmodel::TierLink> list;
        for (const char* name : {"host", "nvme", "peer"}) list.push_back(tiers.at(name));
        return TiersReport(d, tokens_, list, ssd, write_rate_);
      }
      auto it = tiers.find(tier_);
      if (it == tiers.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tier '", tier_, "' is not host, nvme or peer"));
      }
      costmodel::TierLink link = it->second;
      if (bandwidth_ > 0) link.bytes_per_s = bandwidth_;
      if (latency_ >= 0) link.latency_s = latency_;
      std::vector<costmodel::Segment> layout;
      if (!tier_blocks_.empty()) {
        ASSIGN_OR_RETURN(auto blocks, ParseTierBlocks(tier_blocks_));
        const double block_bytes = costmodel::ComputeKvFootprint(d).bytes_per_block_per_gpu;
        for (const auto& [name, n] : blocks) {
          auto t = tiers.find(name);
          if (t == tiers.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat("--tiers: unknown tier '", name, "'; tiers are host, nvme, peer"));
          }
          costmodel::TierLink l = name == tier_ ? link : t->second;
          layout.push_back({l, n, n * block_bytes});
        }
      }
      return FetchReport(d, tokens_, link, layout, fetch_checkpoint_);
    }
    if (pd_->parsed()) {
      if (!(tokens_ > 0)) return absl::InvalidArgumentError("--tokens must be > 0");
      std::vector<costmodel::LinkSpec> links = costmodel::CatalogLinks();
      links.insert(links.end(), measured_.begin(), measured_.end());
      return PdReport(d, tokens_, links);
    }
    if (preempt_->parsed()) {
      if (!(preempt_opts_.victim_tokens > 0)) {
        return absl::InvalidArgumentError("--victim-tokens must be > 0");
      }
      costmodel::PreemptOptions o = preempt_opts_;
      if (decode_step_ > 0) o.decode_step_seconds = decode_step_;
      return PreemptReport(d, o);
    }
    if (mla_->parsed()) return MlaReport(d);
    if (quant_->parsed()) {
      costmodel::QuantLayout q = quant_layout_;
      for (const auto& [flag, value, out] :
           {std::tuple<const char*, std::string, bool*>{"--k-layout", k_layout_, &q.k_per_channel},
            {"--v-layout", v_layout_, &q.v_per_channel}}) {
        if (value != "per-channel" && value != "per-token") {
          return absl::InvalidArgumentError(
              absl::StrCat(flag, " '", value, "' is not per-channel or per-token"));
        }
        *out = value == "per-channel";
      }
      q.zero_point = !symmetric_;
      return QuantReport(d, q);
    }
    if (fp8_->parsed()) {
      std::vector<double> amax;
      if (!amax_file_.empty()) {
        ASSIGN_OR_RETURN(std::string text, ReadFile(amax_file_));
        size_t line = 0;
        for (absl::string_view l : absl::StrSplit(text, '\n')) {
          ++line;
          l = absl::StripAsciiWhitespace(l);
          if (l.empty() || l[0] == '#') continue;
          double v = 0;
          if (!absl::SimpleAtod(l, &v) || !std::isfinite(v)) {
            return absl::InvalidArgumentError(
                absl::StrCat(amax_file_, ": line ", line, " is not a number"));
          }
          amax.push_back(v);
        }
      }
      return Fp8Report(d, fp8_format_, fp8_scale_, amax);
    }
    if (sharing_->parsed() || strand_->parsed()) {
      if (sharing_->parsed() && samples_ == 0) {
        return absl::InvalidArgumentError("--samples must be >= 1");
      }
      ASSIGN_OR_RETURN(std::vector<costmodel::PromptSet> p, Prompts());
      if (sharing_->parsed()) return SharingReport(d, p.front(), samples_);
      if (capacity_blocks_ == 0)
        return absl::InvalidArgumentError("--capacity-blocks must be >= 1");
      return StrandReport(d, p.front(), capacity_blocks_);
    }
    if (state_->parsed()) {
      if (checkpoint_interval_ == 0) {
        return absl::InvalidArgumentError("--checkpoint-interval must be >= 1");
      }
      return StateReport(d, checkpoint_interval_, context_);
    }
    return absl::InvalidArgumentError("no plan subcommand");
  }

  CLI::App* plan_;
  bool pd_peers_ = false;
  std::vector<costmodel::LinkSpec> measured_;
  CLI::App *kv_, *budget_, *fetch_, *tiers_, *pd_, *preempt_, *mla_, *quant_, *fp8_, *sharing_,
      *strand_, *state_;
  std::string model_, model_config_, gpu_ = "h100-sxm", kv_dtype_ = "bf16", compute_dtype_ = "bf16";
  double total_params_ = 0, active_params_ = 0, gpu_mem_ = 0, gpu_flops_ = 0, hbm_ = 0,
         host_link_ = 0, mfu_ = 0.5;
  uint32_t tp_ = 1, block_tokens_ = 16;
  double context_ = 4096, tokens_ = 4096;
  costmodel::BudgetOptions budget_opts_;
  double weights_ = 0, activation_ = 0, graphs_ = -1;
  std::string tier_ = "host", tier_blocks_, tier_bw_, ssd_ = "samsung-pm9a3-3.84tb";
  double bandwidth_ = 0, latency_ = -1;
  double ssd_capacity_ = 0, ssd_dwpd_ = 0, ssd_years_ = 0, write_rate_ = 0;
  costmodel::PreemptOptions preempt_opts_;
  double decode_step_ = 0;
  costmodel::QuantLayout quant_layout_;
  std::string k_layout_ = "per-channel", v_layout_ = "per-token";
  bool symmetric_ = false;
  std::string fp8_format_ = "e4m3", amax_file_;
  double fp8_scale_ = 1;
  std::string prompts_;
  uint32_t samples_ = 1, trace_block_tokens_ = 512;
  uint64_t capacity_blocks_ = 0;
  uint64_t checkpoint_interval_ = 256;
  uint64_t fetch_checkpoint_ = 0;
};

}  // namespace

std::unique_ptr<PlanCommand> AddPlanCommand(CLI::App& app) {
  return std::make_unique<PlanCommandImpl>(app);
}

}  // namespace kvtier::planner
