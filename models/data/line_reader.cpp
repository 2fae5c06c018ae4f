#include "models/data/line_reader.hpp"

#include <zlib.h>

#include <cstring>

namespace satrap {

line_reader::line_reader(const std::string& path) : buffer_(1 << 18, '\0') {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f) {
    gzbuffer(f, 1 << 17);
    file_ = f;
  } else {
    error_ = std::strerror(errno);
  }
}

line_reader::~line_reader() {
  if (file_)
    gzclose(static_cast<gzFile>(file_));
}

bool line_reader::fill() {
  if (eof_ || !file_)
    return false;
  int n = gzread(static_cast<gzFile>(file_), buffer_.data(), static_cast<unsigned>(buffer_.size()));
  if (n < 0) {
    int code = 0;
    error_ = gzerror(static_cast<gzFile>(file_), &code);
    eof_ = true;
    return false;
  }
  if (n == 0) {
    eof_ = true;
    // A truncated gzip stream reads as a short file; zlib reports it here.
    int code = 0;
    const char* msg = gzerror(static_cast<gzFile>(file_), &code);
    if (code != Z_OK && code != Z_BUF_ERROR)
      error_ = msg;
    else if (code == Z_BUF_ERROR)
      error_ = "unexpected end of gzip data";
    return false;
  }
  begin_ = 0;
  end_ = static_cast<size_t>(n);
  bytes_ += static_cast<uint64_t>(n);
  return true;
}

bool line_reader::next(std::string_view& line) {
  line_.clear();
  truncated_ = false;
  bool any = false;
  while (true) {
    if (begin_ == end_ && !fill()) {
      if (!any || !error_.empty())
        return false;  // the end, or a read error (a cut line is not returned)
      break;           // a last line without '\n'
    }
    any = true;
    const char* start = buffer_.data() + begin_;
    const void* nl = std::memchr(start, '\n', end_ - begin_);
    size_t take = nl ? static_cast<size_t>(static_cast<const char*>(nl) - start) : end_ - begin_;
    size_t room = line_bytes_max - line_.size();
    if (take > room) {
      truncated_ = true;
      line_.append(start, room);
    } else if (!truncated_) {
      line_.append(start, take);
    }
    begin_ += take;
    if (nl) {
      ++begin_;
      break;
    }
  }
  ++line_number_;
  line = line_;
  return true;
}

}  // namespace satrap
