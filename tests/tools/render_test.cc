#include "tools/render.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace gos::tools {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The grid of a mesh: the lines after the ruler up to the first blank line, as
// {row label, cells without the group separators}.
std::vector<std::pair<uint32_t, std::string>> Grid(const std::string& mesh) {
  std::vector<std::pair<uint32_t, std::string>> grid;
  std::vector<std::string> lines = Lines(mesh);
  for (size_t i = 1; i < lines.size() && !lines[i].empty(); ++i) {
    std::istringstream in(lines[i]);
    uint32_t label = 0;
    in >> label;
    std::string cells, group;
    while (in >> group) cells += group;
    grid.emplace_back(label, cells);
  }
  return grid;
}

PsNode Node(uint32_t id, std::vector<uint64_t> jobs = {}, bool up = true, std::string reason = "") {
  return PsNode{.id = id,
                .host = "n" + std::to_string(id),
                .up = up,
                .down_reason = std::move(reason),
                .cores = 8,
                .mem_bytes = uint64_t{16} << 30,
                .jobs = jobs,
                .ranks = jobs.empty() ? 0u : 8u};  // load 1.00 on 8 cores
}

PsJob Job(uint64_t id, std::string user, std::vector<uint32_t> nodes, int32_t row,
          int64_t elapsed_ms = 5000) {
  return PsJob{.id = id,
               .user = std::move(user),
               .state = "running",
               .ntasks = static_cast<uint32_t>(nodes.size() * 4),
               .nodes = std::move(nodes),
               .elapsed_ms = elapsed_ms,
               .row = row,
               .exit_code = -1,
               .command = "./app"};
}

TEST(CompressIdsTest, Ranges) {
  EXPECT_EQ(CompressIds({0, 1, 2, 3, 7, 9, 10}), "0-3,7,9-10");
  EXPECT_EQ(CompressIds({}), "");
  EXPECT_EQ(CompressIds({5}), "5");
  EXPECT_EQ(CompressIds({4, 5}), "4-5");
  EXPECT_EQ(CompressIds({10, 3, 2, 3, 1, 12}), "1-3,10,12");  // Unsorted, duplicated.
  EXPECT_EQ(CompressIds({0, 4294967295u}), "0,4294967295");
}

