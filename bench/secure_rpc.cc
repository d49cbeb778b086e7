// bench/secure_rpc: what metrics and security cost per RPC. The same Lookup
// of 128 cached keys, through the C++ client, against four in-process
// daemons in the same run:
//   plain        metrics off, authentication off      (the baseline)
//   metrics      RPC interceptor (counter + histogram per call)
//   token        metrics + bearer-token authentication (SHA-256 per call)
//   tls+token    metrics + TLS + token
// Calls are issued one at a time, in interleaved rounds so that machine
// noise falls on every configuration alike. Prints p50/p99 and the ratio of
// each to the baseline.
//
//   build/bench/secure_rpc [--calls 20000]
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "kvtier/client.h"
#include "server/config.h"
#include "server/daemon.h"
#include "spdlog/spdlog.h"

#ifndef KVTIER_SOURCE_DIR
#error "KVTIER_SOURCE_DIR must name the source tree"
#endif

namespace {

using kvtier::client::Client;
using WallClock = std::chrono::steady_clock;

struct Setup {
  const char* name;
  bool metrics, token, tls;
  std::unique_ptr<kvtier::Daemon> daemon;
  std::unique_ptr<Client> client;
  std::string ns;
  std::vector<double> us;
};

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 20000;
  CLI::App app{"What metrics and security cost per RPC"};
  app.add_option("--calls", calls, "calls per measurement")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (calls < 1) {
    std::fprintf(stderr, "--calls must be at least 1\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::warn);
  const std::string dir = absl::StrCat("/tmp/kvtier-secure-rpc-", getpid());
  if (std::system(
          absl::StrCat("bash ", KVTIER_SOURCE_DIR, "/deploy/make-certs.sh ", dir, " > /dev/null")
              .c_str()) != 0) {
    return 1;
  }
  const std::string token = "bench-token-0123456789";
  {
    std::ofstream out(dir + "/identities.yaml");
    out << "identities:\n  - {token: " << token << ", tenant: bench}\n";
  }
  chmod((dir + "/identities.yaml").c_str(), 0600);

  std::vector<Setup> setups;
  setups.push_back({"plain", false, false, false, nullptr, nullptr, "", {}});
  setups.push_back({"metrics", true, false, false, nullptr, nullptr, "", {}});
  setups.push_back({"token", true, true, false, nullptr, nullptr, "", {}});
  setups.push_back({"tls+token", true, true, true, nullptr, nullptr, "", {}});
  std::vector<std::string> keys, data;
  for (int i = 0; i < 128; ++i) {
    keys.push_back(absl::StrCat("key-", i));
    data.push_back(std::string(4096, static_cast<char>('a' + i % 26)));
  }
  for (Setup& s : setups) {
    kvtier::DaemonConfig c = kvtier::DefaultConfig(8ull << 30);
    c.listen = "127.0.0.1:0";
    c.metrics_listen = s.metrics ? "127.0.0.1:0" : "off";
    c.host_tier_bytes = 256ull << 20;
    c.costmodel_probe_tiers = false;
    c.nvme_dirs = "";
    c.peer_transport = "off";
    kvtier::client::ClientOptions o;
    if (s.token) {
      c.identities_file = dir + "/identities.yaml";
      o.credentials.token = token;
    }
    if (s.tls) {
      c.tls_cert = dir + "/server.pem";
      c.tls_key = dir + "/server.key";
      o.credentials.tls_ca_file = dir + "/ca.pem";
    }
    auto d = kvtier::Daemon::Start(c);
    if (!d.ok()) {
      std::fprintf(stderr, "%s: %s\n", s.name, d.status().ToString().c_str());
      return 1;
    }
    s.daemon = *std::move(d);
    s.client = *Client::Connect(s.daemon->listen_address(), o);
    kvtier::client::NamespaceOptions ns;
    ns.model_id = "secure-rpc-bench";
    ns.layout = {1, 1, 128, "bf16", 8, 0, 1};  // 4 KiB blocks
    auto opened = s.client->OpenNamespace(ns);
    if (!opened.ok() || !s.client->Put(opened->id, keys, data).ok()) {
      std::fprintf(stderr, "%s: setup failed\n", s.name);
      return 1;
    }
    s.ns = opened->id;
  }
  auto lookup = [&](Setup& s) {
    const auto t0 = WallClock::now();
    auto r = s.client->Lookup(s.ns, keys);
    if (!r.ok() || r->matched != 128) std::abort();
    return std::chrono::duration<double, std::micro>(WallClock::now() - t0).count();
  };
  for (Setup& s : setups) {
    for (int i = 0; i < 1000; ++i) lookup(s);  // warm up
  }
  constexpr int kRound = 500;
  for (int done = 0; done < calls; done += kRound) {
    for (Setup& s : setups) {
      for (int i = 0; i < kRound; ++i) s.us.push_back(lookup(s));
    }
  }
  std::printf(
      "secure_rpc: Lookup of 128 cached keys, %d sequential calls per configuration, "
      "loopback TCP, interleaved rounds of %d\n",
      calls, kRound);
  const double base50 = Pct(setups[0].us, 0.5), base99 = Pct(setups[0].us, 0.99);
  for (const Setup& s : setups) {
    const double p50 = Pct(s.us, 0.5), p99 = Pct(s.us, 0.99);
    std::printf("  %-10s p50 %7.1f us  p99 %7.1f us   ratio to plain: p50 %.2f  p99 %.2f\n", s.name,
                p50, p99, p50 / base50, p99 / base99);
  }
  for (Setup& s : setups) {
    s.client.reset();
    s.daemon.reset();
  }
  return std::system(("rm -rf " + dir).c_str()) == 0 ? 0 : 1;
}
