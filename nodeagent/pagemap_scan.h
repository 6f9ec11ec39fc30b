// The PAGEMAP_SCAN ioctl on /proc/PID/pagemap (Linux 6.7), which Debian 12's kernel headers
// predate: the definitions of the kernel's uapi linux/fs.h, under gos's names. Used to count the
// pages a rank wrote since its last dump (docs/specs/checkpoint.md, "Incremental dumps").
#ifndef GOS_NODEAGENT_PAGEMAP_SCAN_H_
#define GOS_NODEAGENT_PAGEMAP_SCAN_H_

#include <linux/ioctl.h>

#include <cstdint>

namespace gos::nodeagent::pagemap {

// Page categories.
constexpr uint64_t kWpAllowed = 1 << 0;  // PAGE_IS_WPALLOWED
constexpr uint64_t kWritten = 1 << 1;    // PAGE_IS_WRITTEN: no uffd-wp bit
constexpr uint64_t kFile = 1 << 2;       // PAGE_IS_FILE
constexpr uint64_t kPresent = 1 << 3;    // PAGE_IS_PRESENT
constexpr uint64_t kSwapped = 1 << 4;    // PAGE_IS_SWAPPED
constexpr uint64_t kPfnZero = 1 << 5;    // PAGE_IS_PFNZERO

// struct page_region
struct Region {
  uint64_t start;
  uint64_t end;
  uint64_t categories;
};

// struct pm_scan_arg
struct ScanArg {
  uint64_t size;
  uint64_t flags;
  uint64_t start;
  uint64_t end;
  uint64_t walk_end;
  uint64_t vec;
  uint64_t vec_len;
  uint64_t max_pages;
  uint64_t category_inverted;
  uint64_t category_mask;
  uint64_t category_anyof_mask;
  uint64_t return_mask;
};

// PAGEMAP_SCAN = _IOWR('f', 16, struct pm_scan_arg)
constexpr unsigned long kScan = _IOWR('f', 16, ScanArg);

}  // namespace gos::nodeagent::pagemap

#endif  // GOS_NODEAGENT_PAGEMAP_SCAN_H_
