// A do-nothing program whose executable is padded to BENCH_PAD_BYTES (set at compile time) by
// a static array in .data, so the file really is that big and a launcher must ship it all.
// Used by bench/gos-launch-bench as the gos payload.
#ifndef BENCH_PAD_BYTES
#define BENCH_PAD_BYTES (4u << 20)
#endif

// Non-zero so the array lands in .data (in the file), not .bss; volatile so it is kept.
volatile unsigned char bench_pad[BENCH_PAD_BYTES] = {1};

int main(void) { return bench_pad[0] == 1 ? 0 : 1; }
