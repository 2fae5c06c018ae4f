// The framing of every snapshot file: flat Cap'n Proto messages followed by a 24-byte trailer
// (magic "SATSNAP1", payload length, 64-bit checksum of the payload), written to a temporary name,
// synced and renamed, so a file is either whole or absent; and read back by mapping the file and
// checking the trailer before anything is parsed. Every file operation goes through an env
// (models/env.hpp; default_env() unless given). Threading: free functions; a writer or a
// mapped_file has one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "models/env.hpp"
#include "models/result.hpp"

#include <memory>

namespace satrap {

// Streaming 64-bit checksum over 8-byte words (four xxHash64-style lanes).
class checksum64 {
 public:
  void add(const void* data, size_t bytes);  // bytes: a multiple of 8
  uint64_t finish() const;

 private:
  uint64_t lanes_[4] = {0x60ea27eeadc0b5d6ULL, 0xc2b2ae3d27d4eb4fULL, 0, 0x61c8864e7a143579ULL};
  uint64_t words_ = 0;
};

struct snapshot_file_written {
  uint64_t bytes = 0;     // file size, trailer included
  uint64_t checksum = 0;  // checksum of everything before the trailer
};

// Writes `pieces` (each a multiple of 8 bytes) and the trailer to path (atomically: tmp + rename).
class snapshot_file_writer {
 public:
  explicit snapshot_file_writer(std::string path, env& e = default_env());
  ~snapshot_file_writer();
  snapshot_file_writer(const snapshot_file_writer&) = delete;
  snapshot_file_writer& operator=(const snapshot_file_writer&) = delete;

  bool append(const void* data, size_t bytes);  // false on an I/O error (see finish)
  result<snapshot_file_written> finish();       // trailer, fsync, rename

 private:
  env& env_;
  std::string path_, tmp_;
  std::unique_ptr<writable_file> out_;  // null once finished
  std::string error_;                   // the first failure ("" while none)
  uint64_t length_ = 0;
  checksum64 sum_;
};

// A read-only view of a snapshot file (env::open_view: a mapping on the real disk) whose trailer
// and checksum have been checked.
class mapped_file {
 public:
  // expect_bytes / expect_checksum: from the manifest, 0 = unknown.
  static result<mapped_file> open(const std::string& path, uint64_t expect_bytes = 0,
                                  uint64_t expect_checksum = 0, env& e = default_env());
  mapped_file(mapped_file&& other) noexcept = default;
  mapped_file& operator=(mapped_file&& other) noexcept = default;

  const std::byte* payload() const { return view_->data(); }
  size_t payload_bytes() const { return payload_; }  // without the trailer
  uint64_t checksum() const { return checksum_; }
  uint64_t file_bytes() const { return size_; }

 private:
  mapped_file() = default;
  std::unique_ptr<file_view> view_;
  size_t size_ = 0, payload_ = 0;
  uint64_t checksum_ = 0;
};

}  // namespace satrap
