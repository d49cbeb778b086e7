// bench/put_get_rpc: the gRPC byte path. C client threads each Put one block
// (a fresh key, so it is really stored) and then Get it back, against an
// in-process kvtierd on loopback TCP. Prints Put and Get operations per
// second and MB/s per value size. The first Put of each size fills host
// arena memory no block has used yet, so the kernel faults in and zeroes
// each page then ("Put, first fill"; it also takes the server's warm-up,
// but the faults are most of it: see --prefault); the blocks are then deleted and Put
// again into the same, now resident, slots ("Put"), as in a daemon past its
// first fill (and as redis-benchmark's SET overwrites one key in memory its
// allocator already holds). bench/put_get_vs_redis.sh runs it beside
// redis-benchmark doing SET/GET of the same sizes at the same concurrency.
// Its floor, in the same run: the same clients calling the service's
// cheapest RPC (UnregisterMemory without an id, refused at once), which is
// what gRPC and the server's dispatch cost before any byte moves. With
// --prefault the daemon faults in its arena at start (host_tier.prefault):
// the first fill then runs as the second. With --chunk-bytes a Put sends
// its block in chunks of that many bytes (the last may be shorter), as the
// clients do for blocks above their chunk size; by default in one chunk.
//
//   build/bench/put_get_rpc [--clients 8] [--ops 2000] [--sizes 4096,65536,262144] [--csv]
//                           [--prefault] [--chunk-bytes N]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/bench_daemon.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  using namespace kvtier;
  int clients = 8, ops = 2000;
  bool csv = false, prefault = false;
  std::vector<uint64_t> sizes = {4096, 65536, 262144};
  CLI::App app{"The gRPC byte path: Put (first fill, then resident) and Get of blocks"};
  app.add_flag("--csv", csv, "print CSV rows");
  app.add_flag("--prefault", prefault, "fault in the daemon's host arena at start");
  uint64_t chunk_bytes = 0;  // 0: one chunk per block
  app.add_option("--chunk-bytes", chunk_bytes, "bytes per Put chunk (default: the whole block)")
      ->check(CLI::PositiveNumber);
  app.add_option("--clients", clients, "client threads")->check(CLI::PositiveNumber);
  app.add_option("--ops", ops, "blocks per size, shared by the clients (each Put twice, then Get)")
      ->check(CLI::PositiveNumber);
  app.add_option("--sizes", sizes, "block sizes in bytes, comma-separated")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  std::unique_ptr<Daemon> daemon = bench::StartDaemon("127.0.0.1:0", 2ull << 30, prefault);
  if (daemon == nullptr) return 1;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  if (!csv) {
    std::printf("put_get_rpc: %d clients, %d operations per size, Puts in %s\n", clients, ops,
                chunk_bytes == 0 ? "one chunk per block"
                                 : absl::StrCat("chunks of ", chunk_bytes, " bytes").c_str());
  }
  {
    std::atomic<int> next{0};
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < clients; ++t) {
      threads.emplace_back([&, t] {
        grpc::ChannelArguments a = args;
        a.SetInt("kvtier.client", t);
        auto kv = v1::KvCache::NewStub(grpc::CreateCustomChannel(
            daemon->listen_address(), grpc::InsecureChannelCredentials(), a));
        for (int i = next++; i < ops; i = next++) {
          grpc::ClientContext ctx;
          v1::UnregisterMemoryRequest req;
          v1::UnregisterMemoryResponse resp;
          kv->UnregisterMemory(&ctx, req, &resp).IgnoreError();
        }
      });
    }
    for (auto& th : threads) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (csv) {
      std::printf("kvtier,NOOP,0,%.0f\n", ops / s);
    } else {
      std::printf("  empty KvCache RPC (the floor): %8.0f calls/s\n", ops / s);
    }
  }
  for (uint64_t size : sizes) {
    // Blocks of `size` bytes: 1 layer x 1 head x 128 dims x bf16 x size/512 tokens.
    auto setup = v1::KvCache::NewStub(grpc::CreateCustomChannel(
        daemon->listen_address(), grpc::InsecureChannelCredentials(), args));
    const std::string ns = bench::OpenBlockNamespace(*setup, absl::StrCat("bench-", size), size);
    if (ns.empty()) return 1;
    const std::string value(size, 'v');
    std::atomic<int> next{0};
    std::atomic<int> failures{0};
    // Phases: 0 Put into fresh arena memory, 1 Put again after a Delete, 2 Get.
    double seconds[3] = {0, 0, 0};
    auto key_of = [size](int i) { return absl::StrCat("s", size, "k", i); };
    for (int phase = 0; phase < 3; ++phase) {
      if (phase == 1) {
        for (int first = 0; first < ops; first += 1000) {
          v1::DeleteRequest del;
          del.set_namespace_id(ns);
          for (int i = first; i < std::min(ops, first + 1000); ++i) del.add_keys(key_of(i));
          grpc::ClientContext ctx;
          v1::DeleteResponse resp;
          if (!setup->Delete(&ctx, del, &resp).ok()) ++failures;
        }
      }
      next = 0;
      std::vector<std::thread> threads;
      const auto t0 = std::chrono::steady_clock::now();
      for (int t = 0; t < clients; ++t) {
        threads.emplace_back([&, t] {
          // One channel per client, as redis-benchmark opens one connection each.
          grpc::ChannelArguments a = args;
          a.SetInt("kvtier.client", t);  // distinct channels, not one shared subchannel
          auto kv = v1::KvCache::NewStub(grpc::CreateCustomChannel(
              daemon->listen_address(), grpc::InsecureChannelCredentials(), a));
          for (int i = next++; i < ops; i = next++) {
            const std::string key = key_of(i);
            grpc::ClientContext ctx;
            if (phase < 2) {
              v1::PutResponse resp;
              auto w = kv->Put(&ctx, &resp);
              const size_t step = chunk_bytes == 0 ? value.size() : chunk_bytes;
              for (size_t at = 0; at < value.size(); at += step) {
                v1::PutChunk chunk;
                if (at == 0) {
                  chunk.set_namespace_id(ns);
                  chunk.set_key(key);
                  chunk.set_block_bytes(size);
                }
                chunk.set_data(value.data() + at, std::min(step, value.size() - at));
                w->Write(chunk);
              }
              w->WritesDone();
              if (!w->Finish().ok()) ++failures;
            } else {
              v1::GetRequest req;
              req.set_namespace_id(ns);
              req.add_keys(key);
              req.set_max_chunk_bytes(static_cast<uint32_t>(size));
              auto r = kv->Get(&ctx, req);
              v1::GetChunk chunk;
              uint64_t got = 0;
              while (r->Read(&chunk)) got += chunk.data().size();
              if (!r->Finish().ok() || got != size) ++failures;
            }
          }
        });
      }
      for (auto& th : threads) th.join();
      seconds[phase] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (failures > 0) {
      std::fprintf(stderr, "%d failed operations\n", failures.load());
      return 1;
    }
    const auto bytes = static_cast<unsigned long long>(size);
    if (csv) {
      std::printf("kvtier,PUT_FIRST_FILL,%llu,%.0f\nkvtier,PUT,%llu,%.0f\nkvtier,GET,%llu,%.0f\n",
                  bytes, ops / seconds[0], bytes, ops / seconds[1], bytes, ops / seconds[2]);
    } else {
      std::printf(
          "  %8llu B: Put, first fill %8.0f ops/s  Put %8.0f ops/s (%7.1f MB/s)  Get %8.0f ops/s "
          "(%7.1f MB/s)\n",
          bytes, ops / seconds[0], ops / seconds[1], ops * size / seconds[1] / 1e6,
          ops / seconds[2], ops * size / seconds[2] / 1e6);
    }
  }
  daemon->Shutdown(absl::Seconds(1));
  return 0;
}
