// Incremental dumps with DumpRank's written-page tracking (docs/specs/checkpoint.md,
// "Incremental dumps"; scripts/criu-patches/0006), real ranks, real cgroups and the real
// criu: a chain of a full dump and three incremental ones of criu_pages (whose memory changes
// between epochs by heap growth, mmap/munmap/mremap, MADV_DONTNEED, mprotect, read(2), a
// forked child with shared memory, huge pages and a private file mapping), each restored from
// its epoch and compared page by page, in every process of the tree, with what the tree held
// when it was dumped. Needs root and a kernel that can track (criu check --feature
// gos_track_mem).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "nodeagent/criu.h"
#include "nodeagent/freezer.h"
#include "tests/nodeagent/rank_harness.h"
#include "tests/support/temp_dir.h"

namespace gos::nodeagent {
namespace {

using namespace std::chrono_literals;
using testing::InitPath;
using testing::Rank;

constexpr size_t kPage = 4096;
constexpr uint64_t kSmallMapping = 1 << 20;

std::string PagesProgram() { return gos::testing::TestBinDir() + "/criu_pages"; }

// One mapping of a process and a hash of each of its pages.
struct Vma {
  uint64_t start = 0, end = 0;
  std::string perms, name;
  std::vector<uint64_t> pages;  // 1: the page could not be read
  // The pages themselves, of small mappings (where the rseq areas are, see RseqOnly).
  std::vector<std::vector<unsigned char>> raw;
};
// A process tree's memory, by pid inside the rank's PID namespace.
using Snapshot = std::map<pid_t, std::vector<Vma>>;

uint64_t HashPage(const unsigned char* p) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < kPage; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof w);
    h = (h ^ w) * 1099511628211ull;
  }
  return h | 2;  // never 1
}

// Every process of the tree rooted at root, parents first.
std::vector<pid_t> Tree(pid_t root) {
  std::vector<pid_t> out = {root};
  for (size_t i = 0; i < out.size(); ++i) {
    std::error_code ec;
    const std::string tasks = "/proc/" + std::to_string(out[i]) + "/task";
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
      std::ifstream in(t.path().string() + "/children");
      for (pid_t child; in >> child;) out.push_back(child);
    }
  }
  return out;
}

// The pid of pid inside its innermost PID namespace.
pid_t NsPid(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("NSpid:", 0) != 0) continue;
    std::istringstream ids(line.substr(6));
    pid_t last = -1;
    for (pid_t id; ids >> id;) last = id;
    return last;
  }
  return -1;
}

// Every page of every mapping of pid but the kernel's own (vDSO, vvar, vsyscall), read through
// /proc/PID/mem. Pages that are not there read as the kernel gives them (zero, the file's).
std::vector<Vma> Memory(pid_t pid) {
  std::vector<Vma> out;
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  const std::string mem_path = "/proc/" + std::to_string(pid) + "/mem";
  const int mem = ::open(mem_path.c_str(), O_RDONLY | O_CLOEXEC);
  std::vector<unsigned char> buf(kPage);
  for (std::string line; std::getline(maps, line);) {
    Vma v;
    std::istringstream in(line);
    std::string range, offset, dev, inode;
    in >> range >> v.perms >> offset >> dev >> inode;
    std::getline(in >> std::ws, v.name);
    if (v.name == "[vdso]" || v.name.rfind("[vvar", 0) == 0 || v.name == "[vsyscall]") continue;
    v.start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    v.end = std::stoull(range.substr(range.find('-') + 1), nullptr, 16);
    for (uint64_t a = v.start; a < v.end; a += kPage) {
      bool ok = mem >= 0 && ::pread(mem, buf.data(), kPage, static_cast<off_t>(a)) ==
                                static_cast<ssize_t>(kPage);
      v.pages.push_back(ok ? HashPage(buf.data()) : 1);
      if (v.end - v.start <= kSmallMapping) v.raw.push_back(buf);
    }
    out.push_back(std::move(v));
  }
  if (mem >= 0) ::close(mem);
  return out;
}

Snapshot TreeMemory(pid_t root) {
  Snapshot s;
  for (pid_t p : Tree(root)) s[NsPid(p)] = Memory(p);
  return s;
}

std::string Hex(uint64_t v) {
  std::ostringstream o;
  o << std::hex << v;
  return o.str();
}

