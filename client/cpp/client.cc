#include "kvtier/client.h"

#include <google/protobuf/arena.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"
#include "client/cpp/await_call.h"
#include "client/cpp/channel.h"
#include "kvtier/v1/kvcache.grpc.pb.h"

namespace kvtier::client {
namespace {

absl::StatusOr<v1::DType> DTypeFromName(const std::string& name) {
  static const std::map<std::string, v1::DType> kTypes = {{"bf16", v1::DTYPE_BF16},
                                                          {"fp16", v1::DTYPE_FP16},
                                                          {"fp32", v1::DTYPE_FP32},
                                                          {"fp8_e4m3", v1::DTYPE_FP8_E4M3},
                                                          {"fp8_e5m2", v1::DTYPE_FP8_E5M2}};
  auto it = kTypes.find(name);
  if (it == kTypes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dtype '", name, "' is not one of bf16, fp16, fp32, fp8_e4m3, fp8_e5m2"));
  }
  return it->second;
}

std::string TierName(v1::TierKind kind) {
  switch (kind) {
    case v1::TIER_KIND_GPU:
      return "gpu";
    case v1::TIER_KIND_HOST:
      return "host";
    case v1::TIER_KIND_NVME:
      return "nvme";
    case v1::TIER_KIND_PEER:
      return "peer";
    default:
      return "unknown";
  }
}

}  // namespace

class Client::Impl {
 public:
  Impl(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
      : stub_(v1::KvCache::NewStub(channel)), options_(options) {}

  void Prepare(grpc::ClientContext* ctx) const { ctx->set_deadline(Deadline()); }
  // The deadline of a call that starts now.
  std::chrono::system_clock::time_point Deadline() const {
    return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(options_.timeout);
  }

  // RegisterMemory, with owner_pid < 0 meaning this process.
  absl::StatusOr<std::string> Register(v1::RegisterMemoryRequest req, int owner_pid) {
    req.set_owner_pid(static_cast<uint32_t>(owner_pid < 0 ? getpid() : owner_pid));
    v1::RegisterMemoryResponse resp;
    grpc::ClientContext ctx;
    Prepare(&ctx);
    RETURN_IF_ERROR(FromGrpc(stub_->RegisterMemory(&ctx, req, &resp)));
    return resp.region_id();
  }

  absl::Status Transfer(bool save, const std::string& ns, const std::string& region_id,
                        absl::Span<const RegionBlockRef> blocks,
                        const std::function<void(const BlockCompletion&)>& on_block,
                        std::optional<uint32_t> retention_priority = std::nullopt) {
    grpc::ClientContext ctx;
    Prepare(&ctx);
    auto fill = [&](auto& req) {
      req.set_namespace_id(ns);
      req.set_region_id(region_id);
      for (const RegionBlockRef& b : blocks) {
        v1::BlockRef* r = req.add_blocks();
        r->set_key(b.key);
        r->set_group(b.group);
        if (save) r->set_parent_key(b.parent_key);
        r->set_offset(b.offset);
        r->set_size_bytes(b.size_bytes);
        for (const auto& [offset, size] : b.segments) {
          v1::RegionSegment* seg = r->add_segments();
          seg->set_offset(offset);
          seg->set_size_bytes(size);
        }
      }
    };
    std::unique_ptr<grpc::ClientReader<v1::BlockCompletion>> reader;
    if (save) {
      v1::SaveRequest req;
      fill(req);
      if (retention_priority.has_value()) req.set_retention_priority(*retention_priority);
      req.set_completion_runs(true);
      reader = stub_->Save(&ctx, req);
    } else {
      v1::LoadRequest req;
      fill(req);
      req.set_completion_runs(true);
      reader = stub_->Load(&ctx, req);
    }
    v1::BlockCompletion c;
    while (reader->Read(&c)) {
      // A run stands for the blocks after it too, each OK with its size.
      const uint64_t run = std::max<uint32_t>(c.run(), 1);
      if (c.index() + run > blocks.size()) {
        ctx.TryCancel();
        reader->Finish();
        return absl::InternalError(absl::StrCat("the daemon reported blocks ", c.index(), "..",
                                                c.index() + run - 1, " of a request of ",
                                                blocks.size()));
      }
      BlockCompletion out = CompletionFromProto(c);
      for (uint64_t k = 0; k < run; ++k) {
        out.index = c.index() + static_cast<uint32_t>(k);
        if (k > 0) out.key = blocks[out.index].key;
        on_block(out);
      }
    }
    return FromGrpc(reader->Finish());
  }

  static BlockCompletion CompletionFromProto(const v1::BlockCompletion& c) {
    BlockCompletion out;
    out.index = c.index();
    out.key = c.key();
    out.status = c.code() == 0 ? absl::OkStatus()
                               : absl::Status(static_cast<absl::StatusCode>(c.code()), c.message());
    out.size_bytes = c.size_bytes();
    return out;
  }

  std::unique_ptr<v1::KvCache::Stub> stub_;
  const ClientOptions options_;
  // Lookups to send with `keys` before packed keys are tried again: set
  // when the daemon refused a packed Lookup and took the same one with
  // `keys` (it predates LookupRequest.packed_keys). A daemon upgraded at the
  // same address is found within that many Lookups; an old one costs a
  // second try once per that many.
  static constexpr uint32_t kKeysLookupsBeforeRetry = 1000;
  std::atomic<uint32_t> keys_lookups_left_{0};
  // Whether this Lookup may send packed keys (counting down one sent with
  // `keys` instead).
  bool MayPackKeys() {
    uint32_t left = keys_lookups_left_.load(std::memory_order_relaxed);
    while (left > 0 &&
           !keys_lookups_left_.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
    }
    return left == 0;
  }
};

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& address,
                                                        const ClientOptions& options) {
  if (address.empty()) return absl::InvalidArgumentError("address is empty");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                   OpenChannel(address, options.credentials, args));
  if (channel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("cannot use address '", address, "'"));
  }
  return std::unique_ptr<Client>(new Client(std::make_shared<Impl>(channel, options)));
}

