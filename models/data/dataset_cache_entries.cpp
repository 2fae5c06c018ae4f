#include "models/data/dataset_cache_entries.hpp"

#include "models/data/chunk_store.hpp"
#include "models/data/dataset_cache.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace satrap {

namespace fs = std::filesystem;

namespace {

bool is_key_name(const std::string& name) {
  return name.size() == 16 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The data files of a manifest key (dataset_cache.cpp's options_key: one line per file,
// "<absolute path> <size> <mtime>", after the options line).
std::string files_of_key(const std::string& key) {
  std::vector<std::string> files;
  size_t at = key.find('\n');
  while (at != std::string::npos) {
    size_t next = key.find('\n', at + 1);
    auto line = key.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1);
    // path size mtime: the path is what precedes the last two fields (it may hold spaces)
    auto cut = line.rfind(' ');
    cut = cut == std::string::npos ? cut : line.rfind(' ', cut - 1);
    files.push_back(cut == std::string::npos ? line : line.substr(0, cut));
    at = next;
  }
  if (files.empty())
    return "";
  return files.size() == 1 ? files[0]
                           : files[0] + " (+" + std::to_string(files.size() - 1) + " more)";
}

int64_t idle_seconds(const fs::path& p) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  if (ec)
    return 0;
  auto age = fs::file_time_type::clock::now() - t;
  return std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::seconds>(age).count());
}

}  // namespace

bool dataset_cache_in_use(const std::string& dir) {
  // Opened read-only and never created: listing changes nothing in the folder.
  int fd = ::open((dir + "/" + cache_lock_file).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;  // no lock file: nobody has locked it
  bool busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);  // drops the probe's lock, if it got one
  return busy;
}

result<dataset_cache_listing> dataset_cache_list(const std::string& root) {
  dataset_cache_listing out;
  std::error_code ec;
  if (!fs::exists(root, ec))
    return out;
  if (!fs::is_directory(root, ec))
    return make_input_error(root + ": not a folder");
  for (auto& e : fs::directory_iterator(root, ec)) {
    auto name = e.path().filename().string();
    std::error_code ignored;
    bool ours = e.is_directory(ignored) && is_key_name(name)
                && (fs::exists(e.path() / "manifest.bin", ignored)
                    || fs::exists(e.path() / cache_lock_file, ignored));
    if (!ours) {
      ++out.foreign;
      continue;
    }
    dataset_cache_entry x;
    x.dir = e.path().string();
    auto m = manifest_read(x.dir);
    x.complete = m.ok();
    if (x.complete) {
      x.samples = m->stats.samples;
      x.files = files_of_key(m->key);
    }
    x.bytes = dataset_cache_folder_bytes(x.dir);
    x.idle_s = idle_seconds(x.complete ? e.path() / "manifest.bin" : e.path());
    x.in_use = dataset_cache_in_use(x.dir);
    out.entries.push_back(std::move(x));
  }
  if (ec)
    return make_model_error(root + ": cannot read: " + ec.message());
  std::sort(out.entries.begin(), out.entries.end(), [](auto& a, auto& b) { return a.dir < b.dir; });
  return out;
}

}  // namespace satrap
