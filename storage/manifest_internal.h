// Private to the storage libraries (and their tests): the manifest checks the checkpoint
// store shares with the manifest decoder (storage/manifest.cc, in gos::chunks).
#ifndef GOS_STORAGE_MANIFEST_INTERNAL_H_
#define GOS_STORAGE_MANIFEST_INTERNAL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "gos/status.h"
#include "gos/storage/manifest.h"

namespace gos::storage {

// Keys are ASCII when written by us; a damaged one is shown with its odd bytes escaped.
std::string Printable(std::string_view key);

namespace internal {

// "job 3 epoch 2", for messages.
std::string EpochName(uint64_t job, uint64_t epoch);
// Empty if the file entry is well-formed, else what is wrong with it.
std::string FileProblem(const FileEntry& f);
// INVALID_ARGUMENT saying what is wrong with the manifest (CommitEpoch's check).
Status ValidateManifest(const EpochManifest& m);

}  // namespace internal
}  // namespace gos::storage

#endif  // GOS_STORAGE_MANIFEST_INTERNAL_H_