absl::StatusOr<OpenedNamespace> Client::OpenNamespace(const NamespaceOptions& o) {
  ASSIGN_OR_RETURN(v1::DType dtype, DTypeFromName(o.layout.dtype));
  v1::OpenNamespaceRequest req;
  req.set_model_id(o.model_id);
  req.set_salt(o.salt);
  req.set_cost_model(o.cost_model);
  req.set_model_config_json(o.model_config_json);
  v1::NamespaceLayout* l = req.mutable_layout();
  l->set_num_layers(o.layout.num_layers);
  l->set_num_kv_heads(o.layout.num_kv_heads);
  l->set_head_dim(o.layout.head_dim);
  l->set_dtype(dtype);
  l->set_tokens_per_block(o.layout.tokens_per_block);
  l->set_tp_rank(o.layout.tp_rank);
  l->set_tp_size(o.layout.tp_size);
  l->set_latent(o.layout.latent);
  for (size_t i = 0; i < o.layout.groups.size(); ++i) {
    const LayerGroupSpec& g = o.layout.groups[i];
    v1::LayerGroup* p = l->add_groups();
    if (g.kind == "full_attention") {
      p->set_kind(v1::LayerGroup::LAYER_GROUP_FULL_ATTENTION);
    } else if (g.kind == "sliding_window") {
      p->set_kind(v1::LayerGroup::LAYER_GROUP_SLIDING_WINDOW);
    } else if (g.kind == "recurrent") {
      p->set_kind(v1::LayerGroup::LAYER_GROUP_RECURRENT);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("layout.groups[", i, "].kind '", g.kind,
                       "' is unknown (full_attention, sliding_window or recurrent)"));
    }
    for (uint32_t layer : g.layers) p->add_layers(layer);
    p->set_window_tokens(g.window_tokens);
    p->set_state_bytes(g.state_bytes);
    p->set_checkpoint_tokens(g.checkpoint_tokens);
  }
  if (o.encoding == "fp8") {
    req.mutable_encoding()->set_kind(v1::StorageEncoding::STORAGE_ENCODING_FP8_E4M3);
  } else if (!o.encoding.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("encoding '", o.encoding, "' is unknown (\"\" or \"fp8\")"));
  }
  req.mutable_encoding()->set_engine_layout(o.engine_layout);
  req.mutable_encoding()->set_k_group_tokens(o.k_group_tokens);
  v1::OpenNamespaceResponse resp;
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  RETURN_IF_ERROR(FromGrpc(impl_->stub_->OpenNamespace(&ctx, req, &resp)));
  OpenedNamespace out{resp.namespace_id(),
                      resp.block_bytes(),
                      resp.created(),
                      resp.plans_enabled(),
                      resp.plans_note(),
                      resp.encoding(),
                      resp.stored_block_bytes(),
                      {}};
  for (const v1::GroupInfo& g : resp.groups()) out.group_block_bytes.push_back(g.block_bytes());
  return out;
}

