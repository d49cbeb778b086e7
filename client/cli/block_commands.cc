#include "client/cli/block_commands.h"

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"
#include "client/cli/daemon_connection.h"
#include "client/cli/file_blocks.h"
#include "kvtier/client.h"
#include "kvtier/v1/kvcache.pb.h"
#include "nlohmann/json.hpp"

namespace kvtier {
namespace {

struct FileNamespace {
  std::string model = "kvtier-cli";
  uint64_t block_bytes = uint64_t{256} << 10;
  std::string namespace_id;  // overrides model/block_bytes for get and transfer
};

// Opens (idempotently) the namespace `kvtier put` uses for this block size.
int OpenFileNamespace(const Globals& g, client::Client& c, const FileNamespace& f, std::string* id,
                      uint64_t* block_bytes) {
  if (f.block_bytes == 0 || f.block_bytes % kFileBlockGranule != 0) {
    return LocalError("--block-bytes must be a positive multiple of 512");
  }
  client::NamespaceOptions o;
  o.model_id = f.model;
  o.layout.num_layers = 1;
  o.layout.num_kv_heads = 1;
  o.layout.head_dim = 128;
  o.layout.dtype = "bf16";
  o.layout.tokens_per_block = static_cast<uint32_t>(f.block_bytes / kFileBlockGranule);
  o.layout.tp_size = 1;
  absl::StatusOr<client::OpenedNamespace> ns = c.OpenNamespace(o);
  if (!ns.ok()) return RpcFailed(g, "OpenNamespace", ns.status());
  *id = ns->id;
  *block_bytes = ns->block_bytes;
  return 0;
}

// --namespace, or the namespace `kvtier put` used; 0 or the exit status.
int ResolveNamespace(const Globals& g, client::Client& c, const FileNamespace& f, std::string* id) {
  if (!f.namespace_id.empty()) {
    *id = f.namespace_id;
    return 0;
  }
  uint64_t block_bytes = 0;
  return OpenFileNamespace(g, c, f, id, &block_bytes);
}

void AddFileNamespaceFlags(CLI::App* cmd, FileNamespace* f) {
  cmd->add_option("--block-bytes", f->block_bytes, "block size used by put")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd->add_option("--model", f->model, "model id used by put")->capture_default_str();
  cmd->add_option("--namespace", f->namespace_id,
                  "namespace id (instead of --block-bytes/--model)");
}

struct PutFlags {
  std::string path;
  FileNamespace ns;
  uint64_t chunk_bytes = 1 << 20;
  // A file's last block is kept like the others (unlike an engine's partial
  // block, which the daemon reclaims first unless told otherwise).
  uint32_t retention = 35;
};

int Put(const Globals& g, const PutFlags& p) {
  std::ifstream in(p.path, std::ios::binary);
  if (!in) return LocalError("cannot read '" + p.path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string contents = buf.str();
  if (contents.empty()) return LocalError("'" + p.path + "' is empty; nothing to put");
  // The daemon's default message limit is 16 MiB; leave room for headers.
  if (p.chunk_bytes == 0 || p.chunk_bytes > (uint64_t{8} << 20)) {
    return LocalError("--chunk-bytes must be in 1..8MiB");
  }

  std::unique_ptr<client::Client> c = ConnectClient(g);
  if (c == nullptr) return 2;
  std::string ns;
  uint64_t block_bytes = 0;
  if (int rc = OpenFileNamespace(g, *c, p.ns, &ns, &block_bytes); rc != 0) return rc;
  const std::vector<FileBlock> blocks = SplitIntoBlocks(contents, block_bytes);
  std::vector<std::string> keys;
  std::vector<absl::string_view> data;
  for (const FileBlock& b : blocks) {
    keys.push_back(b.key);
    data.push_back(absl::string_view(contents).substr(b.offset, b.size));
  }
  client::PutOptions options;
  options.chunk_bytes = p.chunk_bytes;
  options.retention_priority = p.retention;
  absl::StatusOr<client::PutResult> put = c->PutBlocks(ns, keys, data, options);
  if (!put.ok()) return RpcFailed(g, "Put", put.status());

  if (g.json) {
    nlohmann::json j;
    j["namespace_id"] = ns;
    j["block_bytes"] = block_bytes;
    j["blocks"] = blocks.size();
    j["bytes"] = contents.size();
    j["blocks_stored"] = put->blocks_stored;
    j["blocks_already_cached"] = put->blocks_already_cached;
    j["keys"] = nlohmann::json::array();
    for (const FileBlock& b : blocks) j["keys"].push_back(absl::BytesToHexString(b.key));
    std::cout << j.dump(2) << "\n";
  } else {
    for (const FileBlock& b : blocks) std::cout << absl::BytesToHexString(b.key) << "\n";
    std::fprintf(stderr, "kvtier: put %zu blocks (%s; %u new, %u already cached) in namespace %s\n",
                 blocks.size(), HumanBytes(contents.size()).c_str(), put->blocks_stored,
                 put->blocks_already_cached, ns.c_str());
  }
  return 0;
}

struct GetFlags {
  std::vector<std::string> keys;
  std::string out_path;
  FileNamespace ns;
};

int Get(const Globals& g, const GetFlags& flags) {
  std::vector<std::string> keys;
  if (int rc = UnhexKeys(flags.keys, &keys); rc != 0) return rc;
  std::unique_ptr<client::Client> c = ConnectClient(g);
  if (c == nullptr) return 2;
  std::string ns;
  if (int rc = ResolveNamespace(g, *c, flags.ns, &ns); rc != 0) return rc;
  // Write to a temporary file and rename on success: a failed get leaves no
  // partial output behind.
  const std::string& out_path = flags.out_path;
  const std::string tmp = out_path + ".kvtier-partial";
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) return LocalError("cannot write '" + tmp + "'");
  uint64_t total = 0, blocks = 0, expect_offset = 0, block_size = 0;
  std::string protocol_error;
  absl::Status s = c->GetChunks(ns, keys, [&](const client::GetChunkView& chunk) {
    if (!chunk.key.empty()) {
      if (expect_offset != block_size) protocol_error = "a block ended early";
      if (blocks >= keys.size() || chunk.key != keys[blocks]) {
        protocol_error = "blocks arrived out of order";
      }
      ++blocks;
      block_size = chunk.block_bytes;
      expect_offset = 0;
    }
    if (chunk.offset != expect_offset) protocol_error = "chunk offsets are not contiguous";
    if (!protocol_error.empty()) return false;
    out.write(chunk.data.data(), static_cast<std::streamsize>(chunk.data.size()));
    expect_offset += chunk.data.size();
    total += chunk.data.size();
    return true;
  });
  out.close();
  if (protocol_error.empty() && s.ok() && (blocks != keys.size() || expect_offset != block_size)) {
    protocol_error = "the stream ended before every block arrived";
  }
  if (!protocol_error.empty() || !s.ok() || !out) {
    std::remove(tmp.c_str());
    if (!protocol_error.empty()) return LocalError("Get: " + protocol_error);
    if (!s.ok()) return RpcFailed(g, "Get", s);
    return LocalError("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return LocalError("cannot rename '" + tmp + "' to '" + out_path + "'");
  }
  if (g.json) {
    nlohmann::json j;
    j["blocks"] = blocks;
    j["bytes"] = total;
    j["output"] = out_path;
    std::cout << j.dump(2) << "\n";
  } else {
    std::fprintf(stderr, "kvtier: wrote %llu blocks (%s) to %s\n",
                 static_cast<unsigned long long>(blocks), HumanBytes(total).c_str(),
                 out_path.c_str());
  }
  return 0;
}

struct TransferFlags {
  std::vector<std::string> keys;
  std::string peer;
  bool push = false;
  bool pull = false;
  FileNamespace ns;
};

// The daemon's answer as it sends it (--json prints the TransferResponse).
v1::TransferResponse ToProto(const client::TransferResult& r) {
  v1::TransferResponse resp;
  for (const client::BlockCompletion& b : r.blocks) {
    v1::BlockCompletion* c = resp.add_blocks();
    c->set_index(b.index);
    c->set_key(b.key);
    c->set_code(static_cast<int32_t>(b.status.code()));
    c->set_message(std::string(b.status.message()));
    c->set_size_bytes(b.size_bytes);
  }
  resp.set_bytes_moved(r.bytes_moved);
  resp.set_transport_seconds(r.transport_seconds);
  resp.set_lanes(r.lanes);
  return resp;
}

// `kvtier transfer --peer ADDR (--push | --pull) KEY...`: moves blocks of a
// `kvtier put` namespace between the daemon at --addr and a peer daemon.
int Transfer(const Globals& g, const TransferFlags& flags) {
  std::vector<std::string> keys;
  if (int rc = UnhexKeys(flags.keys, &keys); rc != 0) return rc;
  std::unique_ptr<client::Client> c = ConnectClient(g);
  if (c == nullptr) return 2;
  std::string ns;
  if (int rc = ResolveNamespace(g, *c, flags.ns, &ns); rc != 0) return rc;
  absl::StatusOr<client::TransferResult> r =
      c->Transfer(ns, keys, flags.peer,
                  flags.pull ? client::TransferDirection::kPull : client::TransferDirection::kPush);
  if (!r.ok()) return RpcFailed(g, "Transfer", r.status());
  if (g.json) {
    PrintJson(ToProto(*r));
  } else {
    for (const client::BlockCompletion& b : r->blocks) {
      std::cout << absl::BytesToHexString(b.key) << "  "
                << (b.status.ok() ? "ok" : absl::StatusCodeToString(b.status.code()))
                << (b.status.message().empty() ? "" : "  " + std::string(b.status.message()))
                << "\n";
    }
    std::cout << HumanBytes(r->bytes_moved) << " moved over " << r->lanes << " in "
              << r->transport_seconds << " s\n";
  }
  for (const client::BlockCompletion& b : r->blocks) {
    if (!b.status.ok()) return 1;
  }
  return 0;
}

}  // namespace

void RegisterBlockCommands(CLI::App& app, CommandSet* commands) {
  auto p = std::make_shared<PutFlags>();
  auto* put = app.add_subcommand("put", "store a file as a chain of blocks; prints their keys");
  put->add_option("FILE", p->path, "file to store")->required();
  put->add_option("--block-bytes", p->ns.block_bytes, "block size (multiple of 512)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  put->add_option("--chunk-bytes", p->chunk_bytes, "bytes per Put message")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  put->add_option("--model", p->ns.model, "model id of the namespace")->capture_default_str();
  put->add_option("--retention", p->retention,
                  "retention priority of the blocks, 0..100 (higher kept longer)")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  commands->Add(put, [p](const Globals& g) { return Put(g, *p); });

  auto gf = std::make_shared<GetFlags>();
  auto* get = app.add_subcommand("get", "fetch blocks by key (hex) into a file");
  get->add_option("KEY", gf->keys, "block keys in hex, in order")->required();
  get->add_option("-o,--output", gf->out_path, "output file")->required();
  AddFileNamespaceFlags(get, &gf->ns);
  commands->Add(get, [gf](const Globals& g) { return Get(g, *gf); });

  auto t = std::make_shared<TransferFlags>();
  auto* transfer = app.add_subcommand(
      "transfer", "move blocks of a `put` namespace between this daemon and a peer daemon");
  transfer->add_option("KEY", t->keys, "block keys in hex, in order")->required();
  transfer->add_option("--peer", t->peer, "the other daemon, host:port")->required();
  auto* push_flag =
      transfer->add_flag("--push", t->push, "send from --addr to --peer (the default)");
  transfer->add_flag("--pull", t->pull, "fetch from --peer into --addr")->excludes(push_flag);
  AddFileNamespaceFlags(transfer, &t->ns);
  commands->Add(transfer, [t](const Globals& g) { return Transfer(g, *t); });
}

}  // namespace kvtier
