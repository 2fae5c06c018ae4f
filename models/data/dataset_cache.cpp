#include "models/data/dataset_cache.hpp"

#include "models/data/cache_lock.hpp"
#include "models/data/chunk_store.hpp"
#include "models/data/jsonl_format.hpp"
#include "models/data/line_reader.hpp"
#include "models/data/tfrecord_format.hpp"
#include "models/embedding/id_map.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>

namespace satrap {

namespace fs = std::filesystem;

namespace {

// What a file's conversion produced.
struct file_result {
  std::vector<manifest_chunk> chunks;
  dataset_stats stats;
  std::optional<model_error> error;  // fail policy: the first bad line (bad_input); or an I/O error
};

// Whether the cache carries per-id weights: JSON lines with a weighted feature.
bool dataset_weighted(const text_format_options& f) {
  if (f.format == text_format::libsvm || f.format == text_format::libffm)
    return f.value_weights;
  if (!text_format_named(f.format))
    return false;
  auto layout = feature_schema_layout(f.features, pooling::sum);
  return layout && layout->weighted;
}

std::string options_key(const dataset_convert_options& o) {
  std::string key = "v";
  auto add = [&key](const std::string& name, const std::string& value) {
    key.append(" ").append(name).append("=").append(value);
  };
  key.append(std::to_string(dataset_cache_version));
  add("format", std::to_string(static_cast<int>(o.format.format)));
  add("slots", std::to_string(o.format.slots));
  add("chunk", std::to_string(o.chunk_samples));
  add("on_error", o.on_error == on_error_policy::fail ? "fail" : "skip");
  add("starts", "");
  for (auto s : o.format.field_starts)
    key.append(std::to_string(s)).append(",");
  if (o.format.value_weights)  // (only when set: older keys stay as they were)
    add("value_weights", "true");
  if (text_format_named(o.format.format)) {  // (only then: older keys stay as they were)
    add("features", feature_schema_text(o.format.features));
    if (o.format.labels.size() == 1) {
      add("label", o.format.labels[0]);
    } else {
      add("labels", "");
      for (auto& l : o.format.labels)
        key.append(l).append(",");
    }
  }
  for (auto& f : o.files) {
    struct stat st {};
    ::stat(f.c_str(), &st);
    key.append("\n").append(fs::absolute(f).lexically_normal().string());
    key.append(" ").append(std::to_string(st.st_size)).append(" ");
    key.append(std::to_string(st.st_mtim.tv_sec))
      .append(".")
      .append(std::to_string(st.st_mtim.tv_nsec));
  }
  return key;
}

std::string key_folder(const std::string& key) {
  uint64_t h = 0x2545f4914f6cdd1dULL;
  for (unsigned char c : key)
    h = mix64(h ^ c) + 0x9e3779b97f4a7c15ULL;
  char name[17];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(h));
  return name;
}

std::string where(const std::string& file, int64_t line, int column) {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

// Writes the chunk builder's samples as chunk <dir>/f<index>-c<n>.chunk.
void flush_chunk(chunk_builder& chunk, size_t index, const std::string& dir, file_result& r) {
  std::string name = "f";
  name.append(std::to_string(index)).append("-c").append(std::to_string(r.chunks.size()));
  name.append(".chunk");
  r.chunks.push_back({name, chunk.samples()});
  auto written = chunk.write(dir + "/" + name);
  if (!written && !r.error)
    r.error = written.failure();
}

// A TFRecord file of tf.train.Example into chunk files (as convert_file does for text). A record
// that fails its CRC, or a file cut inside a record, is an error whatever data.on_error says:
// the framing is lost, so nothing after it can be read.
file_result convert_records(const dataset_convert_options& o, size_t index,
                            const std::string& dir, const std::atomic<bool>& stop) {
  file_result r;
  const auto& path = o.files[index];
  tfrecord_reader in(path);
  if (!in.is_open()) {
    r.error = make_input_error(path + ": cannot open: " + in.error());
    return r;
  }
  chunk_builder chunk(text_format_slots(o.format), text_format_dense_features(o.format),
                      dataset_weighted(o.format), text_format_tasks(o.format));
  tfrecord_example_parser parser(o.format);
  text_sample sample;
  std::string_view record;
  while (!r.error && !stop.load(std::memory_order_relaxed) && in.next(record)) {
    ++r.stats.lines;
    if (auto err = parser.parse(record, sample)) {
      if (o.on_error == on_error_policy::fail)
        r.error = make_input_error(path + ": record " + std::to_string(in.record_number())
                                   + ", byte " + std::to_string(err->column) + ": " + err->reason
                                   + ": expected " + err->expected);
      else
        ++r.stats.skipped[err->reason];
      continue;
    }
    chunk.add(sample);
    ++r.stats.samples;
    if (chunk.samples() == o.chunk_samples)
      flush_chunk(chunk, index, dir, r);
  }
  if (!r.error && !in.error().empty())
    r.error = make_input_error(path + ": after record " + std::to_string(in.record_number())
                               + ": " + in.error());
  if (!r.error && chunk.samples() > 0)
    flush_chunk(chunk, index, dir, r);
  r.stats.text_bytes = in.bytes();
  return r;
}

// Converts one file into chunk files <dir>/f<index>-c<n>.chunk.
file_result convert_file(const dataset_convert_options& o, size_t index, const std::string& dir,
                         const std::atomic<bool>& stop) {
  if (o.format.format == text_format::tfrecord)
    return convert_records(o, index, dir, stop);
  file_result r;
  const auto& path = o.files[index];
  line_reader in(path);
  if (!in.is_open()) {
    r.error = make_input_error(path + ": cannot open: " + in.error());
    return r;
  }
  const bool jsonl = o.format.format == text_format::jsonl;
  chunk_builder chunk(text_format_slots(o.format), text_format_dense_features(o.format),
                      dataset_weighted(o.format), text_format_tasks(o.format));
  std::optional<jsonl_parser> json;
  if (jsonl)
    json.emplace(o.format);
  auto flush = [&] { flush_chunk(chunk, index, dir, r); };
  text_sample sample;
  std::string_view line;
  while (!r.error && !stop.load(std::memory_order_relaxed) && in.next(line)) {
    ++r.stats.lines;
    if (blank(line))
      continue;
    auto err =
      in.truncated() ? std::optional<parse_error>(parse_error{
        1, "line_too_long", "a line of at most " + std::to_string(text_line_bytes_max) + " bytes"})
      : json         ? json->parse(line, sample)
                     : parse_text_line(line, o.format, sample);
    if (err) {
      if (o.on_error == on_error_policy::fail) {
        r.error = make_input_error(where(path, in.line_number(), err->column) + ": " + err->reason
                                   + ": expected " + err->expected);
      } else {
        ++r.stats.skipped[err->reason];
      }
      continue;
    }
    chunk.add(sample);
    ++r.stats.samples;
    if (chunk.samples() == o.chunk_samples)
      flush();
  }
  if (!r.error && !in.error().empty())  // a damaged gzip stream or a truncated file
    r.error = make_input_error(path + ":" + std::to_string(in.line_number() + 1)
                               + ":1: read_error: " + in.error());
  if (!r.error && chunk.samples() > 0)
    flush();
  r.stats.text_bytes = in.bytes();
  return r;
}

void merge(dataset_stats& into, const dataset_stats& from) {
  into.samples += from.samples;
  into.lines += from.lines;
  into.text_bytes += from.text_bytes;
  for (auto& [reason, count] : from.skipped)
    into.skipped[reason] += count;
}

// Converts every file with `workers` threads. An error stops every worker; of the errors found,
// the one of the earliest file is reported.
result<ok_t> convert_all(const dataset_convert_options& o, const std::string& dir,
                         dataset_manifest& m) {
  std::vector<file_result> results(o.files.size());
  std::atomic<bool> stop{false};
  auto work = [&](size_t first) {
    for (size_t i = first; i < o.files.size(); i += static_cast<size_t>(o.workers)) {
      if (stop)
        return;
      results[i] = convert_file(o, i, dir, stop);
      if (results[i].error)
        stop = true;
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < o.workers && static_cast<size_t>(w) < o.files.size(); ++w)
    threads.emplace_back(work, static_cast<size_t>(w));
  work(0);
  for (auto& t : threads)
    t.join();
  for (auto& r : results) {
    if (r.error)
      return *r.error;
    m.chunks.insert(m.chunks.end(), r.chunks.begin(), r.chunks.end());
    merge(m.stats, r.stats);
  }
  return ok_t{};
}

// Reuses the cache in `dir` when its manifest is the data set's (marking it used now).
bool reuse(const std::string& dir, const std::string& key, cached_dataset& out) {
  auto old = manifest_read(dir);
  if (!old || old->key != key)
    return false;
  out.dir = dir;
  out.stats = old->stats;
  out.reused = true;
  std::error_code ec;  // used now: the last a size cap deletes
  fs::last_write_time(fs::path(dir) / "manifest.bin", fs::file_time_type::clock::now(), ec);
  return true;
}

// Converts the data set into `dir` (its lock held exclusive) and writes the manifest last.
result<ok_t> convert_into(const dataset_convert_options& o, const std::string& dir,
                          dataset_manifest& m, cached_dataset& out) {
  m.slots = text_format_slots(o.format);
  m.dense_features = text_format_dense_features(o.format);
  m.weighted = dataset_weighted(o.format);
  m.tasks = text_format_tasks(o.format);
  auto start = o.environment->steady_now();
  if (auto converted = convert_all(o, dir, m); !converted)
    return converted.failure();
  m.stats.parse_seconds =
    std::chrono::duration<double>(o.environment->steady_now() - start).count();
  if (auto written = manifest_write(dir, m); !written)
    return written.failure();
  out.dir = dir;
  out.stats = m.stats;
  return ok_t{};
}

}  // namespace

result<cached_dataset> dataset_cache_build(const dataset_convert_options& o) {
  if (auto format = text_format_check(o.format); !format)
    return make_input_error("expected " + format.error());
  if (o.files.empty())
    return make_input_error("no data files");
  dataset_manifest m;
  m.key = options_key(o);
  auto dir = (fs::path(o.cache_root) / key_folder(m.key)).string();
  // Shared to reuse; exclusive to convert. A cleaner may delete the folder between two locks:
  // then it is made again (a few tries; each loss means someone deleted it just then).
  for (int attempt = 0; attempt < 4; ++attempt) {
    cached_dataset out;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      return make_model_error(dir + ": cannot create the cache folder: " + ec.message());
    std::unique_ptr<cache_lock> lock;
    auto got = cache_lock::acquire(dir, cache_lock::mode::shared, true, lock);
    if (!got)
      return got.failure();
    if (got.value() != cache_lock::outcome::held)
      continue;
    if (!reuse(dir, m.key, out)) {
      lock.reset();
      got = cache_lock::acquire(dir, cache_lock::mode::exclusive, true, lock);
      if (!got)
        return got.failure();
      if (got.value() != cache_lock::outcome::held)
        continue;
      // Another job may have converted it while this one waited.
      if (!reuse(dir, m.key, out))
        if (auto converted = convert_into(o, dir, m, out); !converted)
          return converted.failure();
      if (!lock->downgrade())
        continue;
    }
    out.hold = std::move(lock);
    if (o.cache_max_bytes > 0)
      out.trimmed = dataset_cache_trim(o.cache_root, o.cache_max_bytes, dir);
    return out;
  }
  return make_model_error(dir + ": the cache folder was deleted each time it was made (a cache "
                          "clean running in a loop?)");
}

int dataset_cache_trim(const std::string& root, uint64_t max_bytes, const std::string& keep_dir) {
  struct entry {
    fs::path dir;
    fs::file_time_type used;
    uint64_t bytes = 0;
  };
  std::vector<entry> sets;
  uint64_t total = 0;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory(ec))
      continue;
    entry x{e.path(), {}, 0};
    x.bytes = dataset_cache_folder_bytes(e.path().string());
    total += x.bytes;
    x.used = fs::last_write_time(e.path() / "manifest.bin", ec);
    if (ec)  // no manifest: being converted (or abandoned); counted, not deleted
      continue;
    if (fs::equivalent(e.path(), keep_dir, ec))
      continue;
    sets.push_back(std::move(x));
  }
  std::sort(sets.begin(), sets.end(), [](auto& a, auto& b) { return a.used < b.used; });
  int removed = 0;
  for (auto& s : sets) {
    if (total <= max_bytes)
      break;
    auto removed_one = dataset_cache_remove(s.dir.string());
    if (!removed_one || removed_one.value() != cache_lock::outcome::held)
      continue;  // in use by a job (or gone, or not deletable): kept
    total -= s.bytes;
    ++removed;
  }
  return removed;
}

