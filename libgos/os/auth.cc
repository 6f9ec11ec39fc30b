#include "gos/os/auth.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

namespace gos::os {
namespace {

constexpr size_t kKeyBytes = 32;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string ClusterTag(std::span<const uint8_t> key) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t b : key) h = (h ^ b) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08llx", static_cast<unsigned long long>(h >> 32));
  return buf;
}

void RemoveClusterFiles(std::span<const uint8_t> key, const std::string& init_root) {
  const std::string tag = ClusterTag(key);
  std::error_code ec;
  std::filesystem::remove_all(init_root + "/" + tag, ec);
  const std::string prefix = "gos-" + tag + "-";
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ::unlink(e.path().c_str());
  }
}

StatusOr<std::vector<uint8_t>> LoadClusterKey(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "open cluster key " + path);
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return ErrnoError(e, "stat cluster key " + path);
  }
  if (st.st_mode & 077) {
    ::close(fd);
    return PermissionDeniedError("cluster key " + path +
                                 " is readable by group or others; chmod 600 it");
  }
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (n < 0) return ErrnoError(errno, "read cluster key " + path);
  std::vector<uint8_t> key;
  int hi = -1;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] == '\n' || buf[i] == ' ') continue;
    int v = HexValue(buf[i]);
    if (v < 0) return DataLossError("cluster key " + path + " is not hex");
    if (hi < 0) {
      hi = v;
    } else {
      key.push_back(static_cast<uint8_t>(hi << 4 | v));
      hi = -1;
    }
  }
  if (key.size() < 16 || hi >= 0) {
    return DataLossError("cluster key " + path + " must hold at least 16 bytes of hex");
  }
  return key;
}

StatusOr<std::vector<uint8_t>> LoadOrCreateClusterKey(const std::string& path) {
  if (::access(path.c_str(), F_OK) == 0) return LoadClusterKey(path);
  uint8_t raw[kKeyBytes];
  if (getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    return ErrnoError(errno, "getrandom for the cluster key");
  }
  std::string hex;
  static const char* digits = "0123456789abcdef";
  for (uint8_t b : raw) {
    hex += digits[b >> 4];
    hex += digits[b & 15];
  }
  hex += '\n';
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError(errno, "create cluster key " + tmp);
  // Exactly 0600 whatever the umask (LoadClusterKey refuses a key others may read).
  bool ok = ::fchmod(fd, 0600) == 0 &&
            ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoError(errno, "write cluster key " + path);
  }
  return LoadClusterKey(path);
}

namespace {

// A thread's HMAC-SHA256 context, keyed once: every strobe, staging chunk and checkpoint
// batch is sealed or checked with the same cluster key, and setting up a context (fetching
// SHA-256 by name, hashing the key into its pads) cost more than the MAC of a strobe. A
// context set up with a key is reset to it by EVP_MAC_init without a key.
struct HmacContext {
  EVP_MAC_CTX* ctx = nullptr;
  std::vector<uint8_t> key;
  ~HmacContext() { EVP_MAC_CTX_free(ctx); }
};

}  // namespace

Mac Hmac(std::span<const uint8_t> key, std::initializer_list<std::span<const uint8_t>> parts) {
  static EVP_MAC* const mac_impl = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  thread_local HmacContext c;
  Mac mac{};
  const bool same_key =
      c.ctx != nullptr && std::equal(key.begin(), key.end(), c.key.begin(), c.key.end());
  if (same_key) {
    EVP_MAC_init(c.ctx, nullptr, 0, nullptr);
  } else {
    EVP_MAC_CTX_free(c.ctx);
    c.ctx = EVP_MAC_CTX_new(mac_impl);
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    EVP_MAC_init(c.ctx, key.data(), key.size(), params);
    c.key.assign(key.begin(), key.end());
  }
  for (auto p : parts) EVP_MAC_update(c.ctx, p.data(), p.size());
  size_t len = 0;
  EVP_MAC_final(c.ctx, mac.data(), &len, mac.size());
  return mac;
}

bool MacEqual(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() != b.size()) return false;
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

}  // namespace gos::os
