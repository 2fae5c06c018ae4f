#include "models/memory_env.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace satrap {

namespace {

std::string normal(const std::string& path) {
  auto p = std::filesystem::path(path).lexically_normal().string();
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Whether `path` lies strictly under folder `dir`.
bool under(const std::string& path, const std::string& dir) {
  if (dir == "/")
    return path.size() > 1 && path[0] == '/';
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0
         && path[dir.size()] == '/';
}

model_error io_failed(const std::string& path, const char* what, int err) {
  return make_model_error(path + ": cannot " + what + ": " + std::strerror(err));
}

class memory_view final : public file_view {
 public:
  explicit memory_view(std::shared_ptr<const std::string> bytes) : bytes_(std::move(bytes)) {}
  const std::byte* data() const override {
    return reinterpret_cast<const std::byte*>(bytes_->data());
  }
  size_t size() const override { return bytes_->size(); }

 private:
  std::shared_ptr<const std::string> bytes_;
};

}  // namespace

class memory_env::writer final : public writable_file {
 public:
  writer(memory_env& env, std::string path) : env_(env), path_(std::move(path)) {}
  result<ok_t> append(const void* data, size_t bytes) override {
    if (closed_)
      return io_failed(path_, "write", EBADF);
    return env_.write_at_end(path_, data, bytes);
  }
  result<ok_t> sync() override {
    if (closed_)
      return io_failed(path_, "sync", EBADF);
    return env_.sync_file(path_);
  }
  result<ok_t> close() override {
    closed_ = true;
    return ok_t{};
  }

 private:
  memory_env& env_;
  std::string path_;
  bool closed_ = false;
};

memory_env::memory_env(std::chrono::nanoseconds start) : now_(start) {}

void memory_env::advance(std::chrono::nanoseconds by) {
  std::lock_guard lock(mu_);
  now_ += by;
}
void memory_env::set_capacity(uint64_t bytes) {
  std::lock_guard lock(mu_);
  capacity_ = bytes;
}
void memory_env::fail_syncs(int count) {
  std::lock_guard lock(mu_);
  failing_syncs_ = count;
}
void memory_env::crash() {
  std::lock_guard lock(mu_);
  for (auto it = files_.begin(); it != files_.end();) {
    auto& f = it->second;
    if (f.synced == 0 && !f.bytes->empty()) {
      used_ -= f.bytes->size();
      it = files_.erase(it);
      continue;
    }
    if (f.bytes->size() > f.synced) {
      used_ -= f.bytes->size() - f.synced;
      auto cut = std::make_shared<std::string>(f.bytes->substr(0, f.synced));
      f.bytes = std::move(cut);
    }
    ++it;
  }
}
uint64_t memory_env::used_bytes() const {
  std::lock_guard lock(mu_);
  return used_;
}
int memory_env::syncs() const {
  std::lock_guard lock(mu_);
  return syncs_;
}
int memory_env::refused_writes() const {
  std::lock_guard lock(mu_);
  return refused_writes_;
}
int memory_env::failed_syncs() const {
  std::lock_guard lock(mu_);
  return failed_syncs_;
}

std::chrono::steady_clock::time_point memory_env::steady_now() {
  std::lock_guard lock(mu_);
  return std::chrono::steady_clock::time_point(
    std::chrono::duration_cast<std::chrono::steady_clock::duration>(now_));
}
std::chrono::system_clock::time_point memory_env::system_now() {
  std::lock_guard lock(mu_);
  return std::chrono::system_clock::time_point(
    std::chrono::duration_cast<std::chrono::system_clock::duration>(now_));
}

bool memory_env::dir_locked(const std::string& path) const {
  if (path == "." || path == "/" || dirs_.count(path))
    return true;
  auto it = files_.upper_bound(path);
  return it != files_.end() && under(it->first, path);
}

result<std::unique_ptr<writable_file>> memory_env::open_writable(const std::string& path,
                                                                 bool append) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  if (!dir_locked(parent_of(p)))
    return io_failed(p, "open for writing", ENOENT);
  if (dir_locked(p))
    return io_failed(p, "open for writing", EISDIR);
  auto& f = files_[p];
  if (!f.bytes)
    f.bytes = std::make_shared<std::string>();
  if (!append && !f.bytes->empty()) {
    used_ -= f.bytes->size();
    f.bytes = std::make_shared<std::string>();
    f.synced = 0;
  }
  return std::unique_ptr<writable_file>(new writer(*this, p));
}