// A process's pages by address: (protection, hash, the page if kept).
struct Page {
  std::string perms;
  uint64_t hash = 0;
  const std::vector<unsigned char>* raw = nullptr;
};
std::map<uint64_t, Page> Pages(const std::vector<Vma>& vmas) {
  std::map<uint64_t, Page> out;
  for (const Vma& v : vmas) {
    for (size_t i = 0; i < v.pages.size(); ++i) {
      out[v.start + i * kPage] = {v.perms, v.pages[i], v.raw.empty() ? nullptr : &v.raw[i]};
    }
  }
  return out;
}

// Whether two versions of a page differ only in what the kernel writes into a thread's rseq
// area each time the thread runs: cpu_id_start, cpu_id and mm_cid (u32s at offsets 0, 4 and
// 24 of the 32-byte aligned struct rseq), small numbers. A restored thread runs on whatever
// CPU; a page the tracking missed differs in far more.
bool RseqOnly(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  for (size_t off = 0; off < kPage; off += 4) {
    uint32_t x, y;
    std::memcpy(&x, a.data() + off, 4);
    std::memcpy(&y, b.data() + off, 4);
    if (x == y) continue;
    const size_t in = off % 32;
    if ((in != 0 && in != 4 && in != 24) || x >= 4096 || y >= 4096) return false;
  }
  return true;
}

// "" if got holds exactly want's pages, with the same protections, and no others; else the
// first differences. (Mappings are compared page by page: the kernel merges neighbouring
// mappings after a restore that it kept apart before.)
std::string Compare(const Snapshot& want, const Snapshot& got) {
  std::string out;
  int shown = 0;
  auto note = [&](const std::string& s) {
    if (shown++ < 12) out += "  " + s + "\n";
  };
  for (const auto& [pid, vmas] : want) {
    auto g = got.find(pid);
    if (g == got.end()) {
      note("process " + std::to_string(pid) + " is missing");
      continue;
    }
    const auto have = Pages(g->second);
    for (const Vma& v : vmas) {
      const std::string where = "pid " + std::to_string(pid) + " " + Hex(v.start) + "-" +
                                Hex(v.end) + " " + v.perms + " " + v.name;
      size_t bad = 0, missing = 0;
      uint64_t first = 0;
      for (size_t i = 0; i < v.pages.size(); ++i) {
        const uint64_t a = v.start + i * kPage;
        auto it = have.find(a);
        if (it == have.end() || it->second.perms != v.perms) {
          if (missing++ == 0 && bad == 0) first = a;
        } else if (it->second.hash != v.pages[i] &&
                   !(it->second.raw != nullptr && !v.raw.empty() &&
                     RseqOnly(*it->second.raw, v.raw[i])) &&
                   bad++ == 0 && missing == 0) {
          first = a;
        }
      }
      if (bad + missing > 0) {
        note(where + ": " + std::to_string(bad) + " pages differ, " + std::to_string(missing) +
             " missing or with another protection, of " + std::to_string(v.pages.size()) +
             "; the first at " + Hex(first));
      }
    }
    const size_t want_pages = Pages(vmas).size();
    if (have.size() != want_pages) {
      note("pid " + std::to_string(pid) + ": " + std::to_string(have.size()) +
           " pages, dumped with " + std::to_string(want_pages));
    }
  }
  if (got.size() != want.size()) note("the restored tree has another number of processes");
  if (shown > 12) out += "  ... " + std::to_string(shown - 12) + " more\n";
  return out;
}

uint64_t PagesBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("pages-", 0) == 0) total += e.file_size();
  }
  return total;
}

class CriuIncrementalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::SkipReason();
    if (why.empty() && ::access(CriuPath().c_str(), X_OK) != 0) why = "no criu at " + CriuPath();
    if (why.empty() && ::access(PagesProgram().c_str(), X_OK) != 0) {
      why = "criu_pages not built at " + PagesProgram();
    }
    if (std::string no; why.empty() && !CriuCanTrack("", &no)) why = no;
    if (!why.empty()) GTEST_SKIP() << why;
    tmp_.emplace("gos-criu-incr-test");
    dir_ = tmp_->path();
    cgroup_root_ = testing::TestCgroupRoot();
  }
  void TearDown() override {
    ranks_.clear();
    cgroups_.clear();
    ::rmdir(cgroup_root_.c_str());
    tmp_.reset();
  }

  FreezerCgroup* MakeCgroup(const std::string& name) {
    auto cg = FreezerCgroup::Create(cgroup_root_, name);
    EXPECT_TRUE(cg.ok()) << cg.status().ToString();
    if (!cg.ok()) return nullptr;
    cgroups_.push_back(std::move(*cg));
    return cgroups_.back().get();
  }

  Rank* Launch(FreezerCgroup* cg) {
    RankSpec s;
    s.program = PagesProgram();
    s.argv = {"criu_pages", dir_};
    s.cwd = dir_;
    s.init_path = InitPath();
    s.cgroup_procs = cg->procs_file();
    auto r = Rank::Launch(s);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok()) return nullptr;
    ranks_.push_back(std::move(*r));
    return ranks_.back().get();
  }

  void Kill(Rank* rank) {
    testing::ThawFreezerOf(rank->pid());
    ::kill(rank->pid(), SIGKILL);
    EXPECT_TRUE(rank->Wait().has_value());
  }

  std::optional<::gos::testing::TempDir> tmp_;
  std::string dir_;
  std::string cgroup_root_;
  std::vector<std::unique_ptr<FreezerCgroup>> cgroups_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

