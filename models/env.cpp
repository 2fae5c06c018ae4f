#include "models/env.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace satrap {

namespace {

model_error io_failed(const std::string& path, const char* what, int err) {
  return make_model_error(path + ": cannot " + what + ": " + std::strerror(err));
}

class posix_writable final : public writable_file {
 public:
  posix_writable(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~posix_writable() override { (void)close(); }

  result<ok_t> append(const void* data, size_t bytes) override {
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
      ssize_t n = ::write(fd_, p, bytes);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return io_failed(path_, "write", n < 0 ? errno : EIO);
      p += n;
      bytes -= static_cast<size_t>(n);
    }
    return ok_t{};
  }
  result<ok_t> sync() override {
    if (::fsync(fd_) != 0)
      return io_failed(path_, "sync", errno);
    return ok_t{};
  }
  result<ok_t> close() override {
    if (fd_ < 0)
      return ok_t{};
    int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0)
      return io_failed(path_, "close", errno);
    return ok_t{};
  }

 private:
  std::string path_;
  int fd_;
};

class posix_view final : public file_view {
 public:
  posix_view(void* base, size_t size) : base_(base), size_(size) {}
  ~posix_view() override {
    if (base_ != nullptr)
      ::munmap(base_, size_);
  }
  const std::byte* data() const override { return static_cast<const std::byte*>(base_); }
  size_t size() const override { return size_; }

 private:
  void* base_;
  size_t size_;
};

class posix_env final : public env {
 public:
  std::chrono::steady_clock::time_point steady_now() override {
    return std::chrono::steady_clock::now();
  }
  std::chrono::system_clock::time_point system_now() override {
    return std::chrono::system_clock::now();
  }

  result<std::unique_ptr<writable_file>> open_writable(const std::string& path,
                                                       bool append) override {
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0)
      return io_failed(path, "open for writing", errno);
    return std::unique_ptr<writable_file>(new posix_writable(path, fd));
  }

  result<std::unique_ptr<file_view>> open_view(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return io_failed(path, "open", errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      return io_failed(path, "stat", err);
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return make_input_error(path + ": not a regular file");
    }
    auto size = static_cast<size_t>(st.st_size);
    void* base = nullptr;
    if (size > 0) {
      base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
      if (base == MAP_FAILED) {
        int err = errno;
        ::close(fd);
        return io_failed(path, "map", err);
      }
    }
    ::close(fd);
    return std::unique_ptr<file_view>(new posix_view(base, size));
  }

  result<ok_t> rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0)
      return io_failed(to, "rename into place", errno);
    return ok_t{};
  }
  result<ok_t> remove_file(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return io_failed(path, "remove", errno);
    return ok_t{};
  }
  result<uint64_t> remove_all(const std::string& path) override {
    uint64_t bytes = tree_bytes(path);
    std::error_code ec;
    fs::remove_all(path, ec);
    if (ec)
      return make_model_error(path + ": cannot remove: " + ec.message());
    return bytes;
  }
  result<ok_t> create_dirs(const std::string& path) override {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec)
      return make_model_error(path + ": cannot create the folder: " + ec.message());
    return ok_t{};
  }
  bool exists(const std::string& path) override {
    std::error_code ec;
    return fs::exists(path, ec);
  }
  bool is_dir(const std::string& path) override {
    std::error_code ec;
    return fs::is_directory(path, ec);
  }
  result<std::vector<std::string>> list_dir(const std::string& path) override {
    std::error_code ec;
    std::vector<std::string> names;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      names.push_back(it->path().filename().string());
    if (ec)
      return make_model_error(path + ": cannot list the folder: " + ec.message());
    std::sort(names.begin(), names.end());
    return names;
  }
  result<uint64_t> file_size(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
      return io_failed(path, "stat", errno);
    return static_cast<uint64_t>(st.st_size);
  }
};

}  // namespace

result<std::string> env::read_file(const std::string& path) {
  auto view = open_view(path);
  if (!view)
    return view.failure();
  return std::string(view.value()->text());
}

result<ok_t> env::write_file_atomic(const std::string& path, std::string_view contents, bool sync) {
  std::string tmp = path + ".tmp";
  auto out = open_writable(tmp);
  if (!out)
    return out.failure();
  auto done = [&]() -> result<ok_t> {
    if (auto r = out.value()->append(contents.data(), contents.size()); !r)
      return r;
    if (sync)
      if (auto r = out.value()->sync(); !r)
        return r;
    if (auto r = out.value()->close(); !r)
      return r;
    return rename(tmp, path);
  }();
  if (!done)
    (void)remove_file(tmp);
  return done;
}

result<ok_t> env::append_file(const std::string& path, std::string_view contents, bool sync) {
  auto out = open_writable(path, /*append=*/true);
  if (!out)
    return out.failure();
  if (auto r = out.value()->append(contents.data(), contents.size()); !r)
    return r;
  if (sync)
    if (auto r = out.value()->sync(); !r)
      return r;
  return out.value()->close();
}

uint64_t env::tree_bytes(const std::string& path) {
  if (!is_dir(path)) {
    auto size = file_size(path);
    return size ? size.value() : 0;
  }
  uint64_t total = 0;
  auto names = list_dir(path);
  if (names)
    for (auto& name : names.value())
      total += tree_bytes(path + "/" + name);
  return total;
}

env& default_env() {
  static posix_env real;
  return real;
}

}  // namespace satrap
