// Reads a text file line by line, plain or gzip (detected by content, not by name: zlib reads a
// plain file through unchanged). Lines are returned without '\n' (a '\r' stays: the parsers
// tolerate it), with their 1-based number for error messages.
// Threading: one reader per thread; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace satrap {

class line_reader {
 public:
  explicit line_reader(const std::string& path);
  ~line_reader();
  line_reader(const line_reader&) = delete;
  line_reader& operator=(const line_reader&) = delete;

  bool is_open() const { return file_ != nullptr; }
  // Next line into `line` (valid until the next call); false at the end or on a read error
  // (then error() says what happened). A line longer than `line_bytes_max` is returned cut to
  // that length with truncated() set, and the rest of it skipped.
  bool next(std::string_view& line);
  int64_t line_number() const { return line_number_; }
  bool truncated() const { return truncated_; }
  const std::string& error() const { return error_; }
  uint64_t bytes() const { return bytes_; }  // uncompressed bytes read so far

  static constexpr size_t line_bytes_max = (1 << 20) + 1;

 private:
  bool fill();

  void* file_ = nullptr;  // gzFile
  std::string buffer_;    // read buffer
  size_t begin_ = 0, end_ = 0;
  std::string line_;  // a line that spans buffer refills
  int64_t line_number_ = 0;
  bool truncated_ = false;
  bool eof_ = false;
  std::string error_;
  uint64_t bytes_ = 0;
};

}  // namespace satrap