TEST_F(CriuIncrementalTest, EveryPageRestoresFromTheFirstAMiddleAndTheNewestEpochOfAChain) {
  constexpr int kEpochs = 4;
  FreezerCgroup* cg = MakeCgroup("pages");
  ASSERT_NE(cg, nullptr);
  Rank* rank = Launch(cg);
  ASSERT_NE(rank, nullptr);
  ASSERT_TRUE(rank->ReadUntilStdout("ready\n")) << rank->out() << rank->err();

  std::vector<Snapshot> dumped;  // the tree's memory at each epoch's dump
  std::vector<std::string> dirs;
  std::vector<uint64_t> pages_bytes;
  std::vector<TrackedProcess> held;
  for (int e = 1; e <= kEpochs; ++e) {
    if (e > 1) {
      ASSERT_EQ(::kill(rank->pid(), SIGUSR1), 0);  // init forwards it to the rank
      ASSERT_TRUE(rank->ReadUntilStdout("step " + std::to_string(e - 1) + "\n"))
          << rank->out() << rank->err();
    }
    ASSERT_TRUE(cg->Freeze().ok());
    // What the node weighs before an incremental dump: nothing is tracked before the first
    // dump (every page reads as written), a few percent is written between the others.
    auto w = CountWrittenPages(rank->pid());
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    EXPECT_GT(w->dumped, uint64_t{6000}) << "epoch " << e;  // ~26 MiB of data and code
    if (e == 1) {
      EXPECT_EQ(w->written, w->dumped);
    } else {
      EXPECT_GT(w->written, 0u) << "epoch " << e;
      EXPECT_LT(w->written * 4, w->dumped) << "epoch " << e;
    }
    dumped.push_back(TreeMemory(rank->pid()));
    const std::string dir = dir_ + "/e" + std::to_string(e);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    DumpRequest req;
    req.init_pid = rank->pid();
    req.images_dir = dir;
    req.freezer_cgroup = cg->path();
    req.track = true;
    req.held = &held;
    if (e > 1) req.parent = "../e" + std::to_string(e - 1);
    auto d = DumpRank(req);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    // gos-rank-init, the rank and its child.
    EXPECT_EQ(d->tracking.size(), 3u);
    held = std::move(d->tracking);
    dirs.push_back(dir);
    pages_bytes.push_back(PagesBytes(dir));
    ASSERT_TRUE(cg->Thaw().ok());
  }
  // The first dump holds everything (~26 MiB of data), the others what was written since.
  EXPECT_GT(pages_bytes[0], uint64_t{20} << 20);
  for (int e = 2; e <= kEpochs; ++e) {
    EXPECT_LT(pages_bytes[e - 1], pages_bytes[0] / 4)
        << "epoch " << e << " is not incremental: " << pages_bytes[e - 1] << " bytes of pages";
    EXPECT_TRUE(std::filesystem::is_symlink(dirs[e - 1] + "/parent"));
  }
  Kill(rank);

  for (int e : {1, 2, kEpochs}) {
    FreezerCgroup* back = MakeCgroup("restored-e" + std::to_string(e));
    ASSERT_NE(back, nullptr);
    ASSERT_TRUE(back->Freeze().ok());
    auto rp = RestoreRank({.images_dir = dirs[e - 1], .cgroup_procs = back->procs_file()});
    ASSERT_TRUE(rp.ok()) << "epoch " << e << ": " << rp.status().ToString();
    ranks_.push_back(std::make_unique<Rank>(*rp));
    Rank* restored = ranks_.back().get();
    EXPECT_EQ(Compare(dumped[e - 1], TreeMemory(restored->pid())), "")
        << "restored from epoch " << e << " (" << dirs[e - 1] << ")";
    Kill(restored);
  }
}

}  // namespace
}  // namespace gos::nodeagent
