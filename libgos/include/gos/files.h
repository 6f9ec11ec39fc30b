// Files and directories with the modes gos gives them (issue 31, "who can read what" in the
// README): every directory and file a daemon or tool creates gets its mode set explicitly,
// whatever the process's umask and whatever the mode of the directory it is in.
//
// The modes gos uses:
//   kPrivateDir  (0700) what the daemons keep (store, dumps, restore images, logs), and a job's
//                own dir (owned by the job's user);
//   kPassDir     (0711) a directory on the way to something a job's user must reach (the state
//                dir with the coordinator's socket, a node's dir above its job dirs): anyone
//                may pass through, nobody but root may list it;
//   kPrivateFile (0600) a file of the daemons'.
//
// Thread-safe (no state); errors carry the path and errno's text.
#ifndef GOS_FILES_H_
#define GOS_FILES_H_

#include <sys/types.h>

#include <string>
#include <string_view>

#include "gos/status.h"

namespace gos {

inline constexpr mode_t kPrivateDir = 0700;
inline constexpr mode_t kPassDir = 0711;
inline constexpr mode_t kPrivateFile = 0600;

// mkdir -p: `dir` and each of its missing parents is created with exactly `mode` (the umask
// narrows a new directory only until its chmod, never widens it). Directories that exist keep
// their mode. OK if `dir` is a directory already.
[[nodiscard]] Status CreateDirs(const std::string& dir, mode_t mode);

// CreateDirs, then `dir` itself gets exactly `mode` even if it existed (an existing state dir
// is tightened at start). Refuses a directory with the sticky bit (a shared one such as /tmp or
// /dev/shm): taking it from its other users is not gos's call.
[[nodiscard]] Status MakeDir(const std::string& dir, mode_t mode);

// Creates or truncates `path`, which gets exactly `mode` (an existing file too), and writes
// `bytes` to it.
[[nodiscard]] Status WriteFileWithMode(const std::string& path, std::string_view bytes,
                                       mode_t mode);

// Creates `path`, which must not exist (O_EXCL; nor be a symlink: a shared directory such as
// /dev/shm lets others plant one), with exactly `mode`, owned by uid/gid (-1: unchanged), and
// writes `bytes` to it. Ownership and mode are set through the descriptor, never the path.
[[nodiscard]] Status CreateNewFile(const std::string& path, std::string_view bytes, mode_t mode,
                                   uid_t uid = static_cast<uid_t>(-1),
                                   gid_t gid = static_cast<gid_t>(-1));

}  // namespace gos

#endif  // GOS_FILES_H_
