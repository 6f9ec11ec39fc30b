// Facts about a program file that the coordinator needs before launching it.
#ifndef GOS_OS_PROGRAM_H_
#define GOS_OS_PROGRAM_H_

namespace gos::os {

// The section that gos's communication library (libgos_rank, linked in by gos-cc) puts into
// every program that uses it.
inline constexpr char kBcsSectionName[] = ".gos_bcs";

// True if fd is a 64-bit ELF file with a kBcsSectionName section. Reads with pread (the file
// offset is untouched); any malformed or non-ELF file is simply "false".
bool ProgramUsesBcs(int fd);

}  // namespace gos::os

#endif  // GOS_OS_PROGRAM_H_
