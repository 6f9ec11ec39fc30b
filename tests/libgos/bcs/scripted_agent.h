// A scripted in-process nodeagent for tests of gos_rank (libgos/bcs/client.cc).
//
// ScriptedAgent creates a real channel file in /dev/shm, maps it as the nodeagent would and
// serves the rings from a thread: it consumes descriptors, records them, hands each to the
// test's script, and publishes the completions the script queues (keeping them back while
// the completion ring is full). Agent and rank share one process, so the script can move
// data with memcpy where the real agent would use process_vm_writev. It wakes the rank as the
// nodeagent does (spec 5, version 3): after publishing completions, and after freeing
// descriptor slots only while the rank says it waits for room (`room_wait`).
#ifndef GOS_TESTS_LIBGOS_BCS_SCRIPTED_AGENT_H_
#define GOS_TESTS_LIBGOS_BCS_SCRIPTED_AGENT_H_

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gos/bcs/channel.h"
#include "gos/gos.h"

namespace gos::bcs::test_agent {

using namespace std::chrono_literals;

struct Seen {
  Descriptor d;
  std::vector<unsigned char> payload;  // kSend: the bytes at addr when the agent read them
};

class ScriptedAgent {
 public:
  using OnDesc = std::function<void(ScriptedAgent&, const Descriptor&)>;
  using OnIdle = std::function<void(ScriptedAgent&)>;

  // Creates the channel of world rank `rank` of `size` and points the environment at it.
  ScriptedAgent(uint32_t rank, uint32_t size) {
    static std::atomic<int> counter{0};
    path_ = "/dev/shm/gos-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
    const int fd = open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0) << path_;
    EXPECT_EQ(ftruncate(fd, kChannelBytes), 0);
    base_ = mmap(nullptr, kChannelBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(base_, MAP_FAILED);
    close(fd);
    h_ = static_cast<ChannelHeader*>(base_);
    h_->magic = kChannelMagic;
    h_->version = kChannelVersion;
    h_->rank = rank;
    h_->size = size;
    h_->job = 1;
    h_->bytes = kChannelBytes;
    setenv("GOS_CHANNEL", path_.c_str(), 1);
    setenv("GOS_RANK", std::to_string(rank).c_str(), 1);
    setenv("GOS_SIZE", std::to_string(size).c_str(), 1);
  }

  ~ScriptedAgent() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    munmap(base_, kChannelBytes);
    unlink(path_.c_str());
  }

  void Start(OnDesc on_desc, OnIdle on_idle = {}) {
    on_desc_ = std::move(on_desc);
    on_idle_ = std::move(on_idle);
    thread_ = std::thread([this] { Loop(); });
  }

  // Queues a completion; the agent thread publishes it when the ring has room.
  void Complete(const Completion& c) {
    std::lock_guard lock(mu_);
    pending_.push_back(c);
  }

  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  size_t seen_count() {
    std::lock_guard lock(mu_);
    return seen_.size();
  }

  ChannelHeader* h() { return h_; }
  void* base() { return base_; }
  const std::string& path() const { return path_; }
  void set_paused(bool p) { paused_ = p; }
  bool paused() const { return paused_; }
  // At most n descriptors drained per pass (0: all).
  void set_drain_limit(size_t n) { drain_limit_ = n; }
  // Passes that freed descriptor slots, and those of them that found `room_wait` set.
  uint64_t room_frees() const { return room_frees_; }
  uint64_t room_wakes() const { return room_wakes_; }

 private:
  void Loop() {
    while (!stop_) {
      const uint32_t bell = h_->bell.load(std::memory_order_acquire);
      bool changed = false;
      if (!paused_) {
        uint64_t head = h_->desc_head.load(std::memory_order_acquire);
        uint64_t tail = h_->desc_tail.load(std::memory_order_relaxed);
        if (drain_limit_ != 0 && head - tail > drain_limit_) head = tail + drain_limit_;
        const uint64_t drained_from = tail;
        for (; tail != head; ++tail) {
          Seen s{DescRing(base_)[tail % kDescSlots], {}};
          if (s.d.op == static_cast<uint32_t>(Op::kSend) && s.d.len <= 4096 && s.d.len > 0) {
            const auto* p = reinterpret_cast<const unsigned char*>(s.d.addr);
            s.payload.assign(p, p + s.d.len);
          }
          {
            std::lock_guard lock(mu_);
            seen_.push_back(s);
          }
          if (on_desc_) on_desc_(*this, s.d);
        }
        // The nodeagent's order (BcsEngine::Exchange): the tail, then room_wait, both seq_cst.
        h_->desc_tail.store(tail, std::memory_order_seq_cst);
        if (tail != drained_from) {
          ++room_frees_;
          if (h_->room_wait.load(std::memory_order_seq_cst) != 0) {
            ++room_wakes_;
            changed = true;
          }
        }
      }
      if (on_idle_) on_idle_(*this);
      {
        std::lock_guard lock(mu_);
        uint64_t head = h_->compl_head.load(std::memory_order_relaxed);
        while (!pending_.empty() &&
               head - h_->compl_tail.load(std::memory_order_acquire) < kComplSlots) {
          ComplRing(base_)[head % kComplSlots] = pending_.front();
          pending_.pop_front();
          ++head;
          changed = true;
        }
        h_->compl_head.store(head, std::memory_order_release);
      }
      if (changed) {
        h_->wake.fetch_add(1, std::memory_order_release);
        syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h_->wake), FUTEX_WAKE, INT_MAX, nullptr,
                nullptr, 0);
      }
      timespec ts{0, 1'000'000};
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&h_->bell), FUTEX_WAIT, bell, &ts, nullptr, 0);
    }
  }

  std::string path_;
  void* base_ = nullptr;
  ChannelHeader* h_ = nullptr;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::atomic<size_t> drain_limit_{0};
  std::atomic<uint64_t> room_frees_{0}, room_wakes_{0};
  OnDesc on_desc_;
  OnIdle on_idle_;
  std::mutex mu_;
  std::vector<Seen> seen_;
  std::deque<Completion> pending_;
};

inline Completion Done(const Descriptor& d, int32_t error = kOk, uint64_t len = 0,
                       int32_t source = -1, int32_t tag = -1, uint32_t flags = 0) {
  Completion c;
  c.req = d.req;
  c.len = len;
  c.source = source;
  c.tag = tag;
  c.error = error;
  c.flags = flags;
  return c;
}

// Waits (with a deadline) for pred, letting the library progress meanwhile.
template <typename Pred>
bool Eventually(Pred pred, bool progress = true) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    if (progress && gos_initialized() && !gos_finalized()) {
      gos_progress_wait();
    } else {
      std::this_thread::sleep_for(1ms);
    }
  }
  return true;
}

inline Op OpOf(const Descriptor& d) { return static_cast<Op>(d.op); }

}  // namespace gos::bcs::test_agent

#endif  // GOS_TESTS_LIBGOS_BCS_SCRIPTED_AGENT_H_
