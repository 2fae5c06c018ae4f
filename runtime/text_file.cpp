#include "runtime/text_file.hpp"

#include "runtime/error.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace satrap {

caf::expected<std::string> read_text_file(const std::string& path, uint64_t max_bytes,
                                          const std::string& what) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat on the opened file then decides.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return make_error(errc::invalid_config,
                      path + ": cannot open " + what + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(errc::invalid_config,
                      path + ": not a regular file (a " + what + " must be a plain file)");
  }
  auto limit = std::to_string(max_bytes >> 10) + " KiB";
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return make_error(errc::invalid_config, path + ": " + std::to_string(st.st_size) + " bytes; a "
                                              + what + " may have at most " + limit);
  }
  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);
  size_t got = 0;
  for (;;) {  // the file may grow while read: never past the limit
    if (got == text.size()) {
      if (text.size() > max_bytes)
        break;
      text.resize(std::min<size_t>(text.size() * 2, max_bytes + 1));
    }
    auto n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      auto err = std::string(std::strerror(errno));
      ::close(fd);
      return make_error(errc::invalid_config, path + ": cannot read " + what + ": " + err);
    }
    if (n == 0)
      break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  if (got > max_bytes)
    return make_error(errc::invalid_config,
                      path + ": more than " + limit + "; a " + what + " may have at most " + limit);
  text.resize(got);
  return text;
}

}  // namespace satrap