result<ok_t> memory_env::write_at_end(const std::string& path, const void* data, size_t n) {
  std::lock_guard lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end())
    return io_failed(path, "write", ENOENT);  // removed while open
  if (used_ + n > capacity_) {
    ++refused_writes_;
    return io_failed(path, "write", ENOSPC);
  }
  auto& f = it->second;
  if (f.bytes.use_count() > 1)  // a view holds the old bytes: copy on write
    f.bytes = std::make_shared<std::string>(*f.bytes);
  f.bytes->append(static_cast<const char*>(data), n);
  used_ += n;
  return ok_t{};
}

result<ok_t> memory_env::sync_file(const std::string& path) {
  std::lock_guard lock(mu_);
  if (failing_syncs_ > 0) {
    --failing_syncs_;
    ++failed_syncs_;
    return io_failed(path, "sync", EIO);
  }
  auto it = files_.find(path);
  if (it == files_.end())
    return io_failed(path, "sync", ENOENT);
  it->second.synced = it->second.bytes->size();
  ++syncs_;
  return ok_t{};
}

result<std::unique_ptr<file_view>> memory_env::open_view(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  auto it = files_.find(p);
  if (it == files_.end())
    return io_failed(p, "open", ENOENT);
  return std::unique_ptr<file_view>(new memory_view(it->second.bytes));
}

result<ok_t> memory_env::rename(const std::string& from, const std::string& to) {
  auto f = normal(from), t = normal(to);
  std::lock_guard lock(mu_);
  auto it = files_.find(f);
  if (it == files_.end())
    return io_failed(t, "rename into place", ENOENT);
  if (!dir_locked(parent_of(t)))
    return io_failed(t, "rename into place", ENOENT);
  auto moved = std::move(it->second);
  files_.erase(it);
  if (auto old = files_.find(t); old != files_.end())
    used_ -= old->second.bytes->size();
  files_[t] = std::move(moved);
  return ok_t{};
}

result<ok_t> memory_env::remove_file(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  if (auto it = files_.find(p); it != files_.end()) {
    used_ -= it->second.bytes->size();
    files_.erase(it);
  }
  return ok_t{};
}

result<uint64_t> memory_env::remove_all(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  uint64_t bytes = 0;
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first == p || under(it->first, p)) {
      bytes += it->second.bytes->size();
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  used_ -= bytes;
  for (auto it = dirs_.begin(); it != dirs_.end();)
    it = (*it == p || under(*it, p)) ? dirs_.erase(it) : std::next(it);
  return bytes;
}

result<ok_t> memory_env::create_dirs(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  if (files_.count(p))
    return io_failed(p, "create the folder", EEXIST);
  for (auto d = p; d != "." && d != "/"; d = parent_of(d))
    dirs_.insert(d);
  return ok_t{};
}

bool memory_env::exists(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  return files_.count(p) > 0 || dir_locked(p);
}

bool memory_env::is_dir(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  return dir_locked(p);
}

result<std::vector<std::string>> memory_env::list_dir(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  if (!dir_locked(p))
    return io_failed(p, "list the folder", ENOENT);
  std::set<std::string> names;
  auto child = [&](const std::string& full) {
    if (!under(full, p))
      return;
    auto rest = full.substr(p == "/" ? 1 : p.size() + 1);
    names.insert(rest.substr(0, rest.find('/')));
  };
  for (auto& [name, f] : files_)
    child(name);
  for (auto& d : dirs_)
    child(d);
  return std::vector<std::string>(names.begin(), names.end());
}

result<uint64_t> memory_env::file_size(const std::string& path) {
  auto p = normal(path);
  std::lock_guard lock(mu_);
  auto it = files_.find(p);
  if (it == files_.end())
    return io_failed(p, "stat", ENOENT);
  return static_cast<uint64_t>(it->second.bytes->size());
}

}  // namespace satrap
