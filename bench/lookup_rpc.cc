// bench/lookup_rpc: latency of a Lookup of 128 cached keys (32 bytes each,
// as engines' block hashes are) against an empty RPC
// (grpc.health.v1.Health/Check) on the same channel to the same in-process
// kvtierd, calls issued one at a time, in the same run. Prints
// p50 and p99 of each and their ratios (target: Lookup <= 1.2x). The
// target's ratio issues both calls through callback stubs, the same client
// path, for both forms of the call: compact (the keys packed in one field,
// the reply in packed arrays: what kvtier's clients send and ask for) and
// full (a bytes field per key, a BlockInfo per block). A compact Lookup
// through the blocking stub is printed beside a no-op KvCache RPC through
// that stub, and kvtier::Client::Lookup (the C++ client, which waits for a
// callback-stub call) beside the empty RPC. Last, the server's
// message work for the same Lookup outside gRPC (parse the request, answer
// every key, serialize, free) with gRPC's default messages (on the heap,
// the baseline) and with the ArenaMessages the daemon registers for Lookup.
//
//   build/bench/lookup_rpc [--calls 20000] [--keys 128]
#include <google/protobuf/arena.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/bench_daemon.h"
#include "client/cpp/await_call.h"
#include "kvtier/client.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/async/arena_messages.h"
#include "spdlog/spdlog.h"

