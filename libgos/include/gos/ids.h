// Lists of ids (nodes, CPUs) as people read and type them: "0-3,7,9-10".
#ifndef GOS_IDS_H_
#define GOS_IDS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gos {

// Sorted, de-duplicated ids with runs compressed: {9,0,1,2,3,7,10} -> "0-3,7,9-10"; "" if empty.
std::string CompressIds(std::vector<uint32_t> ids);

}  // namespace gos

#endif  // GOS_IDS_H_