namespace {

// The width of `keys` when every one has the same, of 1..BlockKey's 32
// bytes (the daemon checks the rest); 0 otherwise, or without keys.
size_t PackedKeyWidth(absl::Span<const std::string> keys) {
  if (keys.empty() || keys[0].empty() || keys[0].size() > 32) return 0;
  for (const std::string& k : keys) {
    if (k.size() != keys[0].size()) return 0;
  }
  return keys[0].size();
}

}  // namespace

absl::StatusOr<LookupResult> Client::Lookup(const std::string& ns,
                                            absl::Span<const std::string> keys,
                                            const LookupOptions& o) {
  // Request and response on one arena; keys of one width packed in one
  // field (LookupRequest.packed_keys); the reply compact (packed arrays,
  // not a BlockInfo per matched block).
  google::protobuf::Arena arena;
  auto& req = *google::protobuf::Arena::CreateMessage<v1::LookupRequest>(&arena);
  req.set_namespace_id(ns);
  const size_t width = PackedKeyWidth(keys);
  if (width > 0 && impl_->MayPackKeys()) {
    std::string* packed = req.mutable_packed_keys();
    packed->reserve(width * keys.size());
    for (const std::string& k : keys) packed->append(k);
    req.set_packed_key_bytes(static_cast<uint32_t>(width));
  } else {
    for (const std::string& k : keys) req.add_keys(k);
  }
  req.set_take_lease(o.take_lease);
  req.set_lease_ttl_ms(o.lease_ttl_ms);
  if (o.retention_priority.has_value()) req.set_retention_priority(*o.retention_priority);
  req.set_prompt_tokens(o.prompt_tokens);
  req.set_compact_reply(true);
  auto& resp = *google::protobuf::Arena::CreateMessage<v1::LookupResponse>(&arena);
  // One deadline for the call and its second try, if any.
  const auto deadline = impl_->Deadline();
  auto call = [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    return FromGrpc(AwaitCall(
        [&](auto done) { impl_->stub_->async()->Lookup(&ctx, &req, &resp, std::move(done)); }));
  };
  absl::Status status = call();
  if (absl::IsInvalidArgument(status) && req.packed_key_bytes() > 0) {
    // A daemon that predates packed keys reads none and refuses the call
    // (it changed nothing): ask again with `keys`. When that succeeds, it
    // was such a daemon: send it `keys` for a while. A request refused both
    // ways is refused for its own fault.
    req.clear_packed_keys();
    req.clear_packed_key_bytes();
    for (const std::string& k : keys) req.add_keys(k);
    resp.Clear();
    status = call();
    if (status.ok()) {
      impl_->keys_lookups_left_.store(Impl::kKeysLookupsBeforeRetry, std::memory_order_relaxed);
    }
  }
  RETURN_IF_ERROR(status);
  LookupResult r;
  r.matched = resp.matched();
  // A daemon that predates compact_reply answers in `blocks`.
  const v1::CompactBlocks& compact = resp.compact_blocks();
  for (int i = 0; i < compact.tier_size(); ++i) {
    r.tiers.push_back(TierName(compact.tier(i)));
    r.persisted.push_back(i < compact.persisted_size() && compact.persisted(i));
  }
  for (const v1::BlockInfo& b : resp.blocks()) {
    r.tiers.push_back(TierName(b.tier()));
    r.persisted.push_back(b.persisted());
  }
  auto loads = [](const auto& from, std::vector<GroupLoad>* to) {
    for (const v1::GroupLoad& g : from) {
      GroupLoad& load = to->emplace_back();
      load.group = g.group();
      load.first_key = g.first_key();
      for (const v1::BlockInfo& b : g.blocks()) {
        load.sizes.push_back(b.size_bytes());
        load.tiers.push_back(TierName(b.tier()));
        load.persisted.push_back(b.persisted());
      }
    }
  };
  loads(resp.groups(), &r.groups);
  loads(resp.plan().groups(), &r.plan_groups);
  r.lease_id = resp.lease_id();
  if (resp.has_plan()) {
    r.plan = FetchPlan{resp.plan().fetch_blocks(), resp.plan().fetch_seconds(),
                       resp.plan().recompute_seconds(), resp.plan().total_seconds()};
  }
  return r;
}

