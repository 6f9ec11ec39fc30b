// A rank whose executable is 12 MiB (three 4 MiB staging chunks and a bit): it prints its
// executable's size and FNV-1a hash as read from /proc/self/exe, and a byte of its big
// read-only blob, so a test sees whether every node got the staged program byte for byte.
#include <cstdint>
#include <cstdio>

// 12 MiB of 0x5a in .rodata, made by the assembler (a C++ initializer this size would take
// the compiler minutes).
asm(R"(.section .rodata
.balign 64
.globl gos_big_blob
gos_big_blob:
.fill 12582912, 1, 0x5a
.previous
)");
extern "C" const unsigned char gos_big_blob[];

int main(int argc, char**) {
  FILE* f = std::fopen("/proc/self/exe", "rb");
  if (f == nullptr) return 1;
  uint64_t h = 1469598103934665603ull, n = 0;
  for (int c; (c = std::getc(f)) != EOF; ++n) h = (h ^ static_cast<unsigned>(c)) * 1099511628211ull;
  std::fclose(f);
  std::printf("%llu bytes fnv %016llx blob %d\n", static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(h), gos_big_blob[(12582912 / 2) + (argc > 5)]);
  return 0;
}
