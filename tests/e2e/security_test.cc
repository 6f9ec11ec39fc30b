// Who can read what (issue 31, README "Who can read what"): with two unprivileged users on one
// cluster, the second cannot read any byte of the first's checkpoint images, store, replay
// log, environment, stdin or output through a file gos wrote.
//
//   - SecurityTest.AnotherUserReadsNoSecretOfAJob/<umask>: the test makes two users, A and B
//     (useradd; removed at the end). `gos-cluster up` runs under the umask (0022, then 0000)
//     with a scratch dir gos makes in a directory anyone may write. As A, a 2-rank job of
//     secret_rank runs with a secret in its environment and another on its stdin; its ranks
//     hold the first reversed in their heaps and print it in rot13; A checkpoints it with
//     gos-ckpt, kills it, restarts it with gos-restart and checkpoints it again. Then, as B,
//     grep reads every file under the state dir, the scratch dir, the ranks' init dirs and the
//     cluster's channel files: it must find none of the four strings (root's grep, the same
//     command, finds them: the files do hold them). And nothing there but the client socket may
//     be written by others.
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/cluster.h"

namespace gos::testing {
namespace {

using SteadyClock = std::chrono::steady_clock;

// Test users made with useradd (each with a group of its own, no home), removed with userdel
// on destruction.
class TestUsers {
 public:
  TestUsers() = default;
  TestUsers(const TestUsers&) = delete;
  ~TestUsers() {
    for (const std::string& name : names_) Run({"userdel", "-f", name}, {}, 30s);
  }

  // Makes user `name`: "" once it exists, else why not.
  std::string Add(const std::string& name) {
    Result r =
        Run({"useradd", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name},
            {}, 30s);
    if (r.code != 0) return r.Describe();
    names_.push_back(name);
    return "";
  }

 private:
  std::vector<std::string> names_;
};

// The umask of this process (and of the processes it starts) for a scope.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ScopedUmask(const ScopedUmask&) = delete;
  ~ScopedUmask() { ::umask(old_); }

 private:
  mode_t old_;
};

std::string RandomLetters(size_t n) {
  std::random_device rd;
  std::uniform_int_distribution<int> letter(0, 25);
  std::string s;
  for (size_t i = 0; i < n; ++i) s += static_cast<char>('a' + letter(rd));
  return s;
}

std::string Rot13(std::string s) {
  for (char& c : s) c = static_cast<char>('a' + (c - 'a' + 13) % 26);
  return s;
}

struct User {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

User UserNamed(const std::string& name) {
  const passwd* p = ::getpwnam(name.c_str());
  return p == nullptr ? User{} : User{name, p->pw_uid, p->pw_gid};
}

// argv run as the user (its group, no supplementary groups), from /.
std::vector<std::string> As(const User& user, std::vector<std::string> argv) {
  argv.insert(argv.begin(),
              {"setpriv", "--reuid=" + std::to_string(user.uid),
               "--regid=" + std::to_string(user.gid), "--clear-groups", "env", "--chdir=/"});
  return argv;
}

// The files `grep -rlsF` names under `paths` holding any of `needles`, as argv's prefix runs.
std::vector<std::string> FilesHolding(std::vector<std::string> prefix,
                                      const std::vector<std::string>& needles,
                                      const std::vector<std::string>& paths) {
  prefix.insert(prefix.end(), {"grep", "-rlsF"});
  for (const std::string& n : needles) prefix.insert(prefix.end(), {"-e", n});
  prefix.push_back("--");
  prefix.insert(prefix.end(), paths.begin(), paths.end());
  Result r = Run(prefix, {}, 120s);
  std::vector<std::string> files;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) files.push_back(line);
  }
  return files;
}

// "path (mode, uid)" of each path, one per line.
std::string DescribeFiles(const std::vector<std::string>& paths) {
  std::string s;
  for (const std::string& p : paths) {
    struct stat st {};
    char mode[16] = "?";
    if (::lstat(p.c_str(), &st) == 0) std::snprintf(mode, sizeof mode, "%04o", st.st_mode & 07777);
    s += "  " + p + " (" + mode + ", uid " + std::to_string(st.st_uid) + ")\n";
  }
  return s;
}

// Every directory and file under `roots` that group or others may write, but sockets (the
// coordinator's client socket is everyone's to connect to).
std::vector<std::string> WritableByOthers(const std::vector<std::string>& roots) {
  std::vector<std::string> out;
  for (const std::string& root : roots) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      struct stat st {};
      if (::lstat(it->path().c_str(), &st) != 0 || S_ISLNK(st.st_mode) || S_ISSOCK(st.st_mode)) {
        continue;
      }
      if (st.st_mode & (S_IWGRP | S_IWOTH)) out.push_back(it->path().string());
    }
  }
  return out;
}

// Why another user cannot run `file` (it cannot pass through some directory above it), or "".
std::string Unreachable(const std::string& file) {
  for (std::filesystem::path p = std::filesystem::path(file).parent_path(); p != p.root_path();
       p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0 || (st.st_mode & S_IXOTH) == 0) {
      return "other users cannot pass through " + p.string() + " to reach " + file;
    }
  }
  return "";
}

class SecurityTest : public ::testing::TestWithParam<mode_t> {};