absl::StatusOr<uint32_t> Client::Release(const std::string& lease_id) {
  v1::ReleaseRequest req;
  req.set_lease_id(lease_id);
  v1::ReleaseResponse resp;
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  RETURN_IF_ERROR(FromGrpc(AwaitCall(
      [&](auto done) { impl_->stub_->async()->Release(&ctx, &req, &resp, std::move(done)); })));
  return resp.blocks_released();
}

absl::StatusOr<uint32_t> Client::Delete(const std::string& ns, absl::Span<const std::string> keys,
                                        bool recursive) {
  v1::DeleteRequest req;
  req.set_namespace_id(ns);
  for (const std::string& k : keys) req.add_keys(k);
  req.set_recursive(recursive);
  v1::DeleteResponse resp;
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  RETURN_IF_ERROR(FromGrpc(impl_->stub_->Delete(&ctx, req, &resp)));
  return resp.blocks_deleted();
}

absl::StatusOr<CloseNamespaceResult> Client::CloseNamespace(const std::string& ns,
                                                            bool drop_blocks) {
  v1::CloseNamespaceRequest req;
  req.set_namespace_id(ns);
  req.set_drop_blocks(drop_blocks);
  v1::CloseNamespaceResponse resp;
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  if (absl::Status s = FromGrpc(impl_->stub_->CloseNamespace(&ctx, req, &resp)); !s.ok()) {
    return s;
  }
  return CloseNamespaceResult{resp.leases_released(), resp.blocks_dropped(), resp.blocks_kept()};
}

absl::StatusOr<TransferResult> Client::Transfer(const std::string& ns,
                                                absl::Span<const std::string> keys,
                                                const std::string& peer,
                                                TransferDirection direction,
                                                absl::Duration timeout) {
  v1::TransferRequest req;
  req.set_namespace_id(ns);
  for (const std::string& k : keys) req.add_keys(k);
  req.set_peer(peer);
  req.set_direction(direction == TransferDirection::kPush ? v1::TRANSFER_DIRECTION_PUSH
                                                          : v1::TRANSFER_DIRECTION_PULL);
  req.set_timeout_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(timeout)));
  v1::TransferResponse resp;
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  // The daemon's own deadline for the transfer, plus room for its answer.
  if (timeout > absl::ZeroDuration()) {
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout + absl::Seconds(10)));
  }
  RETURN_IF_ERROR(FromGrpc(impl_->stub_->Transfer(&ctx, req, &resp)));
  TransferResult out;
  for (const v1::BlockCompletion& c : resp.blocks())
    out.blocks.push_back(Impl::CompletionFromProto(c));
  out.bytes_moved = resp.bytes_moved();
  out.transport_seconds = resp.transport_seconds();
  out.lanes = resp.lanes();
  return out;
}

