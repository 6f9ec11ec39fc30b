// Recorded steps -> matcher input: how a recorded run's steps are given to the matcher, the
// same for the nodeagents that replay a run and for the trace exporter that recomputes its
// matches (docs/specs/replay-log.md).
#ifndef GOS_REPLAY_MATCHER_INPUT_H_
#define GOS_REPLAY_MATCHER_INPUT_H_

#include <cstdint>
#include <functional>

#include "gos/bcs/matcher.h"
#include "gos/replay/log.h"

namespace gos::replay {

// Gives `matcher` the descriptors recorded step `step` took: step.counts[r] of them from each
// rank r in ascending order, each the one next(r) returns (the rank's next descriptor in seq
// order). Returns the matcher's result for the step.
//
// The step goes in at its recorded strobe, raised to *last_strobe + 1 when it is not above
// that, and *last_strobe becomes the strobe used. The matcher needs increasing strobes; a log
// that spans a restart after a coordinator restart may count strobes from 1 again, and only
// the order of the steps matters to matching (a restored matcher's queued descriptors sort
// before any later strobe).
nodeagent::StepResult MatchStep(nodeagent::Matcher& matcher, const Step& step,
                                const std::function<nodeagent::Posted(uint32_t rank)>& next,
                                uint64_t* last_strobe);

}  // namespace gos::replay

#endif  // GOS_REPLAY_MATCHER_INPUT_H_
