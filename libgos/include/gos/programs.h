// Where gos's own programs are, from the running one: every path a gos program uses to start
// another (a tool its daemons, the nodeagent gos-rank-init and CRIU) comes from here, so that
// the same binaries work from a build tree and installed (docs/install.md).
//
// Installed (cmake --install, the Debian package) they are in the GNUInstallDirs places under
// one prefix: the tools in bin/, the daemons in sbin/, gos-rank-init and gos's CRIU in
// libexec/gos/ (the directories are compiled in relative to the prefix, so an installed tree
// may be moved). In a build tree all of them are in build/bin.
//
// Thread-safe (no state).
#ifndef GOS_PROGRAMS_H_
#define GOS_PROGRAMS_H_

#include <string>
#include <string_view>

namespace gos {

// The install directory a program belongs in.
enum class ProgramDir {
  kBin,      // <prefix>/bin: the tools, gos-cc
  kSbin,     // <prefix>/sbin: gos-coordinator, gos-nodeagent
  kLibexec,  // <prefix>/libexec/gos: gos-rank-init, criu
};

// The directory of the running executable ("." if /proc/self/exe cannot be read).
std::string SelfDir();

// The directory `dir` of the install this executable belongs to (the prefix being what is left
// of SelfDir() once its own install directory is taken off), or "" when SelfDir() is in none
// of them. A build tree's bin/ looks like an install's: callers check that a file is there.
std::string InstalledDir(ProgramDir dir);

// The path of gos's program `name`, which is installed in `dir`: InstalledDir(dir)/name when
// that file exists, else SelfDir()/name (a build tree). Never fails; the caller's exec says
// what is missing.
std::string GosProgram(std::string_view name, ProgramDir dir);

}  // namespace gos

#endif  // GOS_PROGRAMS_H_
