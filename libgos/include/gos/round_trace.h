// The round trace (docs/specs/round-trace.md, spec 11): when each hop of a strobe round
// happened on this process, off by default.
//
// Header only, libc and libstdc++ only: gos_rank (linked into users' programs) uses it as the
// daemons do. A process turns it on once at start with Start(), which does nothing unless
// $GOS_ROUND_TRACE names a directory; every hop is then Note(...). Off, Note is a load of a
// process-global pointer and a branch. On, it is a clock read, an atomic add and a 32-byte
// store into a buffer reserved at start; the file is written at exit.
//
// Thread-safety: Note and Recorder::Append may be called from any thread at once. Start,
// Install and Flush are for one thread (start-up and exit).
#ifndef GOS_ROUND_TRACE_H_
#define GOS_ROUND_TRACE_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace gos::round_trace {

inline constexpr uint32_t kMagic = 0x54524f47;  // "GORT"
inline constexpr uint16_t kVersion = 2;         // 2: job rounds (round = 2^63 + n)
inline constexpr size_t kDefaultRecords = size_t{1} << 20;
inline constexpr uint32_t kUnknownNode = 0xffffffff;

enum class Role : uint32_t { kRank = 1, kNodeAgent = 2, kCoordinator = 3 };

// Hop ids (the spec's table). Never reuse an id.
enum class Hop : uint16_t {
  kRankPost = 1,
  kRankBlock = 2,
  kAgentBlocked = 3,
  kCoordEarly = 4,
  kCoordQuantum = 5,
  kCoordSend = 6,
  kCoordSent = 7,
  kAgentStrobe = 8,
  kAgentApplied = 9,
  kAgentExchange = 10,
  kAgentDescSent = 11,
  kAgentExchanged = 12,
  kAgentMatched = 13,
  kAgentMoved = 14,
  kAgentPublished = 15,
  kAgentConfirmed = 16,
  kCoordConfirmed = 17,
  kRankWake = 18,
  kRankVisible = 19,
  kRankResume = 20,
};

struct FileHeader {
  uint32_t magic = kMagic;
  uint16_t version = kVersion;
  uint16_t record_bytes = 32;
  uint32_t role = 0;
  uint32_t node = kUnknownNode;
  int32_t rank = -1;
  uint32_t pid = 0;
  uint64_t job = 0;
  uint64_t count = 0;
  uint64_t dropped = 0;
  uint64_t t0_ns = 0;
  uint32_t clock = 1;  // CLOCK_MONOTONIC
  uint32_t reserved = 0;
};
static_assert(sizeof(FileHeader) == 64);

struct Record {
  uint64_t t_ns = 0;
  uint64_t round = 0;
  uint64_t job = 0;
  uint16_t hop = 0;  // 0: a slot taken but not (yet) written
  uint16_t node = 0;
  int32_t rank = -1;
};
static_assert(sizeof(Record) == 32);

inline uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Who this process is, for the file's header and name.
struct Identity {
  Role role = Role::kRank;
  uint32_t node = kUnknownNode;
  int32_t rank = -1;
  uint64_t job = 0;
};

// A fixed buffer of records and where it goes at the end.
class Recorder {
 public:
  // A recorder writing into dir, or nullptr if the buffer cannot be reserved.
  static std::unique_ptr<Recorder> Open(const std::string& dir, const Identity& who,
                                        size_t capacity = kDefaultRecords) {
    if (capacity == 0) return nullptr;
    void* mem = mmap(nullptr, capacity * sizeof(Record), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) return nullptr;
    return std::unique_ptr<Recorder>(new Recorder(dir, who, static_cast<Record*>(mem), capacity));
  }
  ~Recorder() { munmap(buf_, capacity_ * sizeof(Record)); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void Append(Hop hop, uint64_t round, uint64_t job, uint32_t node, int32_t rank) {
    const uint64_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= capacity_) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    Record& r = buf_[i];
    r.t_ns = NowNs();
    r.round = round;
    r.job = job;
    r.node = static_cast<uint16_t>(node);
    r.rank = rank;
    // Last, so that a slot whose hop is set is whole (Flush skips the others).
    std::atomic_ref<uint16_t>(r.hop).store(static_cast<uint16_t>(hop), std::memory_order_release);
  }

