// bench/host_put_get: Put and Get throughput of the host tier over gRPC
// (loopback TCP and a unix socket) for 256 KiB, 1 MiB and 4 MiB blocks,
// against the machine's copy limit in the same block size, measured in the
// same run (bench/memcpy_limit.h: the best of memcpy and a streaming copy
// over 1..N threads). Prints the median of --reps repetitions and the ratios.
//
//   build/bench/host_put_get [--mib-per-size 256] [--reps 3] [--blocks-per-call 16]
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/memcpy_limit.h"
#include "kvtier/v1/kvcache.grpc.pb.h"
#include "server/config.h"
#include "server/daemon.h"
#include "spdlog/spdlog.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Args {
  uint64_t mib_per_size = 256;
  int reps = 3;
  int blocks_per_call = 16;
};

class Runner {
 public:
  Runner(const std::string& addr, uint64_t block) : block_(block) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetMaxSendMessageSize(64 << 20);
    stub_ = v1::KvCache::NewStub(
        grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args));
    v1::OpenNamespaceRequest req;
    req.set_model_id("bench");
    auto* l = req.mutable_layout();
    l->set_num_layers(1);
    l->set_num_kv_heads(1);
    l->set_head_dim(128);
    l->set_dtype(v1::DTYPE_BF16);
    l->set_tokens_per_block(static_cast<uint32_t>(block / 512));
    l->set_tp_size(1);
    grpc::ClientContext ctx;
    v1::OpenNamespaceResponse resp;
    if (!stub_->OpenNamespace(&ctx, req, &resp).ok()) std::abort();
    ns_ = resp.namespace_id();
  }

  // Puts `count` blocks as chains of `per_call` blocks; returns GB/s.
  double Put(const std::string& payload, int count, int per_call, const std::string& tag) {
    keys_.clear();
    const auto t0 = Clock::now();
    for (int i = 0; i < count; i += per_call) {
      grpc::ClientContext ctx;
      v1::PutResponse resp;
      auto writer = stub_->Put(&ctx, &resp);
      std::string parent;
      for (int j = i; j < std::min(count, i + per_call); ++j) {
        std::string key = absl::StrCat(tag, "-", j);
        for (uint64_t off = 0; off < block_; off += kChunk) {
          v1::PutChunk chunk;
          if (off == 0) {
            chunk.set_namespace_id(ns_);
            chunk.set_key(key);
            chunk.set_parent_key(parent);
            chunk.set_block_bytes(block_);
          }
          chunk.set_data(payload.data() + off, std::min(kChunk, block_ - off));
          writer->Write(chunk);
        }
        parent = key;
        keys_.push_back(std::move(key));
      }
      writer->WritesDone();
      grpc::Status s = writer->Finish();
      if (!s.ok()) {
        std::fprintf(stderr, "Put failed: %s\n", s.error_message().c_str());
        std::exit(1);
      }
    }
    return static_cast<double>(block_) * count / Seconds(t0, Clock::now()) / 1e9;
  }

  // Gets the blocks just put, `per_call` keys per Get; returns GB/s.
  double Get(int per_call, const std::string& expect) {
    const auto t0 = Clock::now();
    uint64_t bytes = 0;
    for (size_t i = 0; i < keys_.size(); i += static_cast<size_t>(per_call)) {
      v1::GetRequest req;
      req.set_namespace_id(ns_);
      for (size_t j = i; j < std::min(keys_.size(), i + per_call); ++j) req.add_keys(keys_[j]);
      req.set_max_chunk_bytes(static_cast<uint32_t>(kChunk));
      grpc::ClientContext ctx;
      auto reader = stub_->Get(&ctx, req);
      v1::GetChunk chunk;
      while (reader->Read(&chunk)) {
        if (chunk.offset() == 0 &&
            std::memcmp(chunk.data().data(), expect.data(), chunk.data().size()) != 0) {
          std::fprintf(stderr, "Get returned wrong bytes\n");
          std::exit(1);
        }
        bytes += chunk.data().size();
      }
      if (!reader->Finish().ok()) std::exit(1);
    }
    if (bytes != block_ * keys_.size()) std::exit(1);
    return static_cast<double>(bytes) / Seconds(t0, Clock::now()) / 1e9;
  }

  void DeleteAll() {
    // Each Put call stored one chain; its first key is the root.
    v1::DeleteRequest req;
    req.set_namespace_id(ns_);
    req.set_recursive(true);
    for (size_t i = 0; i < keys_.size(); i += static_cast<size_t>(per_call_)) {
      req.add_keys(keys_[i]);
    }
    grpc::ClientContext ctx;
    v1::DeleteResponse resp;
    if (!stub_->Delete(&ctx, req, &resp).ok()) std::exit(1);
  }

  int per_call_ = 16;

 private:
  static constexpr uint64_t kChunk = 1 << 20;
  const uint64_t block_;
  std::unique_ptr<v1::KvCache::Stub> stub_;
  std::string ns_;
  std::vector<std::string> keys_;
};

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  Args args;
  CLI::App app{"Host tier Put/Get over gRPC against memcpy"};
  app.add_option("--mib-per-size", args.mib_per_size, "MiB moved per block size")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", args.reps, "repetitions (the best is reported)")
      ->check(CLI::PositiveNumber);
  app.add_option("--blocks-per-call", args.blocks_per_call, "blocks per Put/Get call")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  const uint64_t total = args.mib_per_size << 20;

  DaemonConfig tcp = DefaultConfig(PhysicalMemoryBytes());
  tcp.listen = "127.0.0.1:0";
  tcp.metrics_listen = "off";
  tcp.host_tier_bytes = total + (256ull << 20);
  tcp.log_level = "warn";
  spdlog::set_level(spdlog::level::warn);
  DaemonConfig unix_cfg = tcp;
  const std::string sock = absl::StrCat("/tmp/kvtier-bench-", getpid(), ".sock");
  unix_cfg.listen = "unix:" + sock;
  unix_cfg.metrics_listen = "off";
  auto tcp_daemon = Daemon::Start(tcp);
  auto unix_daemon = Daemon::Start(unix_cfg);
  if (!tcp_daemon.ok() || !unix_daemon.ok()) {
    std::fprintf(stderr, "cannot start daemons\n");
    return 1;
  }

  std::printf(
      "host tier Put/Get over gRPC vs the copy limit for the same bytes; %llu MiB per size, "
      "median of %d after a warm-up, %d blocks per call\n",
      static_cast<unsigned long long>(args.mib_per_size), args.reps, args.blocks_per_call);
  std::printf("%-8s %-6s %10s %10s %12s %11s %11s\n", "block", "via", "put GB/s", "get GB/s",
              "copy GB/s", "put/copy", "get/copy");
  const int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (uint64_t block : {uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{4} << 20}) {
    std::string payload(block, '\0');
    for (uint64_t i = 0; i < block; ++i) payload[i] = static_cast<char>(i * 2654435761u >> 13);
    std::vector<uint8_t> src(64ull << 20, 'x'), dst(src.size(), 'y');
    auto copy_limit = [&] {
      return bench::BestMemcpy(src.data(), dst.data(), src.size(), block, 1, max_threads).gbps;
    };
    const int count = static_cast<int>(total / block);
    for (auto* d : {&*tcp_daemon, &*unix_daemon}) {
      Runner runner((*d)->listen_address(), block);
      runner.per_call_ = args.blocks_per_call;
      std::vector<double> put, get, mem;
      // One unmeasured round first: it touches the arena's pages (a running
      // daemon pays that once) and warms the channel.
      runner.Put(payload, count, args.blocks_per_call, "warmup");
      runner.Get(args.blocks_per_call, payload);
      runner.DeleteAll();
      copy_limit();
      for (int r = 0; r < args.reps; ++r) {
        const std::string tag = absl::StrCat("r", r);
        put.push_back(runner.Put(payload, count, args.blocks_per_call, tag));
        get.push_back(runner.Get(args.blocks_per_call, payload));
        runner.DeleteAll();
        mem.push_back(copy_limit());
      }
      const double p = Median(put), g = Median(get), m = Median(mem);
      std::printf("%-8s %-6s %10.2f %10.2f %12.2f %11.3f %11.3f\n",
                  absl::StrCat(block >> 10, "KiB").c_str(), d == &*tcp_daemon ? "tcp" : "unix", p,
                  g, m, p / m, g / m);
      std::fflush(stdout);
    }
  }
  (*tcp_daemon)->Shutdown(absl::Seconds(1));
  (*unix_daemon)->Shutdown(absl::Seconds(1));
  std::remove(sock.c_str());
  return 0;
}
