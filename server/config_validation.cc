#include "server/config_validation.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"
#include "cluster/member_record.h"

namespace kvtier {
namespace {

template <typename... Parts>
absl::Status Bad(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

std::string FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a plain file";
}

// "17179869184 bytes (16.0 GiB)".
std::string Bytes(uint64_t n) {
  return absl::StrFormat("%d bytes (%.1f GiB)", n, static_cast<double>(n) / (uint64_t{1} << 30));
}

absl::Status OpenError(absl::string_view what, const std::string& path, int err) {
  const std::string msg = absl::StrCat("cannot read ", what, " '", path, "': ", std::strerror(err));
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InvalidArgumentError(msg);
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// One nvme.dirs entry as written, where it really is, and its inode when it
// exists.
struct DirName {
  std::string spelling;
  std::string real;
  bool exists = false;
  dev_t dev = 0;
  ino_t ino = 0;
};

std::string RealPath(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) p = dir;
  // Resolves symlinks in the part that exists; the rest lexically.
  std::filesystem::path real = std::filesystem::weakly_canonical(p, ec);
  if (ec) real = p;
  std::string s = real.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

absl::Status ValidateNvmeDirs(const std::string& dirs) {
  std::vector<DirName> names;
  for (absl::string_view d : absl::StrSplit(dirs, ',', absl::SkipWhitespace())) {
    DirName n;
    n.spelling = std::string(absl::StripAsciiWhitespace(d));
    if (n.spelling.empty()) continue;
    n.real = RealPath(n.spelling);
    struct stat st;
    if (::stat(n.spelling.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return Bad("nvme.dirs: '", n.spelling, "' is ", FileKind(st.st_mode), ", not a directory");
      }
      n.exists = true;
      n.dev = st.st_dev;
      n.ino = st.st_ino;
    }
    for (const DirName& o : names) {
      const bool same_inode = n.exists && o.exists && n.dev == o.dev && n.ino == o.ino;
      if (n.real == o.real || same_inode) {
        const std::string what = n.real == o.real ? absl::StrCat("are both '", n.real, "'")
                                                  : absl::StrCat("are the same directory (device ",
                                                                 n.dev, ", inode ", n.ino, ")");
        return Bad("nvme.dirs names one directory twice: '", o.spelling, "' and '", n.spelling,
                   "' ", what, "; two devices would share one slot file");
      }
    }
    names.push_back(std::move(n));
  }
  return absl::OkStatus();
}

absl::Status ValidateShmDir(const std::string& dir) {
  const std::string hint =
      "; RegisterMemory needs a tmpfs or hugetlbfs directory (or set limits.max_regions=0)";
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return Bad("server.shm_dir '", dir, "': ", std::strerror(errno), hint);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Bad("server.shm_dir '", dir, "' is ", FileKind(st.st_mode), ", not a directory", hint);
  }
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) {
    return Bad("server.shm_dir '", dir, "': statfs: ", std::strerror(errno), hint);
  }
  if (fs.f_type != TMPFS_MAGIC && fs.f_type != HUGETLBFS_MAGIC) {
    return Bad("server.shm_dir '", dir, "' is not on tmpfs or hugetlbfs (filesystem type 0x",
               absl::Hex(static_cast<uint64_t>(fs.f_type)), ")", hint);
  }
  return absl::OkStatus();
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// Never prompts: an encrypted key is refused instead of blocking the start
// on a terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

std::unique_ptr<BIO, BioFree> MemBio(const std::string& text) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The PEM certificates in `pem`, in order.
std::vector<std::unique_ptr<X509, X509Free>> PemCertificates(const std::string& pem) {
  std::vector<std::unique_ptr<X509, X509Free>> out;
  std::unique_ptr<BIO, BioFree> bio = MemBio(pem);
  while (bio != nullptr) {
    X509* x = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr);
    if (x == nullptr) break;
    out.emplace_back(x);
  }
  ERR_clear_error();
  return out;
}

}  // namespace