TEST(FormatElapsedTest, SlurmStyle) {
  EXPECT_EQ(FormatElapsed(0), "0:00");
  EXPECT_EQ(FormatElapsed(999), "0:00");
  EXPECT_EQ(FormatElapsed(5'000), "0:05");
  EXPECT_EQ(FormatElapsed(62'500), "1:02");
  EXPECT_EQ(FormatElapsed(3'599'000), "59:59");
  EXPECT_EQ(FormatElapsed(3'600'000), "1:00:00");
  EXPECT_EQ(FormatElapsed(3'723'000), "1:02:03");
  EXPECT_EQ(FormatElapsed(86'399'000), "23:59:59");
  EXPECT_EQ(FormatElapsed(86'400'000), "1-00:00:00");
  EXPECT_EQ(FormatElapsed(((2 * 24 + 3) * 3600 + 4 * 60 + 5) * int64_t{1000}), "2-03:04:05");
  EXPECT_EQ(FormatElapsed(-5'000), "0:00");
}

TEST(FormatJobsTest, AlignedColumns) {
  std::vector<PsJob> jobs = {
      Job(7, "alice", {0, 1, 2, 3, 7}, 0, 5'000),
      Job(12345, "bob", {}, -1, 0),
      Job(42, "carol", {4}, 1, 3'723'000),
  };
  jobs[1].state = "queued";
  jobs[1].ntasks = 128;
  jobs[2].state = "completed";
  jobs[2].exit_code = 0;
  jobs[2].command = "./lu.B --size 64";
  jobs[0].checkpoint_ms = 30'000;  // periodic, one epoch taken 12 s ago
  jobs[0].last_epoch = 3;
  jobs[0].last_epoch_age_ms = 12'000;
  jobs[2].last_epoch = 1;  // gos-ckpt by hand only
  jobs[2].last_epoch_age_ms = 3'600'000;
  EXPECT_EQ(FormatJobs(jobs),
            "JOBID  USER   STATE      RANKS  NODES  ELAPSED  CKPT  EPOCH            COMMAND\n"
            "    7  alice  running       20  0-3,7     0:05   30s  3 (0:12 ago)     ./app\n"
            "12345  bob    queued       128  -         0:00     -  -                ./app\n"
            "   42  carol  completed      4  4      1:02:03     -  1 (1:00:00 ago)  ./lu.B "
            "--size 64\n");
}

TEST(FormatJobsTest, HeaderOnlyAndNoTrailingSpaces) {
  EXPECT_EQ(FormatJobs({}), "JOBID  USER  STATE  RANKS  NODES  ELAPSED  CKPT  EPOCH  COMMAND\n");
  PsJob j = Job(1, "eve", {0}, 0);
  j.command = "";
  for (const std::string& line : Lines(FormatJobs({j}))) {
    ASSERT_FALSE(line.empty());
    EXPECT_NE(line.back(), ' ') << line;
  }
}

TEST(FormatJobsTest, ControlCharactersCannotBreakTheTable) {
  PsJob j = Job(1, "mal\nlory", {0}, 0);
  j.command = "echo 'a\nb'\x1b[2J";
  std::vector<std::string> lines = Lines(FormatJobs({j}));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("mal?lory"), std::string::npos);
  EXPECT_NE(lines[1].find("echo 'a?b'?[2J"), std::string::npos);
}

TEST(FormatNodesTest, AlignedColumnsAndDownReason) {
  std::vector<PsNode> nodes = {Node(0, {12, 14}), Node(1, {12}, false, "heartbeat lost"),
                               Node(10, {})};
  nodes[0].ranks = 8;  // load 1.00
  nodes[2].cores = 64;
  nodes[2].mem_bytes = uint64_t{3} << 29;  // 1.5 GiB.
  nodes[2].host = "bignode";
  EXPECT_EQ(FormatNodes(nodes),
            "NODE  HOST     STATE                  CORES   MEM  LOAD  JOBS\n"
            "   0  n0       up                         8   16G  1.00  12,14\n"
            "   1  n1       down (heartbeat lost)      8   16G     -  12\n"
            "  10  bignode  up                        64  1.5G  0.00  -\n");
}

// The example in render.h.
TEST(RenderMeshTest, FourNodesTwoJobsExact) {
  std::vector<PsNode> nodes = {Node(0, {10}), Node(1, {10}), Node(2, {11}), Node(3)};
  std::vector<PsJob> jobs = {Job(11, "bob", {2}, 1, 62'000), Job(10, "alice", {0, 1}, 0)};
  EXPECT_EQ(RenderMesh(nodes, jobs, 0),
            "  0\n"
            "0 AAB.\n"
            "\n"
            "4 nodes: 4 up (1 idle), 0 down\n"
            ". idle  X down  row 0 running: A\n"
            "  JOBID USER  RANKS NODES ELAPSED\n"
            "A    10 alice     8     2    0:05\n"
            "B    11 bob       4     1    1:02\n");
  // With row 1 running, job 11 takes the first letter.
  EXPECT_EQ(RenderMesh(nodes, jobs, 1),
            "  0\n"
            "0 BBA.\n"
            "\n"
            "4 nodes: 4 up (1 idle), 0 down\n"
            ". idle  X down  row 1 running: A\n"
            "  JOBID USER  RANKS NODES ELAPSED\n"
            "A    11 bob       4     1    1:02\n"
            "B    10 alice     8     2    0:05\n");
}

// 1,000 nodes, 70 jobs (9 beyond the 61 letters), 10 down nodes, two gang rows.
struct BigCluster {
  std::vector<PsNode> nodes;
  std::vector<PsJob> jobs;
};

BigCluster MakeBigCluster() {
  BigCluster c;
  for (uint32_t i = 0; i < 1000; ++i) c.nodes.push_back(Node(i));
  // Row 0: 60 jobs of 14 nodes on 0-839. Row 1: 10 jobs of 8 nodes on 0-79 (time-shared).
  // Nodes 840-989 idle, 990-999 down.
  for (uint64_t j = 0; j < 70; ++j) {
    bool row0 = j < 60;
    uint32_t size = row0 ? 14 : 8;
    uint32_t first = row0 ? static_cast<uint32_t>(j) * 14 : static_cast<uint32_t>(j - 60) * 8;
    std::vector<uint32_t> ids;
    for (uint32_t n = first; n < first + size; ++n) {
      ids.push_back(n);
      c.nodes[n].jobs.push_back(1000 + j);
    }
    c.jobs.push_back(Job(1000 + j, "user" + std::to_string(j % 7), ids, row0 ? 0 : 1,
                         static_cast<int64_t>(j) * 61'000));
  }
  for (uint32_t i = 990; i < 1000; ++i) {
    c.nodes[i].up = false;
    c.nodes[i].down_reason = "heartbeat lost";
  }
  return c;
}

TEST(RenderMeshTest, ThousandNodesFitOneTerminal) {
  BigCluster c = MakeBigCluster();
  for (int width : {80, 100, 132}) {
    SCOPED_TRACE(width);
    std::string mesh = RenderMesh(c.nodes, c.jobs, 0, width);
    std::vector<std::string> lines = Lines(mesh);
    EXPECT_LE(lines.size(), 60u);
    for (const std::string& line : lines) EXPECT_LE(line.size(), static_cast<size_t>(width));

    // Every node exactly once, in id order, each row labelled with its first id.
    std::string all;
    uint32_t expected_label = 0;
    for (const auto& [label, cells] : Grid(mesh)) {
      EXPECT_EQ(label, expected_label);
      expected_label += static_cast<uint32_t>(cells.size());
      all += cells;
    }
    ASSERT_EQ(all.size(), 1000u);
    EXPECT_EQ(std::count(all.begin(), all.end(), 'X'), 10);
    EXPECT_EQ(std::count(all.begin(), all.end(), '.'), 150);
    EXPECT_EQ(all.substr(990), "XXXXXXXXXX");
    // Row 0 runs: its 60 jobs get A..Z (no X) a..z 0..8 and cover their 14 nodes each,
    // including the nodes 0-79 time-shared with row 1.
    const std::string letters = "ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (size_t j = 0; j < 60; ++j) {
      EXPECT_EQ(all.substr(j * 14, 14), std::string(14, letters[j])) << j;
    }
    EXPECT_EQ(std::count(all.begin(), all.end(), '#'), 0);

    EXPECT_NE(mesh.find("1000 nodes: 990 up (150 idle), 10 down, 80 time-shared"),
              std::string::npos);
    EXPECT_NE(mesh.find("down: 990-999 (heartbeat lost)"), std::string::npos);
    EXPECT_NE(mesh.find("# more jobs than letters (9)"), std::string::npos);
    EXPECT_NE(mesh.find("row 0 running: A-8"), std::string::npos);
    // The legend names every job once, with its letter ('#' past the 61st).
    for (uint64_t j = 0; j < 70; ++j) {
      std::string id = std::to_string(1000 + j) + " user" + std::to_string(j % 7);
      size_t at = mesh.find(id);
      ASSERT_NE(at, std::string::npos) << id;
      ASSERT_GE(at, 3u);
      EXPECT_EQ(mesh.find(id, at + 1), std::string::npos) << id;
      char letter = j < 61 ? letters[j] : '#';
      EXPECT_EQ(mesh.substr(at - 3, 3), std::string(1, letter) + "  ") << id;
    }
  }
}

TEST(RenderMeshTest, EightyColumnsUseRowsOfSeventyInGroupsOfTen) {
  BigCluster c = MakeBigCluster();
  std::vector<std::string> lines = Lines(RenderMesh(c.nodes, c.jobs, 0, 80));
  ASSERT_GE(lines.size(), 16u);
  EXPECT_EQ(lines[0], "    0          10         20         30         40         50         60");
  EXPECT_EQ(lines[1],
            "  0 AAAAAAAAAA AAAABBBBBB BBBBBBBBCC CCCCCCCCCC CCDDDDDDDD DDDDDDEEEE EEEEEEEEEE");
  EXPECT_EQ(lines[15].substr(0, 4), "980 ");
  EXPECT_EQ(lines[15].substr(4), ".......... XXXXXXXXXX");
  EXPECT_EQ(lines[16], "");
}

TEST(RenderMeshTest, TimeSharedNodeShowsTheRunningRowsJob) {
  BigCluster c = MakeBigCluster();
  std::string all;
  for (const auto& [label, cells] : Grid(RenderMesh(c.nodes, c.jobs, 1))) all += cells;
  ASSERT_EQ(all.size(), 1000u);
  // Row 1 runs: its 10 jobs get A-J on nodes 0-79; row 0 jobs K... show where row 1 is absent.
  EXPECT_EQ(all.substr(0, 8), "AAAAAAAA");
  EXPECT_EQ(all.substr(72, 8), "JJJJJJJJ");
  EXPECT_EQ(all.substr(80, 4), "PPPP");  // Job 1005 (row 0, nodes 70-83) is letter K+5.
  // No running row: the earliest letter, which is then the lowest job id.
  all.clear();
  for (const auto& [label, cells] : Grid(RenderMesh(c.nodes, c.jobs, -1))) all += cells;
  EXPECT_EQ(all.substr(0, 14), std::string(14, 'A'));
}

TEST(RenderMeshTest, DownNodesAreXWithCountAndReasons) {
  std::vector<PsNode> nodes = {Node(0, {5}),
                               Node(1, {5}, false, "heartbeat lost"),
                               Node(2, {}, false, "heartbeat lost"),
                               Node(3, {}, false, "disk"),
                               Node(4, {}, false, "heartbeat lost"),
                               Node(5)};
  std::vector<PsJob> jobs = {Job(5, "ann", {0, 1}, 0)};
  std::string mesh = RenderMesh(nodes, jobs, 0);
  auto grid = Grid(mesh);
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_EQ(grid[0].second, "AXXXX.");
  EXPECT_NE(mesh.find("6 nodes: 2 up (1 idle), 4 down\n"), std::string::npos) << mesh;
  EXPECT_NE(mesh.find("down: 1-2,4 (heartbeat lost); 3 (disk)\n"), std::string::npos) << mesh;
}

// 'X' is not a job letter (it marks down nodes), so 61 letters, then '#'.
TEST(RenderMeshTest, LettersBeyondSixtyOneJobs) {
  std::vector<PsNode> nodes;
  std::vector<PsJob> jobs;
  for (uint32_t i = 0; i < 64; ++i) {
    nodes.push_back(Node(i, {100 + uint64_t{i}}));
    jobs.push_back(Job(100 + i, "u", {i}, 0));
  }
  std::string mesh = RenderMesh(nodes, jobs, 0, 200);
  auto grid = Grid(mesh);
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_EQ(grid[0].second, "ABCDEFGHIJKLMNOPQRSTUVWYZabcdefghijklmnopqrstuvwxyz0123456789###");
  EXPECT_NE(mesh.find("# more jobs than letters (3)"), std::string::npos);
  EXPECT_NE(mesh.find("W   122 u"), std::string::npos);
  EXPECT_NE(mesh.find("Y   123 u"), std::string::npos);
  EXPECT_NE(mesh.find("9   160 u"), std::string::npos);
  for (uint64_t id : {161, 162, 163}) {
    EXPECT_NE(mesh.find("#   " + std::to_string(id) + " u"), std::string::npos) << id;
  }
  EXPECT_EQ(std::count(mesh.begin(), mesh.end(), 'X'), 1) << mesh;  // Only in the key.
}

TEST(RenderMeshTest, GapsQueuedAndFinishedJobs) {
  // Ids 1-3 and 6: ids 0, 4, 5 are not nodes.
  std::vector<PsNode> nodes = {Node(1, {7}), Node(2), Node(3), Node(6)};
  std::vector<PsJob> jobs = {Job(7, "ann", {1}, 0), Job(8, "bo", {}, -1, 0),
                             Job(9, "cy", {2, 3}, 0)};
  jobs[2].state = "completed";
  jobs[2].exit_code = 0;  // Final: its nodes are free again.
  std::string mesh = RenderMesh(nodes, jobs, 0);
  auto grid = Grid(mesh);
  ASSERT_EQ(grid.size(), 1u);
  EXPECT_EQ(grid[0].second, "?A..??.");
  EXPECT_NE(mesh.find("? not a node"), std::string::npos);
  EXPECT_NE(mesh.find("queued (1): 8\n"), std::string::npos);
  EXPECT_EQ(mesh.find(" 9 "), std::string::npos) << mesh;
}

TEST(RenderMeshTest, NarrowAndWideTerminals) {
  BigCluster c = MakeBigCluster();
  for (int width : {20, 40, 200}) {
    SCOPED_TRACE(width);
    std::string mesh = RenderMesh(c.nodes, c.jobs, 0, width);
    size_t total = 0;
    auto grid = Grid(mesh);
    for (const auto& [label, cells] : grid) total += cells.size();
    EXPECT_EQ(total, 1000u);
    std::vector<std::string> lines = Lines(mesh);
    for (size_t i = 0; i <= grid.size(); ++i) EXPECT_LE(lines[i].size(), size_t(width));
  }
  // 200 columns: rows of 100.
  EXPECT_EQ(Grid(RenderMesh(c.nodes, c.jobs, 0, 200)).size(), 10u);
}

TEST(RenderMeshTest, Empty) {
  EXPECT_EQ(RenderMesh({}, {}, 0), "0 nodes: 0 up (0 idle), 0 down\n. idle  X down\n");
}

}  // namespace
}  // namespace gos::tools