uint64_t dataset_cache_folder_bytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (auto& f : fs::recursive_directory_iterator(dir, ec))
    if (f.is_regular_file(ec))
      bytes += f.file_size(ec);
  return bytes;
}

result<cache_lock::outcome> dataset_cache_remove(const std::string& dir) {
  std::unique_ptr<cache_lock> lock;
  auto got = cache_lock::acquire(dir, cache_lock::mode::exclusive, false, lock);
  if (!got || got.value() != cache_lock::outcome::held)
    return got;
  std::error_code ec;
  fs::remove_all(dir, ec);  // the lock file goes too: a waiter finds its lock "gone"
  if (ec)
    return make_model_error(dir + ": cannot delete: " + ec.message());
  return cache_lock::outcome::held;
}

result<std::vector<std::string>> expand_data_files(const std::vector<std::string>& patterns,
                                                   const std::string& base_dir) {
  std::vector<std::string> files;
  for (auto& p : patterns) {
    auto path = fs::path(p);
    if (path.is_relative() && !base_dir.empty())
      path = fs::path(base_dir) / path;
    auto text = path.lexically_normal().string();
    glob_t g{};
    int rc = ::glob(text.c_str(), 0, nullptr, &g);
    if (rc != 0 || g.gl_pathc == 0) {
      ::globfree(&g);
      return make_input_error(text + ": no such data file"
                              + (p != text ? " (from '" + p + "')" : ""));
    }
    for (size_t i = 0; i < g.gl_pathc; ++i) {  // glob sorts its matches
      // Only regular files: /dev/zero or a FIFO has no end (it once spun forever), a folder no lines.
      std::error_code ec;
      if (!fs::is_regular_file(g.gl_pathv[i], ec)) {
        std::string file = g.gl_pathv[i];
        ::globfree(&g);
        return make_input_error(file + ": not a regular file (a data file must be a plain file, not "
                                "a device, FIFO or folder)");
      }
      files.emplace_back(g.gl_pathv[i]);
    }
    ::globfree(&g);
  }
  return files;
}

}  // namespace satrap
