// Test support: a fresh directory per test, removed with everything in it on destruction.
#ifndef GOS_TESTS_SUPPORT_TEMP_DIR_H_
#define GOS_TESTS_SUPPORT_TEMP_DIR_H_

#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

namespace gos::testing {

// $TMPDIR/<prefix>-XXXXXX (/tmp if TMPDIR is unset), made with mode `mode`; a test that cannot
// make its directory cannot run, so a failure aborts with the reason. Not copyable: exactly one
// owner removes it.
class TempDir {
 public:
  // 0755 for the state dir of a cluster whose ranks run as other users; mkdtemp's 0700 else.
  explicit TempDir(const std::string& prefix = "gos-test", mode_t mode = 0700) {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    if (p == nullptr) {
      std::fprintf(stderr, "mkdtemp %s: %s\n", tmpl.c_str(), std::strerror(errno));
      std::abort();
    }
    path_ = p;
    if (mode != 0700) ::chmod(path_.c_str(), mode);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name.
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace gos::testing

#endif  // GOS_TESTS_SUPPORT_TEMP_DIR_H_
