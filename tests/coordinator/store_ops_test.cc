// How gos-ckpt --list and gos-restart show a job's stored checkpoint settings.
#include "gos/coordinator/store_ops.h"

#include "gtest/gtest.h"

namespace gos::coordinator {
namespace {

TEST(RenderCheckpointSettingsTest, SaysIntervalKeepAndRestartsLeft) {
  storage::JobRecord r;  // an old record: nothing stored
  EXPECT_EQ(RenderCheckpointSettings(r, 2),
            "no periodic checkpoints, keeps 2 epochs (the coordinator's --keep)");
  EXPECT_EQ(RenderCheckpointSettings(r, 0),
            "no periodic checkpoints, keeps as many epochs as the coordinator's --keep says");
  r.checkpoint_ms = 30'000;
  r.keep = 1;
  EXPECT_EQ(RenderCheckpointSettings(r, 2), "checkpoints every 30s, keeps 1 epoch");
  r.keep = 3;
  r.restart_on_failure = 2;
  r.restarts_used = 1;
  EXPECT_EQ(RenderCheckpointSettings(r, 2),
            "checkpoints every 30s, keeps 3 epochs, 1 of 2 automatic restarts left");
  r.restart_on_failure = 1;
  r.restarts_used = 1;
  EXPECT_EQ(RenderCheckpointSettings(r, 2),
            "checkpoints every 30s, keeps 3 epochs, 0 of 1 automatic restart left");
}

}  // namespace
}  // namespace gos::coordinator
