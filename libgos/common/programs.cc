#include "gos/programs.h"

#include <unistd.h>

#include <filesystem>

// The install directories relative to the prefix (or absolute), as CMake's GNUInstallDirs has
// them (libgos/CMakeLists.txt).
#ifndef GOS_INSTALL_BINDIR
#error "GOS_INSTALL_BINDIR must be defined by the build"
#endif

namespace gos {
namespace {

const char* DirName(ProgramDir dir) {
  switch (dir) {
    case ProgramDir::kBin:
      return GOS_INSTALL_BINDIR;
    case ProgramDir::kSbin:
      return GOS_INSTALL_SBINDIR;
    case ProgramDir::kLibexec:
      return GOS_INSTALL_LIBEXECDIR;
  }
  return GOS_INSTALL_BINDIR;
}

// The prefix `self` is installed under, if it is `dir` of some prefix: "" if not.
std::string PrefixOf(const std::string& self, const std::string& dir) {
  if (!dir.empty() && dir[0] == '/') return self == dir ? "/" : "";
  const std::string tail = "/" + dir;
  if (self.size() <= tail.size() || self.compare(self.size() - tail.size(), tail.size(), tail)) {
    return "";
  }
  std::string prefix = self.substr(0, self.size() - tail.size());
  return prefix.empty() ? "/" : prefix;
}

}  // namespace

std::string SelfDir() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : p.parent_path().string();
}

std::string InstalledDir(ProgramDir dir) {
  const std::string self = SelfDir();
  for (ProgramDir own : {ProgramDir::kBin, ProgramDir::kSbin, ProgramDir::kLibexec}) {
    const std::string prefix = PrefixOf(self, DirName(own));
    if (prefix.empty()) continue;
    const std::string want = DirName(dir);
    if (!want.empty() && want[0] == '/') return want;
    return (prefix == "/" ? "" : prefix) + "/" + want;
  }
  return "";
}

std::string GosProgram(std::string_view name, ProgramDir dir) {
  if (std::string installed = InstalledDir(dir); !installed.empty()) {
    std::string path = installed + "/" + std::string(name);
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return SelfDir() + "/" + std::string(name);
}

}  // namespace gos
