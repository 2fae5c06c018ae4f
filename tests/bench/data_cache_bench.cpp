// Prints how much faster an epoch reads from the binary cache than from text:
//   data_cache_bench FORMAT FIELD_STARTS|SLOTS FILE...   (FORMAT criteo, libsvm or libffm;
//   FIELD_STARTS e.g. 0,957,5039 or a slot count; "-" for criteo)
// It times (1) parsing every line of the text files (what a text loader does every epoch),
// (2) the one-off conversion into a fresh cache, (3) reading every sample of the cache as
// batches of 512, in the shuffled order of an epoch, and prints ratio = (1) / (3).
#include "models/data/dataset_cache.hpp"
#include "models/data/file_source.hpp"
#include "models/data/line_reader.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>

using namespace satrap;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

text_format_options parse_format(const std::string& name, const std::string& layout) {
  text_format_options o;
  o.format = name == "criteo"   ? text_format::criteo
             : name == "libffm" ? text_format::libffm
                                : text_format::libsvm;
  if (layout.find(',') != std::string::npos) {
    std::stringstream ss(layout);
    std::string item;
    while (std::getline(ss, item, ','))
      o.field_starts.push_back(std::stoll(item));
  } else if (layout != "-") {
    o.slots = std::stoi(layout);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s FORMAT FIELD_STARTS|SLOTS|- FILE...\n", argv[0]);
    return 2;
  }
  dataset_convert_options o;
  o.format = parse_format(argv[1], argv[2]);
  for (int i = 3; i < argc; ++i)
    o.files.emplace_back(argv[i]);
  auto t = std::chrono::steady_clock::now();
  int64_t parsed = 0;
  text_sample sample;
  for (auto& f : o.files) {
    line_reader in(f);
    std::string_view line;
    while (in.next(line))
      parsed += parse_text_line(line, o.format, sample) ? 0 : 1;
  }
  double parse_s = seconds_since(t);
  o.cache_root =
    (std::filesystem::temp_directory_path() / ("satrap-cache-bench-" + std::to_string(::getpid())))
      .string();
  t = std::chrono::steady_clock::now();
  auto cache = dataset_cache_build(o);
  double convert_s = seconds_since(t);
  if (!cache) {
    std::fprintf(stderr, "%s\n", cache.error().c_str());
    return 1;
  }
  // (one sample held out: a split may not be empty)
  auto opened = file_source::open(cache->dir, "", {.test_fraction = 1e-9});
  auto opened_in_order =
    file_source::open(cache->dir, "", {.shuffle = false, .test_fraction = 1e-9});
  if (!opened || !opened_in_order) {
    std::fprintf(stderr, "%s\n", (opened ? opened_in_order : opened).error().c_str());
    return 1;
  }
  auto& src = opened.value();
  const int batch_size = 512;
  const auto n = src->samples(data_split::train);
  int64_t ids = 0;
  auto epoch = [&](const file_source& from) {  // the second epoch: the pages are mapped by then
    auto start = std::chrono::steady_clock::now();
    for (int64_t k = n / batch_size; k < 2 * n / batch_size; ++k)
      ids += static_cast<int64_t>(from.make_batch(data_split::train, k, batch_size).ids.size());
    return seconds_since(start);
  };
  epoch(*src);
  double read_s = epoch(*src);
  double ordered_s = epoch(*opened_in_order.value());
  std::filesystem::remove_all(o.cache_root);
  std::printf(
    "samples=%lld text_parse_s=%.3f convert_s=%.3f cache_epoch_s=%.3f "
    "cache_epoch_unshuffled_s=%.3f\n",
    static_cast<long long>(parsed), parse_s, convert_s, read_s, ordered_s);
  std::printf("ratio=%.1f  (text parse per epoch / cache read per epoch)\n", parse_s / read_s);
  return 0;
}
