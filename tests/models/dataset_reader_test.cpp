// Files to batches: the binary cache (plain, gzip, CRLF, several files and workers, reuse), both
// error policies, the held-out split, epochs and the deterministic per-epoch shuffle.
#include <doctest/doctest.h>

#include "models/data/dataset_cache.hpp"
#include "models/data/file_source.hpp"
#include "models/data/line_reader.hpp"
#include "models/data/permutation.hpp"

#include <zlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

// A scratch folder, removed at the end of the test.
struct scratch {
  fs::path dir;
  scratch() {
    static int n = 0;
    dir = fs::temp_directory_path()
          / ("satrap-reader-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir);
  }
  ~scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    auto path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  std::string write_gz(const std::string& name, const std::string& text) const {
    auto path = (dir / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return path;
  }
};

// `n` libsvm lines (3 fields of 10 ids), label = sample number is odd, CRLF when asked.
std::string libsvm_lines(int first, int n, const char* eol = "\n") {
  std::string text;
  for (int i = first; i < first + n; ++i)
    text += std::string(i % 2 ? "1" : "-1") + " " + std::to_string(i % 10) + ":1 "
            + std::to_string(10 + i % 7) + ":1 " + std::to_string(20 + i % 3) + ":1" + eol;
  return text;
}

dataset_convert_options libsvm_options(const scratch& s, std::vector<std::string> files) {
  dataset_convert_options o;
  o.format.format = text_format::libsvm;
  o.format.field_starts = {0, 10, 20};
  o.files = std::move(files);
  o.chunk_samples = 7;
  o.cache_root = (s.dir / "cache").string();
  return o;
}

// Builds a cache that must build.
cached_dataset build(const dataset_convert_options& o) {
  auto r = dataset_cache_build(o);
  INFO((r.ok() ? std::string() : r.error()));
  REQUIRE(r.ok());
  return r.value();
}

std::unique_ptr<file_source> open_source(const cached_dataset& train, const cached_dataset& test,
                                         file_source_options fo = {}) {
  auto src = file_source::open(train.dir, test.dir, fo);
  INFO((src.ok() ? std::string() : src.error()));
  REQUIRE(src.ok());
  return std::move(src.value());
}

}  // namespace

TEST_CASE("the line reader reads plain and gzip files alike, with or without a last newline") {
  scratch s;
  for (auto path : {s.write("a.txt", "x\r\ny\n\nz"), s.write_gz("a.gz", "x\r\ny\n\nz")}) {
    line_reader in(path);
    REQUIRE(in.is_open());
    std::vector<std::string> lines;
    std::string_view line;
    while (in.next(line))
      lines.emplace_back(line);
    CHECK(lines == std::vector<std::string>{"x\r", "y", "", "z"});
    CHECK(in.line_number() == 4);
    CHECK(in.error().empty());
  }
  CHECK_FALSE(line_reader((s.dir / "missing").string()).is_open());
}

TEST_CASE("a truncated gzip file is a read error, not a silent short file") {
  scratch s;
  auto path = s.write_gz("t.gz", libsvm_lines(0, 2000));
  fs::resize_file(path, fs::file_size(path) / 2);
  auto r = dataset_cache_build(libsvm_options(s, {path}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().find("read_error") != std::string::npos);
  CHECK(r.bad_input());
}

TEST_CASE("a cached data set reads back sample by sample, in file order, across chunks") {
  scratch s;
  auto a = s.write("a.libfm", libsvm_lines(0, 10, "\r\n"));
  auto b = s.write_gz("b.libfm.gz", libsvm_lines(10, 13));
  auto test = s.write("t.libfm", libsvm_lines(100, 5));
  auto o = libsvm_options(s, {a, b});
  o.workers = 2;
  auto train = build(o);
  CHECK_FALSE(train.reused);
  CHECK(train.stats.samples == 23);
  CHECK(train.stats.lines == 23);
  auto t = build(libsvm_options(s, {test}));
  auto src = open_source(train, t, {.shuffle = false});
  CHECK(src->samples(data_split::train) == 23);
  CHECK(src->samples(data_split::test) == 5);
  CHECK(src->slots() == 3);
  CHECK(src->dense_features() == 1);
  CHECK_FALSE(src->has_teacher());
  auto batch0 = src->make_batch(data_split::train, 2, 5);  // samples 10..14: file b
  CHECK(batch0.size == 5);
  CHECK(batch0.offsets.size() == 16);
  CHECK(batch0.offsets.back() == batch0.ids.size());
  CHECK(batch0.probs.empty());
  for (int i = 0; i < 5; ++i) {
    CHECK(batch0.labels[i] == ((10 + i) % 2 ? 1.0f : 0.0f));
    CHECK(batch0.ids[i * 3 + 1] == slot_id_hash(1, 10 + (10 + i) % 7));
  }
  auto last = src->make_batch(data_split::test, 1, 3);  // the test split's short last batch
  CHECK(last.size == 2);
  auto wrap = src->make_batch(data_split::train, 4, 5);  // positions 20..24: epoch 2 starts at 23
  CHECK(wrap.size == 5);
  CHECK(wrap.labels[3] == 0.0f);  // sample 0 again
  // One worker gives the same cache content; the second build is reused.
  auto again = build(o);
  CHECK(again.reused);
  CHECK(again.dir == train.dir);
  o.workers = 1;
  o.cache_root = (s.dir / "cache1").string();
  auto one = open_source(build(o), t, {.shuffle = false});
  auto batch1 = one->make_batch(data_split::train, 2, 5);
  CHECK(batch1.ids == batch0.ids);
  CHECK(batch1.labels == batch0.labels);
}

TEST_CASE("on_error fail names file, line, column, reason and what was expected") {
  scratch s;
  auto path = s.write("bad.libfm", libsvm_lines(0, 3) + "1 3:1 12:x\n" + libsvm_lines(0, 3));
  auto r = dataset_cache_build(libsvm_options(s, {path}));
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == path + ":4:10: bad_value: expected a finite number after ':'");
  CHECK(r.bad_input());
}

TEST_CASE("on_error skip drops bad lines and counts every reason") {
  scratch s;
  auto text = libsvm_lines(0, 5) + "2 1:1\n" + "1 1:1 x:1\r\n" + "\n" + "1 3:1 12:x\n" + "oops\n"
              + "1 3\n" + libsvm_lines(5, 5);
  auto o = libsvm_options(s, {s.write("bad.libfm", text)});
  o.on_error = on_error_policy::skip;
  auto r = build(o);
  CHECK(r.stats.samples == 10);
  CHECK(r.stats.lines == 16);
  CHECK(r.stats.skipped
        == std::map<std::string, uint64_t>{
          {"bad_label", 2}, {"bad_index", 1}, {"bad_value", 1}, {"bad_feature", 1}});
  auto reused = build(o);  // the counts survive in the manifest
  CHECK(reused.reused);
  CHECK(reused.stats.skipped == r.stats.skipped);
}

TEST_CASE("missing files and empty splits are errors") {
  scratch s;
  auto none = expand_data_files({"nope/*.libfm"}, s.dir.string());
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().find("no such data file") != std::string::npos);
  CHECK(none.bad_input());
  s.write("x1.libfm", "1 1:1\n");
  s.write("x0.libfm", "1 1:1\n");
  auto files = expand_data_files({"x*.libfm"}, s.dir.string());
  REQUIRE(files.ok());
  REQUIRE(files->size() == 2);
  CHECK(files.value()[0].ends_with("x0.libfm"));
  auto r = build(libsvm_options(s, {s.write("empty.libfm", "\n")}));
  auto empty = file_source::open(r.dir, "", {});
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.error().find("has no samples") != std::string::npos);
}

