// Private to gos::storage (and its tests): key layout, the id-counter value and record
// validation. The record codecs themselves are public, in gos/storage/tables.h.
#ifndef GOS_STORAGE_CODEC_H_
#define GOS_STORAGE_CODEC_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gos/status.h"
#include "gos/storage/tables.h"

namespace gos::storage {

inline constexpr std::string_view kJobPrefix = "job/";
inline constexpr std::string_view kNodePrefix = "node/";
inline constexpr std::string_view kNextJobIdKey = "meta/next_job_id";

// "job/" + 16 lower-case hex digits, so that byte order is id order.
std::string JobKey(uint64_t id);
// "node/" + 8 lower-case hex digits.
std::string NodeKey(uint32_t id);
// The id in a key made by JobKey / NodeKey; nullopt for any other key.
std::optional<uint64_t> ParseJobKey(std::string_view key);
std::optional<uint32_t> ParseNodeKey(std::string_view key);

// meta/next_job_id value: u8 version (1) | u64 next id to hand out.
std::vector<uint8_t> EncodeNextJobId(uint64_t next);
StatusOr<uint64_t> DecodeNextJobId(std::span<const uint8_t> in);

// INVALID_ARGUMENT naming the field if the record does not fit the format limits.
Status ValidateJob(const JobRecord& job);
Status ValidateNode(const NodeRecord& node);

}  // namespace gos::storage

#endif  // GOS_STORAGE_CODEC_H_