namespace {

using WallClock = std::chrono::steady_clock;

// Calls `call` n times; returns the latencies in microseconds.
template <typename F>
std::vector<double> Time(int n, F&& call) {
  std::vector<double> us;
  us.reserve(n);
  for (int i = 0; i < n; ++i) {
    const auto t0 = WallClock::now();
    if (!call()) std::abort();
    us.push_back(std::chrono::duration<double, std::micro>(WallClock::now() - t0).count());
  }
  return us;
}

// A key of 32 bytes, as engines' block hashes are.
std::string Key(int i) {
  std::string key = absl::StrCat("key-", i, "-");
  key.resize(32, 'k');
  return key;
}

// Warms each of `kinds` up (2000 calls), then runs ten rounds of
// `per_round` calls of each in turn, so a slow spell of this shared
// machine lands on all of them; returns each kind's latencies, sorted.
std::vector<std::vector<double>> Interleaved(int per_round,
                                             const std::vector<std::function<bool()>>& kinds) {
  for (const auto& fn : kinds) Time(2000, fn);
  std::vector<std::vector<double>> out(kinds.size());
  for (int round = 0; round < 10; ++round) {
    for (size_t i = 0; i < kinds.size(); ++i) {
      const std::vector<double> t = Time(per_round, kinds[i]);
      out[i].insert(out[i].end(), t.begin(), t.end());
    }
  }
  for (std::vector<double>& v : out) std::sort(v.begin(), v.end());
  return out;
}

double Pct(const std::vector<double>& v, double p) {
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

using LookupMessages = grpc::MessageHolder<kvtier::v1::LookupRequest, kvtier::v1::LookupResponse>;

// Both messages as members of a holder built in place: what gRPC's default
// allocator gives a callback method (DefaultMessageHolder, placement-new'd
// in the call's own arena, so the holder costs no malloc; the messages'
// contents are on the heap).
class HeapMessages final : public LookupMessages {
 public:
  HeapMessages() {
    set_request(&request_);
    set_response(&response_);
  }
  void Release() override { this->~HeapMessages(); }

 private:
  kvtier::v1::LookupRequest request_;
  kvtier::v1::LookupResponse response_;
};

// The server's message work for one Lookup, as gRPC and AnswerLookup do it:
// messages from `allocate`, the request parsed from `wire`, each key
// answered (key, size, tier), the answer serialized, both freed.
template <typename Allocate>
bool MessageWork(const std::string& wire, Allocate&& allocate) {
  LookupMessages* m = allocate();
  bool ok = m->request()->ParseFromString(wire);
  m->response()->set_matched(static_cast<uint32_t>(m->request()->keys_size()));
  for (const std::string& key : m->request()->keys()) {
    kvtier::v1::BlockInfo* info = m->response()->add_blocks();
    info->set_key(std::string(key));
    info->set_size_bytes(4096);
    info->set_tier(kvtier::v1::TIER_KIND_HOST);
  }
  std::string out;
  ok = ok && m->response()->SerializeToString(&out);
  m->Release();
  return ok && !out.empty();
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvtier;
  int calls = 20000;
  int keys = 128;
  CLI::App app{"Lookup(128 keys) RPC against an empty RPC"};
  app.add_option("--calls", calls, "calls per measurement")->check(CLI::PositiveNumber);
  app.add_option("--keys", keys, "cached keys per Lookup")->check(CLI::Range(1, 4096));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  std::unique_ptr<Daemon> daemon = bench::StartDaemon("127.0.0.1:0", 256ull << 20);
  if (daemon == nullptr) return 1;
  auto channel = grpc::CreateChannel(daemon->listen_address(), grpc::InsecureChannelCredentials());
  auto kv = v1::KvCache::NewStub(channel);
  grpc::GenericStub generic(channel);
  const std::string ns = bench::OpenBlockNamespace(*kv, "lookup-bench", 4096);
  if (ns.empty()) return 1;
  v1::LookupRequest lookup;
  lookup.set_namespace_id(ns);
  {
    grpc::ClientContext ctx;
    v1::PutResponse resp;
    auto w = kv->Put(&ctx, &resp);
    for (int i = 0; i < keys; ++i) {
      v1::PutChunk chunk;
      if (i == 0) chunk.set_namespace_id(ns);
      chunk.set_key(Key(i));
      if (i > 0) chunk.set_parent_key(Key(i - 1));
      chunk.set_block_bytes(4096);
      chunk.set_data(std::string(4096, 'x'));
      w->Write(chunk);
      lookup.add_keys(Key(i));
    }
    w->WritesDone();
    if (!w->Finish().ok()) return 1;
  }
  // Health/Check with an empty request: the cheapest RPC the server has.
  grpc::ByteBuffer empty_request;
  {
    grpc::Slice s("", 0);
    empty_request = grpc::ByteBuffer(&s, 1);
  }
  auto empty = [&] {
    grpc::ClientContext ctx;
    grpc::ByteBuffer reply;
    return AwaitCall([&](auto done) {
             generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(),
                               &empty_request, &reply, std::move(done));
           })
        .ok();
  };
  // The same service's cheapest handler, through the same synchronous stub
  // as Lookup: UnregisterMemory without an id returns at once.
  auto noop = [&] {
    grpc::ClientContext ctx;
    v1::UnregisterMemoryRequest req;
    v1::UnregisterMemoryResponse resp;
    return kv->UnregisterMemory(&ctx, req, &resp).error_code() ==
           grpc::StatusCode::INVALID_ARGUMENT;
  };
  v1::LookupRequest compact = lookup;
  compact.clear_keys();
  for (const std::string& key : lookup.keys()) compact.mutable_packed_keys()->append(key);
  compact.set_packed_key_bytes(32);
  compact.set_compact_reply(true);
  // Every key answered, in the form asked for.
  auto answered = [&](const v1::LookupRequest& req, const v1::LookupResponse& resp) {
    const int n = req.compact_reply() ? resp.compact_blocks().tier_size() : resp.blocks_size();
    return resp.matched() == static_cast<uint32_t>(keys) && n == keys;
  };
  // A compact Lookup (packed keys, packed reply) with the response on an
  // arena, as kvtier's C++ client issues and parses it.
  auto look = [&] {
    grpc::ClientContext ctx;
    google::protobuf::Arena arena;
    auto* resp = google::protobuf::Arena::CreateMessage<v1::LookupResponse>(&arena);
    return kv->Lookup(&ctx, compact, resp).ok() && answered(compact, *resp);
  };
  // A Lookup (`req`) issued the way the empty RPC is: the callback stub and
  // a wait for its completion (the response still parsed, on an arena).
  auto callback_lookup = [&](const v1::LookupRequest& req) {
    grpc::ClientContext ctx;
    google::protobuf::Arena arena;
    auto* resp = google::protobuf::Arena::CreateMessage<v1::LookupResponse>(&arena);
    return AwaitCall([&](auto done) {
             kv->async()->Lookup(&ctx, &req, resp, std::move(done));
           }).ok() &&
           answered(req, *resp);
  };
  auto look_full = [&] { return callback_lookup(lookup); };
  auto look_compact = [&] { return callback_lookup(compact); };
  // The C++ client's Lookup, as an engine calls it.
  auto client = kvtier::client::Client::Connect(daemon->listen_address());
  if (!client.ok()) return 1;
  const std::vector<std::string> key_list(lookup.keys().begin(), lookup.keys().end());
  auto look_client = [&] {
    absl::StatusOr<kvtier::client::LookupResult> r = (*client)->Lookup(ns, key_list);
    return r.ok() && r->matched == static_cast<uint32_t>(keys) &&
           r->tiers.size() == static_cast<size_t>(keys);
  };
  const int per_round = std::max(1, calls / 10);
  const std::vector<std::vector<double>> rpc =
      Interleaved(per_round, {empty, noop, look, look_full, look_compact, look_client});
  const std::vector<double>&e = rpc[0], &z = rpc[1], &k = rpc[2], &a = rpc[3], &c = rpc[4],
        &l = rpc[5];
  std::printf("lookup_rpc: %d sequential calls each, same channel, loopback TCP\n", 10 * per_round);
  std::printf("  empty RPC (Health/Check, callback stub):  p50 %7.1f us  p99 %7.1f us\n",
              Pct(e, 0.5), Pct(e, 0.99));
  std::printf("  no-op KvCache RPC (blocking stub):        p50 %7.1f us  p99 %7.1f us\n",
              Pct(z, 0.5), Pct(z, 0.99));
  std::printf("  compact Lookup of %4d keys (blocking):   p50 %7.1f us  p99 %7.1f us\n", keys,
              Pct(k, 0.5), Pct(k, 0.99));
  std::printf("  full Lookup of %4d keys (callback):      p50 %7.1f us  p99 %7.1f us\n", keys,
              Pct(a, 0.5), Pct(a, 0.99));
  std::printf("  compact Lookup of %4d keys (callback):   p50 %7.1f us  p99 %7.1f us\n", keys,
              Pct(c, 0.5), Pct(c, 0.99));
  std::printf("  kvtier::Client::Lookup of %4d keys:      p50 %7.1f us  p99 %7.1f us\n", keys,
              Pct(l, 0.5), Pct(l, 0.99));
  std::printf(
      "  ratio compact Lookup/empty, callback:     p50 %.2f      p99 %.2f   (target <= 1.2)\n",
      Pct(c, 0.5) / Pct(e, 0.5), Pct(c, 0.99) / Pct(e, 0.99));
  std::printf("  ratio full Lookup/empty, callback:        p50 %.2f      p99 %.2f\n",
              Pct(a, 0.5) / Pct(e, 0.5), Pct(a, 0.99) / Pct(e, 0.99));
  std::printf("  ratio compact Lookup/no-op, blocking:     p50 %.2f      p99 %.2f\n",
              Pct(k, 0.5) / Pct(z, 0.5), Pct(k, 0.99) / Pct(z, 0.99));
  std::printf("  ratio kvtier::Client::Lookup/empty:       p50 %.2f      p99 %.2f\n",
              Pct(l, 0.5) / Pct(e, 0.5), Pct(l, 0.99) / Pct(e, 0.99));

  // The server's message work, heap and arena in turn.
  const std::string wire = lookup.SerializeAsString();
  ArenaMessages<v1::LookupRequest, v1::LookupResponse> arena_messages;
  alignas(HeapMessages) unsigned char heap_slot[sizeof(HeapMessages)];
  auto on_heap = [&] { return MessageWork(wire, [&] { return new (heap_slot) HeapMessages(); }); };
  auto on_arena = [&] {
    return MessageWork(wire, [&] { return arena_messages.AllocateMessages(); });
  };
  const std::vector<std::vector<double>> work = Interleaved(per_round, {on_heap, on_arena});
  const std::vector<double>&h = work[0], &r = work[1];
  std::printf("server message work for one Lookup (parse, answer %d keys, serialize, free)\n",
              keys);
  std::printf("  heap messages (gRPC's default):           p50 %7.1f us  p99 %7.1f us\n",
              Pct(h, 0.5), Pct(h, 0.99));
  std::printf("  ArenaMessages (the daemon's Lookup):      p50 %7.1f us  p99 %7.1f us\n",
              Pct(r, 0.5), Pct(r, 0.99));
  std::printf("  ratio arena/heap:                         p50 %.2f      p99 %.2f\n",
              Pct(r, 0.5) / Pct(h, 0.5), Pct(r, 0.99) / Pct(h, 0.99));
  daemon->Shutdown(absl::Seconds(1));
  return 0;
}