TEST_CASE("the held-out tail is the test split") {
  scratch s;
  auto r = build(libsvm_options(s, {s.write("a.libfm", libsvm_lines(0, 20))}));
  auto src = open_source(r, {}, {.shuffle = false, .test_fraction = 0.25});
  CHECK(src->samples(data_split::train) == 15);
  CHECK(src->samples(data_split::test) == 5);
  auto b = src->make_batch(data_split::test, 0, 8);
  CHECK(b.size == 5);
  CHECK(b.ids[0] == slot_id_hash(0, 15 % 10));
}

TEST_CASE("the shuffle is a deterministic permutation per epoch, windowed") {
  scratch s;
  auto r = build(libsvm_options(s, {s.write("a.libfm", libsvm_lines(0, 103))}));
  auto src =
    open_source(r, {}, {.shuffle = true, .shuffle_window = 10, .seed = 3, .test_fraction = 0.0001});
  auto n = src->samples(data_split::train);
  REQUIRE(n == 102);
  std::vector<int64_t> epoch0, epoch1;
  for (int64_t p = 0; p < n; ++p) {
    epoch0.push_back(src->train_sample(p));
    epoch1.push_back(src->train_sample(n + p));
  }
  CHECK(std::set<int64_t>(epoch0.begin(), epoch0.end()).size() == 102);
  CHECK(std::set<int64_t>(epoch1.begin(), epoch1.end()).size() == 102);
  CHECK(epoch0 != epoch1);
  CHECK(*std::max_element(epoch0.begin(), epoch0.end()) == 101);
  for (int64_t p = 0; p < 100; p += 10) {  // a window stays a window
    auto w = epoch0[p] / 10;
    for (int64_t q = p; q < p + 10; ++q)
      CHECK(epoch0[q] / 10 == w);
  }
  auto again =
    open_source(r, {}, {.shuffle = true, .shuffle_window = 10, .seed = 3, .test_fraction = 0.0001});
  CHECK(again->make_batch(data_split::train, 7, 16).ids
        == src->make_batch(data_split::train, 7, 16).ids);
}