absl::Status Client::Put(const std::string& ns, absl::Span<const std::string> keys,
                         absl::Span<const std::string> data, const std::string& parent_key) {
  std::vector<absl::string_view> views(data.begin(), data.end());
  return PutBlocks(ns, keys, views, PutOptions{parent_key}).status();
}

absl::StatusOr<PutResult> Client::PutBlocks(const std::string& ns,
                                            absl::Span<const std::string> keys,
                                            absl::Span<const absl::string_view> data,
                                            const PutOptions& options) {
  if (keys.size() != data.size() || keys.empty()) {
    return absl::InvalidArgumentError("Put needs one data entry per key, and at least one key");
  }
  if (options.chunk_bytes == 0) return absl::InvalidArgumentError("Put: chunk_bytes must be > 0");
  if (!options.groups.empty() && options.groups.size() != keys.size()) {
    return absl::InvalidArgumentError("Put: options.groups needs one group per key");
  }
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  v1::PutResponse resp;
  auto writer = impl_->stub_->Put(&ctx, &resp);
  const size_t chunk_bytes = static_cast<size_t>(options.chunk_bytes);
  // Each group's previous key: the parent of its next block.
  std::map<uint32_t, std::string> parents;
  bool open = true;
  for (size_t i = 0; open && i < keys.size(); ++i) {
    const uint32_t group = options.groups.empty() ? 0 : options.groups[i];
    auto parent = parents.try_emplace(group, options.parent_key).first;
    size_t at = 0;
    do {
      v1::PutChunk c;
      if (at == 0) {
        c.set_namespace_id(i == 0 ? ns : "");
        if (i == 0 && options.retention_priority.has_value()) {
          c.set_retention_priority(*options.retention_priority);
        }
        c.set_key(keys[i]);
        c.set_parent_key(parent->second);
        c.set_block_bytes(data[i].size());
        c.set_group(group);
      }
      const size_t n = std::min(chunk_bytes, data[i].size() - at);
      c.set_data(data[i].data() + at, n);
      at += n;
      open = writer->Write(c);  // false: the daemon ended the call; Finish says why
    } while (open && at < data[i].size());
    parent->second = keys[i];
  }
  writer->WritesDone();
  RETURN_IF_ERROR(FromGrpc(writer->Finish()));
  return PutResult{resp.blocks_stored(), resp.blocks_already_cached(), resp.blocks_unusable()};
}

absl::StatusOr<std::vector<std::string>> Client::Get(const std::string& ns,
                                                     absl::Span<const std::string> keys,
                                                     uint32_t group) {
  std::vector<std::string> blocks;
  bool out_of_order = false;
  absl::Status s = GetChunks(
      ns, keys,
      [&](const GetChunkView& c) {
        if (!c.key.empty()) blocks.emplace_back();
        if (blocks.empty() || c.offset != blocks.back().size()) {
          out_of_order = true;
          return false;
        }
        blocks.back().append(c.data.data(), c.data.size());
        return true;
      },
      group);
  if (out_of_order) return absl::InternalError("Get: the daemon sent chunks out of order");
  if (!s.ok()) return s;
  if (blocks.size() != keys.size()) return absl::InternalError("Get: blocks missing in the reply");
  return blocks;
}

