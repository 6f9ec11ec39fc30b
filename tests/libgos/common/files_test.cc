// gos/files.h: the modes of what gos creates, whatever the umask.
#include "gos/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace gos {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// Sets a umask for a test's scope.
class Umask {
 public:
  explicit Umask(mode_t mask) : old_(::umask(mask)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

TEST(FilesTest, CreatedDirsGetTheModeWhateverTheUmask) {
  for (mode_t mask : {mode_t{0}, mode_t{022}, mode_t{0777}}) {
    testing::TempDir tmp("gos-files-test");
    Umask u(mask);
    ASSERT_TRUE(CreateDirs(tmp.Sub("a/b/c"), kPassDir).ok());
    EXPECT_EQ(ModeOf(tmp.Sub("a")), kPassDir) << "umask " << mask;
    EXPECT_EQ(ModeOf(tmp.Sub("a/b/c")), kPassDir) << "umask " << mask;
    ASSERT_TRUE(MakeDir(tmp.Sub("a/b/c/d/"), kPrivateDir).ok());
    EXPECT_EQ(ModeOf(tmp.Sub("a/b/c/d")), kPrivateDir) << "umask " << mask;
  }
}

TEST(FilesTest, CreateDirsLeavesExistingDirsAloneMakeDirTightensThem) {
  testing::TempDir tmp("gos-files-test", 0777);
  ASSERT_TRUE(CreateDirs(tmp.path(), kPrivateDir).ok());
  EXPECT_EQ(ModeOf(tmp.path()), 0777u);
  ASSERT_TRUE(MakeDir(tmp.path(), kPrivateDir).ok());
  EXPECT_EQ(ModeOf(tmp.path()), kPrivateDir);
}

TEST(FilesTest, MakeDirRefusesASharedDir) {
  testing::TempDir tmp("gos-files-test", 01777);
  Status s = MakeDir(tmp.path(), kPrivateDir);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(ModeOf(tmp.path()), 01777u);
}

TEST(FilesTest, MakeDirFailsOnAFile) {
  testing::TempDir tmp("gos-files-test");
  ASSERT_TRUE(WriteFileWithMode(tmp.Sub("f"), "x", kPrivateFile).ok());
  EXPECT_FALSE(MakeDir(tmp.Sub("f"), kPrivateDir).ok());
}

TEST(FilesTest, WrittenFilesGetTheModeNewOrNot) {
  testing::TempDir tmp("gos-files-test");
  Umask u(0);
  ASSERT_TRUE(WriteFileWithMode(tmp.Sub("f"), "first", 0666).ok());
  EXPECT_EQ(ModeOf(tmp.Sub("f")), 0666u);
  ASSERT_TRUE(WriteFileWithMode(tmp.Sub("f"), "second", kPrivateFile).ok());
  EXPECT_EQ(ModeOf(tmp.Sub("f")), kPrivateFile);
  struct stat st {};
  ASSERT_EQ(::stat(tmp.Sub("f").c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 6);
}

TEST(FilesTest, NewFilesAreNeverOneAlreadyThereNorALink) {
  testing::TempDir tmp("gos-files-test");
  Umask u(0);
  ASSERT_TRUE(CreateNewFile(tmp.Sub("f"), "decisions", 0400, ::getuid(), ::getgid()).ok());
  EXPECT_EQ(ModeOf(tmp.Sub("f")), 0400u);
  std::ifstream in(tmp.Sub("f"));
  std::string got;
  std::getline(in, got);
  EXPECT_EQ(got, "decisions");
  // Whatever someone else put at the path first stays untouched and the creation fails.
  EXPECT_FALSE(CreateNewFile(tmp.Sub("f"), "again", 0400).ok());
  ASSERT_TRUE(WriteFileWithMode(tmp.Sub("victim"), "keep", 0644).ok());
  ASSERT_EQ(::symlink(tmp.Sub("victim").c_str(), tmp.Sub("link").c_str()), 0);
  EXPECT_FALSE(CreateNewFile(tmp.Sub("link"), "overwrite", 0600).ok());
  std::ifstream victim(tmp.Sub("victim"));
  std::getline(victim, got);
  EXPECT_EQ(got, "keep");
  EXPECT_EQ(ModeOf(tmp.Sub("victim")), 0644u);
}

}  // namespace
}  // namespace gos
