// KvCacheService's two byte streams on gRPC's callback API. Neither holds a
// worker while the client sends or receives:
// - Put reads a chunk, hands it to the executor (PutAssembly::Add copies its
//   data from the slices gRPC received into its slot, a raw method:
//   server/put_chunk_frame.h) and reads the next into a second buffer
//   meanwhile; the end of the stream commits on the executor too, in the
//   same task when it arrives while a chunk is being stored.
// - Get reads its blocks (pinned) on the executor, then writes chunk after
//   chunk from the reactor as the client takes them: a chunk is a copy out
//   of a pinned block, no lock held, straight into the bytes gRPC sends (a
//   raw method: server/get_chunk_frame.h). The pins are dropped on the
//   executor, before the last chunk leaves with the status.
// Both admit their caller in the handler (cheap, no lock), so a caller that
// may not call them never holds a place in their limits.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "base/grpc_status.h"
#include "base/mutex.h"
#include "base/status_macros.h"
#include "server/async/read_ahead.h"
#include "server/async/tsan_handoff.h"
#include "server/async/unary_call.h"
#include "server/get_chunk_frame.h"
#include "server/grpc_auth.h"
#include "server/kvcache_service.h"
#include "server/proto_convert.h"
#include "server/put_assembly.h"
#include "server/put_chunk_frame.h"
#include "server/rpc_roles.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

grpc::Status Finished(const char* rpc, const absl::Status& status) {
  if (!status.ok()) spdlog::debug("{}: {}", rpc, status.ToString());
  return ToGrpc(status);
}

const grpc::Status kShuttingDown(grpc::StatusCode::UNAVAILABLE, "server shutting down");

}  // namespace

// One Put stream. Owned by gRPC; deletes itself in OnDone. It reads one
// chunk ahead (server/async/read_ahead.h): while the executor stores one
// chunk, the next is read into a second buffer, and an end of the stream
// that arrives while a chunk is being stored is committed by the same
// executor task, without another hop.
class KvCacheService::PutCall final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PutCall(KvCacheService* service, Ctx* context, grpc::ByteBuffer* response, std::string tenant,
          CallLimit::Ticket ticket)
      : service_(service),
        context_(context),
        response_(response),
        ticket_(std::move(ticket)),
        watch_(service->WatchIdle(context)),
        put_(std::in_place, service->deps_.cache, service->deps_.transforms, std::move(tenant)) {
    HandOff(this);
    StartRead(&chunks_[ReadAhead::kFirstRead]);
  }

 private:
  void OnReadDone(bool ok) override {
    TakeOver(this);
    bool submit = false;
    {
      MutexLock lock(&mu_);
      const ReadAhead::Arrival a = ahead_.Arrived(ok);
      if (a.ignored) return;  // a read that Finish cut short
      if (ok) watch_->Touch();
      StartReadLocked(a.read_into);
      submit = a.submit_drain;
    }
    if (submit && !service_->deps_.executor->Submit([this] { Drain(); })) {
      End(absl::UnavailableError(kShuttingDown.error_message()));
    }
  }
  void OnDone() override {
    TakeOver(this);
    delete this;
  }

  // Under mu_, so that End's Finish comes after it or it does not happen.
  void StartReadLocked(int buffer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (buffer == ReadAhead::kNoRead) return;
    HandOff(this);
    StartRead(&chunks_[buffer]);
  }

  // On the executor: stores the chunks read, in order, and commits once the
  // stream has ended; returns when nothing is left yet, or after End.
  void Drain() {
    for (;;) {
      ReadAhead::Step step;
      {
        MutexLock lock(&mu_);
        step = ahead_.Next();
      }
      if (step.kind == ReadAhead::Step::kIdle) return;
      if (step.kind == ReadAhead::Step::kCommit) return End(Commit());
      if (absl::Status s = AddChunk(&chunks_[step.buffer]); !s.ok()) return End(s);
      MutexLock lock(&mu_);
      StartReadLocked(ahead_.Stored());
    }
  }

  // On the executor: takes the chunk's message out of its read buffer,
  // splits it (its data stays in the received slices) and hands it to the
  // assembly, which copies the data into its slot; the message's slices go
  // once it is stored.
  absl::Status AddChunk(grpc::ByteBuffer* raw) {
    absl::Status s = AddFrame(raw);
    frame_.Clear();
    return s;
  }
  absl::Status AddFrame(grpc::ByteBuffer* raw) {
    // A refusal before the assembly sees the chunk names it, as its own do.
    auto named = [this](const absl::Status& s) {
      return absl::Status(s.code(),
                          absl::StrCat("chunk ", put_->chunks_added(), ": ", s.message()));
    };
    if (absl::Status s = frame_.Parse(raw); !s.ok()) return named(s);
    const v1::PutChunk& f = frame_.fields();
    absl::StatusOr<std::optional<uint8_t>> retention =
        RetentionFromProto(f.has_retention_priority(), f.retention_priority());
    if (!retention.ok()) return named(retention.status());
    return put_->Add({f.namespace_id(), f.key(), f.parent_key(), f.block_bytes(),
                      ChunkBytes(frame_.data()), f.group(), *retention});
  }

  // On the executor, after the client closed its side (or went away).
  absl::Status Commit() {
    // A read also fails when the call was cancelled (client gone, deadline,
    // shutdown): only a cleanly finished stream commits.
    if (context_->IsCancelled()) return absl::CancelledError("Put cancelled before it finished");
    ASSIGN_OR_RETURN(PutResult r, put_->Commit());
    if (ClusterTier* cluster = service_->deps_.cluster_tier;
        cluster != nullptr && r.blocks_stored > 0 && put_->ns().has_value()) {
      cluster->Offer(*put_->ns(), put_->last_key());  // to the chain's owner, in the background
    }
    v1::PutResponse response;
    response.set_blocks_stored(r.blocks_stored);
    response.set_blocks_already_cached(r.blocks_already_cached);
    response.set_bytes_stored(r.bytes_stored);
    response.set_blocks_unusable(r.blocks_unusable);
    grpc::Slice bytes(response.SerializeAsString());
    *response_ = grpc::ByteBuffer(&bytes, 1);
    return absl::OkStatus();
  }

  // Drops what the call holds (an uncommitted batch is abandoned here, off
  // gRPC's threads when possible), then answers. Called once: by the drain,
  // or by a reaction that could submit none. A read still in flight ends
  // after Finish, and its reaction does nothing.
  void End(const absl::Status& status) {
    {
      MutexLock lock(&mu_);
      ahead_.Finish();
    }
    put_.reset();
    watch_.reset();
    ticket_.Reset();
    HandOff(this);
    Finish(Finished("Put", status));
  }

  KvCacheService* const service_;
  Ctx* const context_;
  grpc::ByteBuffer* const response_;  // a PutResponse's bytes (a raw method)
  CallLimit::Ticket ticket_;
  std::unique_ptr<StreamIdleReaper::Watch> watch_;  // touched under mu_ until End
  std::optional<PutAssembly> put_;                  // used by the drain only; reset by End
  // Written by the read ahead_ names, taken by the drain it gives them to.
  grpc::ByteBuffer chunks_[ReadAhead::kBuffers];
  PutChunkFrame frame_;  // the drain's; empty between chunks
  Mutex mu_;
  ReadAhead ahead_ ABSL_GUARDED_BY(mu_);
};

