#include "gos/os/program.h"

#include <elf.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace gos::os {

bool ProgramUsesBcs(int fd) {
  Elf64_Ehdr eh;
  if (::pread(fd, &eh, sizeof eh, 0) != static_cast<ssize_t>(sizeof eh)) return false;
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 ||
      eh.e_shstrndx >= eh.e_shnum) {
    return false;
  }
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  size_t bytes = sh.size() * sizeof(Elf64_Shdr);
  if (::pread(fd, sh.data(), bytes, static_cast<off_t>(eh.e_shoff)) !=
      static_cast<ssize_t>(bytes)) {
    return false;
  }
  const Elf64_Shdr& strtab = sh[eh.e_shstrndx];
  if (strtab.sh_size == 0 || strtab.sh_size > (1u << 20)) return false;
  std::string names(strtab.sh_size, '\0');
  if (::pread(fd, names.data(), names.size(), static_cast<off_t>(strtab.sh_offset)) !=
      static_cast<ssize_t>(names.size())) {
    return false;
  }
  names.push_back('\0');
  for (const Elf64_Shdr& s : sh) {
    if (s.sh_name < names.size() && std::strcmp(names.c_str() + s.sh_name, kBcsSectionName) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace gos::os