absl::Status ValidateListenAddress(absl::string_view key, absl::string_view address,
                                   bool allow_unix) {
  auto bad = [&](auto&&... why) { return Bad(key, " '", address, "': ", why...); };
  if (allow_unix) {
    for (absl::string_view scheme : {"unix:", "unix-abstract:"}) {
      if (absl::StartsWith(address, scheme)) {
        if (address.size() == scheme.size()) return bad("names no socket");
        return absl::OkStatus();
      }
    }
  }
  const std::string forms = allow_unix ? "host:port, [ipv6]:port or unix:/path" : "host:port";
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return bad("not ", forms);
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return bad("no host (0.0.0.0 or [::] listens on every interface)");
  for (char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c)) || c == '/') {
      return bad("the host '", host, "' is malformed (", forms, ")");
    }
  }
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad("malformed IPv6 host '", host, "'");
  } else if (absl::StrContains(host, ':')) {
    return bad("an IPv6 host must be in brackets, e.g. [::1]:50051");
  }
  bool digits = !port.empty() && port.size() <= 10;
  for (char c : port) digits = digits && absl::ascii_isdigit(static_cast<unsigned char>(c));
  uint64_t value = 0;
  if (!digits || !absl::SimpleAtoi(port, &value)) {
    return bad("the port '", port, "' is not a number in 0..65535");
  }
  if (value > 65535) return bad("the port ", value, " is outside 0..65535");
  return absl::OkStatus();
}

absl::Status ValidateEventsConfig(const DaemonConfig& c) {
  for (const auto& [key, endpoint] :
       {std::pair<absl::string_view, const std::string&>{"events.zmq_endpoint",
                                                         c.events_zmq_endpoint},
        {"events.zmq_replay_endpoint", c.events_zmq_replay_endpoint}}) {
    if (!endpoint.empty() && !absl::StartsWith(endpoint, "tcp://") &&
        !absl::StartsWith(endpoint, "ipc://")) {
      return Bad(key, " '", endpoint, "' must be a ZeroMQ endpoint: tcp://HOST:PORT or ipc://PATH");
    }
  }
  if (c.events_zmq_endpoint.empty() && !c.events_zmq_replay_endpoint.empty()) {
    return Bad("events.zmq_replay_endpoint needs events.zmq_endpoint");
  }
  if (!c.events_zmq_endpoint.empty() && c.events_zmq_endpoint == c.events_zmq_replay_endpoint) {
    return Bad("events.zmq_endpoint and events.zmq_replay_endpoint must differ");
  }
  if (c.events_zmq_hashes != "int" && c.events_zmq_hashes != "bytes") {
    return Bad("events.zmq_hashes must be int (vLLM's default) or bytes, got '",
               c.events_zmq_hashes, "'");
  }
  if (c.events_zmq_buffer_steps == 0 || c.events_zmq_buffer_steps > 1'000'000) {
    return Bad("events.zmq_buffer_steps must be in 1..1000000");
  }
  return absl::OkStatus();
}

