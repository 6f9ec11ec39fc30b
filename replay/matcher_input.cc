#include "gos/replay/matcher_input.h"

#include <algorithm>
#include <vector>

namespace gos::replay {

nodeagent::StepResult MatchStep(nodeagent::Matcher& matcher, const Step& step,
                                const std::function<nodeagent::Posted(uint32_t rank)>& next,
                                uint64_t* last_strobe) {
  std::vector<nodeagent::Posted> batch;
  for (uint32_t r = 0; r < step.counts.size(); ++r) {
    for (uint32_t c = 0; c < step.counts[r]; ++c) batch.push_back(next(r));
  }
  const uint64_t strobe = std::max(step.strobe, *last_strobe + 1);
  *last_strobe = strobe;
  return matcher.Step(strobe, batch);
}

}  // namespace gos::replay