  // Written records so far (taken slots whose record is whole), in slot order.
  std::vector<Record> Records() const {
    const uint64_t n = std::min<uint64_t>(next_.load(std::memory_order_acquire), capacity_);
    std::vector<Record> out;
    out.reserve(n);
    for (uint64_t i = 0; i < n; ++i) {
      Record& r = buf_[i];
      if (std::atomic_ref<uint16_t>(r.hop).load(std::memory_order_acquire) != 0) out.push_back(r);
    }
    return out;
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

  // Writes the file (under a .tmp name, then renamed). Only the process that opened the
  // recorder writes: a forked child that exits does not. False on an I/O error.
  bool Flush() {
    if (static_cast<uint32_t>(getpid()) != header_.pid) return false;
    std::vector<Record> recs = Records();
    FileHeader h = header_;
    h.count = recs.size();
    h.dropped = dropped();
    const std::string tmp = path_ + ".tmp";
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool ok = WriteAll(fd, &h, sizeof h) && WriteAll(fd, recs.data(), recs.size() * sizeof(Record));
    ok = close(fd) == 0 && ok;
    ok = ok && rename(tmp.c_str(), path_.c_str()) == 0;
    if (!ok) unlink(tmp.c_str());
    return ok;
  }

 private:
  Recorder(const std::string& dir, const Identity& who, Record* buf, size_t capacity)
      : buf_(buf), capacity_(capacity) {
    header_.role = static_cast<uint32_t>(who.role);
    header_.node = who.node;
    header_.rank = who.rank;
    header_.job = who.job;
    header_.pid = static_cast<uint32_t>(getpid());
    header_.t0_ns = NowNs();
    char name[160];
    switch (who.role) {
      case Role::kRank:
        snprintf(name, sizeof name, "rank-j%llur%d", static_cast<unsigned long long>(who.job),
                 who.rank);
        break;
      case Role::kNodeAgent:
        snprintf(name, sizeof name, "nodeagent-n%u", who.node == kUnknownNode ? 0u : who.node);
        break;
      case Role::kCoordinator:
        snprintf(name, sizeof name, "coordinator-c");
        break;
    }
    char tail[64];
    snprintf(tail, sizeof tail, "-%u-%llu.gosrt", header_.pid,
             static_cast<unsigned long long>(header_.t0_ns));
    path_ = dir + "/" + name + tail;
  }

  static bool WriteAll(int fd, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = write(fd, c, n);
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  Record* buf_;
  size_t capacity_;
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> dropped_{0};
  FileHeader header_;
  std::string path_;
};

// The process's recorder, or nullptr (off). One per linked image: a static program (a rank
// with gos_rank) or a daemon has exactly one.
inline std::atomic<Recorder*> g_recorder{nullptr};

// Makes r the process's recorder (nullptr: off). The caller keeps r alive while it is installed.
inline void Install(Recorder* r) { g_recorder.store(r, std::memory_order_release); }

inline bool On() { return g_recorder.load(std::memory_order_relaxed) != nullptr; }

// Records one hop if the trace is on.
inline void Note(Hop hop, uint64_t round, uint64_t job, uint32_t node, int32_t rank = -1) {
  Recorder* r = g_recorder.load(std::memory_order_relaxed);
  if (__builtin_expect(r != nullptr, 0)) r->Append(hop, round, job, node, rank);
}

// Turns the trace on for this process if $GOS_ROUND_TRACE names a directory: the recorder
// lives until exit, when it writes its file. Once per process; later calls do nothing.
inline void Start(const Identity& who) {
  if (On()) return;
  const char* dir = getenv("GOS_ROUND_TRACE");
  if (dir == nullptr || *dir == '\0') return;
  size_t capacity = kDefaultRecords;
  if (const char* n = getenv("GOS_ROUND_TRACE_RECORDS"); n != nullptr && *n != '\0') {
    capacity = static_cast<size_t>(strtoull(n, nullptr, 10));
  }
  std::unique_ptr<Recorder> r = Recorder::Open(dir, who, capacity);
  if (!r) return;
  Install(r.release());  // never freed: records may come until the very end
  atexit([] {
    if (Recorder* rec = g_recorder.load(std::memory_order_acquire)) rec->Flush();
  });
}

// Writes the process's file now (before _exit, which runs no atexit handler).
inline void FlushNow() {
  if (Recorder* rec = g_recorder.load(std::memory_order_acquire)) rec->Flush();
}

// A whole trace file, as written.
struct File {
  FileHeader header;
  std::vector<Record> records;
};

// Reads a trace file; false if it is not a version-1 trace file or is cut short.
inline bool ReadFile(const std::string& path, File* out) {
  FILE* f = fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  bool ok = fread(&out->header, sizeof out->header, 1, f) == 1 && out->header.magic == kMagic &&
            out->header.version == kVersion && out->header.record_bytes == sizeof(Record);
  if (ok) {
    out->records.resize(out->header.count);
    ok = out->header.count == 0 ||
         fread(out->records.data(), sizeof(Record), out->records.size(), f) == out->records.size();
  }
  fclose(f);
  return ok;
}

}  // namespace gos::round_trace

#endif  // GOS_ROUND_TRACE_H_