absl::Status ValidateClusterConfig(const DaemonConfig& c) {
  if (c.cluster_lease_ttl_ms < 2000 || c.cluster_lease_ttl_ms > 60'000 ||
      c.cluster_lease_ttl_ms % 1000 != 0) {
    return Bad(
        "cluster.lease_ttl_ms must be whole seconds in 2000..60000 (etcd leases are in "
        "seconds, and etcd raises shorter ones to its minimum), got ",
        c.cluster_lease_ttl_ms);
  }
  if (c.cluster_etcd_timeout_ms == 0 || c.cluster_etcd_timeout_ms > c.cluster_lease_ttl_ms / 3) {
    return Bad("cluster.etcd_timeout_ms must be in 1..cluster.lease_ttl_ms/3 (",
               c.cluster_lease_ttl_ms / 3, ")");
  }
  if (c.cluster_pull_timeout_ms == 0 || c.cluster_pull_timeout_ms > 600'000) {
    return Bad("cluster.pull_timeout_ms must be in 1..600000");
  }
  if (absl::Status s = ValidateNodeId(c.cluster_name); !s.ok()) {
    return Bad("cluster.name: ", s.message());
  }
  if (c.cluster_etcd.empty()) return absl::OkStatus();
  for (absl::string_view endpoint : absl::StrSplit(c.cluster_etcd, ',')) {
    endpoint = absl::StripAsciiWhitespace(endpoint);
    if (absl::StartsWith(endpoint, "https://")) {
      return Bad("cluster.etcd '", endpoint,
                 "': https is not supported; reach etcd over http on a trusted network");
    }
    absl::ConsumePrefix(&endpoint, "http://");
    RETURN_IF_ERROR(ValidateListenAddress("cluster.etcd", endpoint, false));
  }
  if (c.cluster_node_id.empty() && c.cluster_advertise.empty() &&
      !absl::StartsWith(c.listen, "unix")) {
    // The default node id is the advertised address.
    if (absl::Status s = ValidateNodeId(c.listen); !s.ok()) {
      return Bad("cluster.node_id: server.listen cannot serve as one (", s.message(),
                 "); set cluster.node_id");
    }
  }
  if (!c.cluster_node_id.empty()) {
    if (absl::Status s = ValidateNodeId(c.cluster_node_id); !s.ok()) {
      return Bad("cluster.node_id: ", s.message());
    }
  }
  const bool advertised = !c.cluster_advertise.empty();
  const absl::string_view key = advertised ? "cluster.advertise" : "server.listen";
  const absl::string_view address = advertised ? c.cluster_advertise : c.listen;
  if (absl::StartsWith(address, "unix")) {
    return Bad("cluster.etcd needs an address peers can dial: server.listen is ", address,
               "; set cluster.advertise to host:port");
  }
  RETURN_IF_ERROR(ValidateListenAddress(key, address, false));
  const absl::string_view host = address.substr(0, address.rfind(':'));
  if (host == "0.0.0.0" || host == "[::]") {
    return Bad("cluster.etcd needs an address peers can dial: ", key, " ", address,
               " is every interface; set cluster.advertise to this node's host:port");
  }
  if (advertised && absl::EndsWith(address, ":0")) {
    return Bad("cluster.advertise ", address, " has no port");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadBoundedFile(const std::string& path, absl::string_view what,
                                            uint64_t max_bytes) {
  auto too_big = [&](absl::string_view size) {
    return Bad(what, " '", path, "': ", size, " bytes, over the ", max_bytes,
               "-byte limit for this file");
  };
  // Look before opening: opening a FIFO would block, and a device such as
  // /dev/zero never ends.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OpenError(what, path, errno);
  if (!S_ISREG(st.st_mode)) {
    return Bad(what, " '", path, "': not a regular file (", FileKind(st.st_mode), ")");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) return too_big(absl::StrCat(st.st_size));
  // O_NONBLOCK: should a FIFO replace the file after the stat, opening it
  // does not wait for a writer (and the fstat below refuses it).
  FdCloser f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (f.fd < 0) return OpenError(what, path, errno);
  if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Bad(what, " '", path, "': not a regular file (", FileKind(st.st_mode), ")");
  }
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(f.fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return OpenError(what, path, errno);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      return too_big(absl::StrCat("more than ", max_bytes));  // it grew after the stat
    }
  }
  return out;
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, absl::string_view key) {
  absl::StatusOr<std::string> text = ReadBoundedFile(path, key);
  if (!text.ok()) return absl::InvalidArgumentError(text.status().message());
  return text;
}

absl::Status ValidateConfigForHost(const DaemonConfig& c, uint64_t physical_memory_bytes) {
  if (c.host_tier_bytes > physical_memory_bytes) {
    return Bad("host_tier.bytes (", Bytes(c.host_tier_bytes),
               ") exceeds this machine's physical memory (", Bytes(physical_memory_bytes), ")");
  }
  if (!c.nvme_dirs.empty()) {
    RETURN_IF_ERROR(ValidateNvmeDirs(c.nvme_dirs));
  }
  if (c.max_regions > 0) {
    RETURN_IF_ERROR(ValidateShmDir(c.shm_dir));
  }
  return absl::OkStatus();
}

absl::Status ValidateTlsPem(const DaemonConfig& c, const std::string& cert_pem,
                            const std::string& key_pem, const std::string& client_ca_pem) {
  std::vector<std::unique_ptr<X509, X509Free>> certs = PemCertificates(cert_pem);
  if (certs.empty()) {
    return Bad("security.tls_cert: '", c.tls_cert, "' is not a PEM certificate");
  }
  std::unique_ptr<EVP_PKEY, KeyFree> key;
  if (std::unique_ptr<BIO, BioFree> bio = MemBio(key_pem); bio != nullptr) {
    key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  }
  ERR_clear_error();
  if (key == nullptr) {
    return Bad("security.tls_key: '", c.tls_key,
               "' is not a PEM private key (or is encrypted: kvtierd reads unencrypted keys)");
  }
  if (X509_check_private_key(certs.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return Bad("security.tls_key: '", c.tls_key,
               "' does not match the certificate in security.tls_cert '", c.tls_cert, "'");
  }
  if (!c.tls_client_ca.empty() && PemCertificates(client_ca_pem).empty()) {
    return Bad("security.tls_client_ca: '", c.tls_client_ca, "' holds no PEM certificate");
  }
  return absl::OkStatus();
}

}  // namespace kvtier