absl::Status Client::GetChunks(const std::string& ns, absl::Span<const std::string> keys,
                               const std::function<bool(const GetChunkView&)>& on_chunk,
                               uint32_t group) {
  v1::GetRequest req;
  req.set_namespace_id(ns);
  req.set_group(group);
  for (const std::string& k : keys) req.add_keys(k);
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  auto reader = impl_->stub_->Get(&ctx, req);
  v1::GetChunk c;
  while (reader->Read(&c)) {
    if (!on_chunk(GetChunkView{c.key(), c.block_bytes(), c.offset(), c.data()})) {
      ctx.TryCancel();
      reader->Finish();
      return absl::CancelledError("Get: cancelled by the caller");
    }
  }
  return FromGrpc(reader->Finish());
}

absl::StatusOr<std::string> Client::RegisterMemory(const std::string& path, uint64_t size_bytes,
                                                   int owner_pid) {
  v1::RegisterMemoryRequest req;
  req.mutable_region()->mutable_shared_memory()->set_path(path);
  req.mutable_region()->mutable_shared_memory()->set_size_bytes(size_bytes);
  return impl_->Register(std::move(req), owner_pid);
}

absl::StatusOr<std::string> Client::RegisterCudaIpc(int device,
                                                    absl::Span<const CudaIpcTensor> tensors,
                                                    int owner_pid) {
  v1::RegisterMemoryRequest req;
  v1::CudaIpcMemory* ipc = req.mutable_region()->mutable_cuda_ipc();
  ipc->set_device(device);
  for (const CudaIpcTensor& t : tensors) {
    v1::CudaIpcTensor* out = ipc->add_tensors();
    out->set_handle(t.handle);
    out->set_offset(t.offset);
    out->set_size_bytes(t.size_bytes);
  }
  return impl_->Register(std::move(req), owner_pid);
}

absl::Status Client::UnregisterMemory(const std::string& region_id) {
  v1::UnregisterMemoryRequest req;
  req.set_region_id(region_id);
  v1::UnregisterMemoryResponse resp;
  grpc::ClientContext ctx;
  impl_->Prepare(&ctx);
  return FromGrpc(impl_->stub_->UnregisterMemory(&ctx, req, &resp));
}

absl::Status Client::Save(const std::string& ns, const std::string& region_id,
                          absl::Span<const RegionBlockRef> blocks,
                          const std::function<void(const BlockCompletion&)>& on_block,
                          std::optional<uint32_t> retention_priority) {
  return impl_->Transfer(true, ns, region_id, blocks, on_block, retention_priority);
}

absl::Status Client::Load(const std::string& ns, const std::string& region_id,
                          absl::Span<const RegionBlockRef> blocks,
                          const std::function<void(const BlockCompletion&)>& on_block) {
  return impl_->Transfer(false, ns, region_id, blocks, on_block);
}

namespace {

std::future<absl::StatusOr<std::vector<BlockCompletion>>> RunAsync(
    std::function<absl::Status(const std::function<void(const BlockCompletion&)>&)> call) {
  return std::async(std::launch::async,
                    [call = std::move(call)]() -> absl::StatusOr<std::vector<BlockCompletion>> {
                      std::vector<BlockCompletion> out;
                      absl::Status s = call([&](const BlockCompletion& c) { out.push_back(c); });
                      if (!s.ok()) return s;
                      return out;
                    });
}

}  // namespace

std::future<absl::StatusOr<std::vector<BlockCompletion>>> Client::SaveAsync(
    std::string ns, std::string region_id, std::vector<RegionBlockRef> blocks) {
  return RunAsync([impl = impl_, ns = std::move(ns), region_id = std::move(region_id),
                   blocks = std::move(blocks)](const auto& sink) {
    return impl->Transfer(true, ns, region_id, blocks, sink);
  });
}

std::future<absl::StatusOr<std::vector<BlockCompletion>>> Client::LoadAsync(
    std::string ns, std::string region_id, std::vector<RegionBlockRef> blocks) {
  return RunAsync([impl = impl_, ns = std::move(ns), region_id = std::move(region_id),
                   blocks = std::move(blocks)](const auto& sink) {
    return impl->Transfer(false, ns, region_id, blocks, sink);
  });
}

}  // namespace kvtier::client