TEST_P(SecurityTest, AnotherUserReadsNoSecretOfAJob) {
  if (std::string why = Unsupported(false); !why.empty()) GTEST_SKIP() << why;
  if (Execute({"sh", "-c", "command -v useradd && command -v userdel && command -v setpriv"}, {},
              10s)
          .code != 0) {
    GTEST_SKIP() << "needs useradd, userdel and setpriv";
  }
  const std::string program = TestBinDir() + "/secret_rank";
  for (const std::string& file : {Bin("gos-run"), program}) {
    if (std::string why = Unreachable(file); !why.empty()) GTEST_SKIP() << why;
  }
  // Unique names (useradd's limit is 32 characters).
  const std::string tag = RandomLetters(8);
  TestUsers users;
  for (const std::string& name : {"gost" + tag + "a", "gost" + tag + "b"}) {
    if (std::string why = users.Add(name); !why.empty()) GTEST_SKIP() << "useradd: " << why;
  }
  const User a = UserNamed("gost" + tag + "a"), b = UserNamed("gost" + tag + "b");
  ASSERT_NE(a.uid, 0u);
  ASSERT_NE(b.uid, 0u);

  // The daemons start under the umask; the scratch dir is gos's to make, in a dir anyone may
  // write.
  const ScopedUmask umask(GetParam());
  TempDir parent("gos-security-test", 0777);
  const std::string scratch = parent.Sub("scratch");
  LocalCluster c("gos-security-test");
  Result up = c.Up({"-N", "2", "--scratch-dir", scratch});
  ASSERT_EQ(up.code, 0) << up.Describe() << c.Logs(4000);
  // The harness made the state dir 0755: tightened at start (passable to the client socket,
  // not listable).
  struct stat state {};
  ASSERT_EQ(::stat(c.state().c_str(), &state), 0);
  EXPECT_EQ(state.st_mode & 07777, 0711u);

  // What A's job holds: its environment, its stdin, its memory (the heap), its output.
  const std::string env_secret = RandomLetters(24), stdin_secret = RandomLetters(24);
  const std::string heap_secret(env_secret.rbegin(), env_secret.rend());
  const std::string output_secret = Rot13(env_secret);
  std::vector<std::string> env = c.Env();
  env.push_back("GOS_TEST_SECRET=" + env_secret);
  // sh's $0 is the line for stdin, the rest gos-run's argv.
  auto run =
      Subprocess::Start(As(a, {"sh", "-c", "printf '%s\\n' \"$0\" | exec \"$@\"", stdin_secret,
                               Bin("gos-run"), "-n", "2", "-N", "2", "--checkpoint", program}),
                        env);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_TRUE(WaitUntil(
      [&] { return FindAll(run->output(), "(ready " + output_secret + ")").size() == 2; }, 60s))
      << run->output() << c.Logs(4000);
  auto ps = Ps(c.state() + "/coordinator.sock");
  ASSERT_TRUE(ps.ok() && ps->jobs.size() == 1) << DescribePs(ps);
  const std::string job = std::to_string(ps->jobs[0].id);
  EXPECT_EQ(ps->jobs[0].user, a.name);

  // An epoch, then a restart from it (restore dirs, the job dir made again) and another epoch.
  Result e1 = Execute(As(a, {Bin("gos-ckpt"), job}), c.Env(), 120s);
  ASSERT_EQ(e1.code, 0) << e1.Describe() << c.Logs(4000);
  ASSERT_EQ(Execute(As(a, {Bin("gos-kill"), job}), c.Env(), 30s).code, 0);
  ASSERT_TRUE(run->Wait(SteadyClock::now() + 60s).has_value()) << run->output();
  auto restart = Subprocess::Start(As(a, {Bin("gos-restart"), job}), c.Env());
  ASSERT_TRUE(restart.ok()) << restart.status().ToString();
  ASSERT_TRUE(WaitUntil([&] { return restart->OutputContains("resumed"); }, 60s))
      << restart->output() << c.Logs(4000);
  Result e2 = Execute(As(a, {Bin("gos-ckpt"), job}), c.Env(), 120s);
  ASSERT_EQ(e2.code, 0) << e2.Describe() << c.Logs(4000);

  // Everything gos wrote for this cluster: the state and scratch dirs, the ranks' init dirs,
  // the job's channel files.
  std::vector<std::string> paths = {
      c.state(), scratch,
      std::string(os::kDefaultInitRoot) + "/" + ClusterTag(c.state() + "/cluster.key")};
  const std::string channels = ChannelFilePrefix(c.state());
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (e.path().string().rfind(channels, 0) == 0) paths.push_back(e.path().string());
  }
  const std::vector<std::string> secrets = {env_secret, stdin_secret, heap_secret, output_secret};
  // Root finds them there (the check below is not vacuous): the store holds the environment
  // and stdin, the dumps the heap.
  for (const std::string& s : {env_secret, stdin_secret, heap_secret}) {
    EXPECT_FALSE(FilesHolding({}, {s}, paths).empty())
        << "no file under the cluster's dirs holds " << s << " (as root)";
  }
  const std::vector<std::string> leaked = FilesHolding(As(b, {}), secrets, paths);
  EXPECT_TRUE(leaked.empty()) << "another user (uid " << b.uid << ") read a secret of " << a.name
                              << "'s job in:\n"
                              << DescribeFiles(leaked);
  const std::vector<std::string> writable = WritableByOthers({c.state(), scratch});
  EXPECT_TRUE(writable.empty()) << "writable by group or others:\n" << DescribeFiles(writable);

  ASSERT_EQ(Execute(As(a, {Bin("gos-kill"), job}), c.Env(), 30s).code, 0);
  EXPECT_TRUE(restart->Wait(SteadyClock::now() + 60s).has_value()) << restart->output();
  c.Down();
}

INSTANTIATE_TEST_SUITE_P(Umask, SecurityTest, ::testing::Values(mode_t{0022}, mode_t{0}),
                         [](const ::testing::TestParamInfo<mode_t>& p) {
                           char name[16];
                           std::snprintf(name, sizeof name, "Umask%04o", p.param);
                           return std::string(name);
                         });

}  // namespace
}  // namespace gos::testing