TEST_CASE("index_permutation is a bijection for awkward sizes") {
  for (uint64_t n : {1, 2, 3, 5, 16, 17, 1000}) {
    index_permutation p(n, 99);
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < n; ++i)
      seen.insert(p.at(i));
    CHECK(seen.size() == n);
    CHECK(*seen.rbegin() == n - 1);
  }
}

TEST_CASE("validation_fraction: rows chosen by hash leave the training split, none in both") {
  scratch s;
  // 200 rows: (i%10, i%7, i%3) tells the row (Chinese remainder theorem, 210 > 200).
  auto r = build(libsvm_options(s, {s.write("a.libfm", libsvm_lines(0, 200))}));
  file_source_options fo{.shuffle = true,
                         .shuffle_window = 16,
                         .seed = 11,
                         .test_fraction = 0.1,
                         .validation_fraction = 0.2};
  auto src = open_source(r, {}, fo);
  auto train = src->samples(data_split::train), valid = src->samples(data_split::validation);
  CHECK(src->samples(data_split::test) == 20);
  CHECK(train + valid == 180);
  CHECK(valid > 18);  // about 36 of 180
  CHECK(valid < 60);
  std::map<std::vector<uint64_t>, int64_t> row_of;
  auto all = open_source(r, r, {.shuffle = false}).get()->make_batch(data_split::test, 0, 200);
  REQUIRE(all.size == 200);
  for (int64_t i = 0; i < 200; ++i)
    row_of[{all.ids[3 * i], all.ids[3 * i + 1], all.ids[3 * i + 2]}] = i;
  REQUIRE(row_of.size() == 200);
  auto rows_of = [&](const batch& b) {
    std::vector<int64_t> rows;
    for (int i = 0; i < b.size; ++i)
      rows.push_back(row_of.at({b.ids[3 * i], b.ids[3 * i + 1], b.ids[3 * i + 2]}));
    return rows;
  };
  std::set<int64_t> train_rows, valid_rows;
  for (int64_t k = 0; k * 7 < train * 2; ++k)  // two epochs of training batches
    for (auto row : rows_of(src->make_batch(data_split::train, k, 7)))
      train_rows.insert(row);
  for (int64_t k = 0; k * 8 < valid; ++k)
    for (auto row : rows_of(src->make_batch(data_split::validation, k, 8)))
      valid_rows.insert(row);
  CHECK(static_cast<int64_t>(train_rows.size()) == train);
  CHECK(static_cast<int64_t>(valid_rows.size()) == valid);
  for (auto row : valid_rows) {
    CHECK(train_rows.count(row) == 0);
    CHECK(src->is_validation_row(row));
    CHECK(row < 180);  // never the test tail
  }
  for (auto row : train_rows)
    CHECK(!src->is_validation_row(row));
  // Deterministic in the seed; another seed chooses other rows.
  auto again = open_source(r, {}, fo);
  CHECK(again->make_batch(data_split::validation, 1, 8).ids
        == src->make_batch(data_split::validation, 1, 8).ids);
  fo.seed = 12;
  auto other = open_source(r, {}, fo);
  bool differs = false;
  for (int64_t row = 0; row < 180; ++row)
    differs |= other->is_validation_row(row) != src->is_validation_row(row);
  CHECK(differs);
}