grpc::ServerReadReactor<grpc::ByteBuffer>* KvCacheService::Put(Ctx* context,
                                                               grpc::ByteBuffer* response) {
  using Refused = RefusedCall<grpc::ServerReadReactor<grpc::ByteBuffer>>;
  // The caller first (cheap, no lock): a caller that may not Put never
  // holds a place in the limit.
  absl::StatusOr<Identity> who = Admit(*deps_.auth, *context, RoleOf("KvCache", "Put"));
  if (!who.ok()) return new Refused(Finished("Put", who.status()));
  absl::StatusOr<CallLimit::Ticket> ticket = limits_.Of("Put").Enter();
  if (!ticket.ok()) return new Refused(ToGrpc(ticket.status()));
  return new PutCall(this, context, response, who->tenant, *std::move(ticket));
}

// One Get stream. Owned by gRPC; deletes itself in OnDone.
class KvCacheService::GetCall final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  GetCall(KvCacheService* service, Ctx* context, v1::GetRequest request, std::string tenant,
          CallLimit::Ticket ticket)
      : service_(service),
        context_(context),
        request_(std::move(request)),
        tenant_(std::move(tenant)),
        ticket_(std::move(ticket)) {
    if (!service_->deps_.executor->Submit([this] {
          absl::Status s = Prepare();
          if (!s.ok()) return End(s, /*on_executor=*/true);
          WriteNext(/*on_executor=*/true);
        })) {
      HandOff(this);
      Finish(kShuttingDown);
    }
  }

 private:
  void OnWriteDone(bool ok) override {
    TakeOver(this);
    if (!ok) return End(absl::CancelledError("client went away during Get"), false);
    watch_->Touch();
    WriteNext(/*on_executor=*/false);
  }
  void OnDone() override {
    TakeOver(this);
    delete this;
  }

  // On the executor: reads and pins the blocks.
  absl::Status Prepare() {
    const Deps& deps = service_->deps_;
    ASSIGN_OR_RETURN(NamespaceKeys req,
                     NamespaceKeysFromProto(request_.namespace_id(), request_.keys(),
                                            deps.cache->options().max_keys_per_request));
    RETURN_IF_ERROR(deps.cache->CheckTenant(req.ns, tenant_));
    chunk_bytes_ = request_.max_chunk_bytes() == 0
                       ? deps.get_chunk_bytes
                       : std::min<uint64_t>(request_.max_chunk_bytes(), deps.max_chunk_bytes);
    if (deps.cluster_tier != nullptr && request_.group() == 0) {
      // A miss stays a miss; the pull leaves the call time to answer.
      deps.cluster_tier->Fill(req.ns, req.keys, /*judged=*/false, CallDeadline(*context_));
    }
    ASSIGN_OR_RETURN(handles_,
                     deps.cache->Read(req.ns, req.keys, /*verify=*/true, request_.group()));
    transform_ = deps.transforms->Find(req.ns);
    if (transform_ != nullptr) decoded_.resize(transform_->plain_bytes());
    watch_ = service_->WatchIdle(context_);
    return absl::OkStatus();
  }

  // Writes the next chunk; the last goes with the call's status. Runs on
  // the executor first (on_executor), then from OnWriteDone; one write is in
  // flight at a time.
  void WriteNext(bool on_executor) {
    if (block_ == handles_.size()) return End(absl::OkStatus(), on_executor);
    const BlockCache::ReadHandle& h = handles_[block_];
    if (offset_ == 0 && transform_ != nullptr) {
      // Verified by Read; a block that does not decode is not served.
      if (absl::Status s = transform_->Decode(h.bytes(), absl::MakeSpan(decoded_)); !s.ok()) {
        return End(absl::DataLossError(absl::StrCat("block ", h.key().ToHex(), ": ", s.message())),
                   on_executor);
      }
    }
    const absl::Span<const uint8_t> bytes =
        transform_ != nullptr ? absl::Span<const uint8_t>(decoded_) : h.bytes();
    const uint64_t n = std::min<uint64_t>(chunk_bytes_, bytes.size() - offset_);
    frame_ = GetChunkFrame(offset_ == 0 ? h.key().bytes() : absl::string_view(), bytes.size(),
                           offset_, bytes.subspan(offset_, n));
    offset_ += n;
    if (offset_ == bytes.size()) {
      ++block_;
      offset_ = 0;
    }
    if (block_ < handles_.size()) {
      HandOff(this);
      return StartWrite(&frame_);
    }
    // The last chunk is a copy: the pins go, then the status leaves with
    // it (a caller that deletes its blocks on the OK must find them
    // unpinned). Unpinning takes the cache's lock: from a gRPC thread, that
    // is a task for the executor.
    if (on_executor) return WriteLast();
    if (!service_->deps_.executor->Submit([this] { WriteLast(); })) WriteLast();
  }

  void WriteLast() {
    handles_.clear();
    HandOff(this);
    StartWriteAndFinish(&frame_, grpc::WriteOptions(), grpc::Status::OK);
  }

  // Drops the pins (see WriteNext on threads), then answers. The idle watch
  // and the call's place in its limit stay until gRPC is done with the call
  // (the destructor).
  void End(const absl::Status& status, bool on_executor) {
    if (!on_executor && !handles_.empty()) {
      if (service_->deps_.executor->Submit([this, status] { End(status, true); })) return;
    }
    handles_.clear();
    HandOff(this);
    Finish(Finished("Get", status));
  }

  KvCacheService* const service_;
  Ctx* const context_;
  const v1::GetRequest request_;
  const std::string tenant_;
  CallLimit::Ticket ticket_;
  std::unique_ptr<StreamIdleReaper::Watch> watch_;
  uint64_t chunk_bytes_ = 0;
  std::vector<BlockCache::ReadHandle> handles_;
  std::shared_ptr<BlockTransform> transform_;
  std::vector<uint8_t> decoded_;
  size_t block_ = 0;        // the block being written
  uint64_t offset_ = 0;     // within it
  grpc::ByteBuffer frame_;  // the chunk being written (get_chunk_frame.h)
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* KvCacheService::Get(Ctx* context,
                                                                const grpc::ByteBuffer* request) {
  using Refused = RefusedCall<grpc::ServerWriteReactor<grpc::ByteBuffer>>;
  absl::StatusOr<Identity> who = Admit(*deps_.auth, *context, RoleOf("KvCache", "Get"));
  if (!who.ok()) return new Refused(Finished("Get", who.status()));
  v1::GetRequest parsed;
  if (absl::Status s = ParseRawRequest(*request, "GetRequest", &parsed); !s.ok()) {
    return new Refused(Finished("Get", s));
  }
  absl::StatusOr<CallLimit::Ticket> ticket = limits_.Of("Get").Enter();
  if (!ticket.ok()) return new Refused(ToGrpc(ticket.status()));
  return new GetCall(this, context, std::move(parsed), who->tenant, *std::move(ticket));
}

}  // namespace kvtier
