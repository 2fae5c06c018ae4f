// Reading JSON lines against Criteo TSV (issue 44's reading figure):
//   jsonl_read_bench [SAMPLES] [ROUNDS]          (defaults 200000 and 3)
// writes the same SAMPLES samples (a label, 13 integer counts, 26 hexadecimal categories) as a
// Criteo TSV file and as a JSON lines file ({"label": .., "I1": .., "C1": "..", ...}, read by a
// schema of 13 dense and 26 id features), then, in ROUNDS rounds alternating which goes first,
// times for each (1) the first pass: text into a fresh binary cache (one worker), and (2) a cached
// epoch: every sample read from the cache as batches of 512, in an epoch's shuffled order. It
// prints each round's samples/s and, on the last line, the medians and the JSON lines / Criteo
// ratios. Samples/s are per second of the calling thread's CPU time (the conversion of one file
// with one worker, and the epoch's reads, run on it), so a loaded machine does not skew them; the
// wall-clock figures are printed per round beside them. A third file, JSON lines with a 10-id bag and a 20-id sequence per sample beside the
// same features (multi-hot, 69 ids a sample), is timed the same way for scale; and a fourth, the
// same samples as TFRecord of tf.train.Example (data.source tfrecord: the counts as float_list,
// the categories as bytes_list, the label as int64_list), timed like the others.
#include "models/data/dataset_cache.hpp"
#include "models/data/file_source.hpp"
#include "models/data/tfrecord_format.hpp"

#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace satrap;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// This thread's CPU seconds.
double thread_cpu() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct rng {
  uint64_t s = 0x9e3779b97f4a7c15ULL;
  uint64_t next() {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  }
};

// Protobuf's wire format, for the TFRecord file.
std::string varint(uint64_t v) {
  std::string o;
  do {
    uint8_t c = v & 0x7f;
    v >>= 7;
    o.push_back(static_cast<char>(c | (v ? 0x80 : 0)));
  } while (v);
  return o;
}
std::string ld(int field, const std::string& body) {
  return varint(static_cast<uint64_t>(field) << 3 | 2) + varint(body.size()) + body;
}
std::string entry(const std::string& key, const std::string& feature) {
  return ld(1, ld(1, key) + ld(2, feature));
}
void put_u32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
std::string framed(const std::string& payload) {
  uint64_t n = payload.size();
  std::string head(reinterpret_cast<const char*>(&n), 8), out = head;
  put_u32(out, tfrecord_masked_crc(head));
  out += payload;
  put_u32(out, tfrecord_masked_crc(payload));
  return out;
}

// The four files, from one stream of random values.
void write_files(int64_t samples, const std::string& tsv, const std::string& json,
                 const std::string& multi, const std::string& records) {
  std::ofstream t(tsv), j(json), m(multi), tf(records, std::ios::binary);
  rng r;
  char hex[17];
  for (int64_t i = 0; i < samples; ++i) {
    int label = static_cast<int>(r.next() % 4 == 0);
    std::string tl = std::to_string(label), jl = "{\"label\": " + std::to_string(label);
    std::string ex = entry("label", ld(3, ld(1, varint(static_cast<uint64_t>(label)))));
    for (int d = 1; d <= 13; ++d) {
      auto n = r.next() % 1000;
      auto v = std::to_string(n);
      tl.append("\t").append(v);
      jl.append(", \"I").append(std::to_string(d)).append("\": ").append(v);
      float f = static_cast<float>(n);
      ex += entry("I" + std::to_string(d),
                  ld(2, ld(1, std::string(reinterpret_cast<const char*>(&f), 4))));
    }
    for (int c = 1; c <= 26; ++c) {
      std::snprintf(hex, sizeof hex, "%08llx",
                    static_cast<unsigned long long>(r.next() % (1000 * c) * 2654435761ULL));
      tl.append("\t").append(hex);
      jl.append(", \"C").append(std::to_string(c)).append("\": \"").append(hex).append("\"");
      ex += entry("C" + std::to_string(c), ld(1, ld(1, hex)));
    }
    tf << framed(ld(1, ex));
    t << tl << '\n';
    j << jl << "}\n";
    std::string ml = jl + ", \"tags\": [";
    for (int k = 0; k < 10; ++k)
      ml.append(k ? ", " : "").append(std::to_string(r.next() % 100000));
    ml.append("], \"history\": [");
    for (int k = 0; k < 20; ++k)
      ml.append(k ? ", " : "").append(std::to_string(r.next() % 100000));
    m << ml << "]}\n";
  }
}

text_format_options jsonl_schema(bool multi, text_format format = text_format::jsonl) {
  text_format_options o;
  o.format = format;
  for (int d = 1; d <= 13; ++d) {
    feature_spec f;
    f.name = "I" + std::to_string(d);
    f.kind = feature_kind::dense;
    o.features.push_back(f);
  }
  for (int c = 1; c <= 26; ++c) {
    feature_spec f;
    f.name = "C" + std::to_string(c);
    o.features.push_back(f);
  }
  if (multi) {
    feature_spec tags;
    tags.name = "tags";
    tags.kind = feature_kind::bag;
    feature_spec history;
    history.name = "history";
    history.kind = feature_kind::sequence;
    history.table = "tags";
    history.max_length = 50;
    o.features.push_back(tags);
    o.features.push_back(history);
  }
  return o;
}

struct timing {
  double first_pass = 0, cached_epoch = 0;            // samples per CPU second
  double first_pass_wall = 0, cached_epoch_wall = 0;  // samples per wall second
};

timing measure(const text_format_options& format, const std::string& file,
               const std::string& cache_root, int64_t samples) {
  fs::remove_all(cache_root);
  dataset_convert_options o;
  o.format = format;
  o.files = {file};
  o.cache_root = cache_root;
  auto t = std::chrono::steady_clock::now();
  auto cpu = thread_cpu();
  auto cache = dataset_cache_build(o);
  double convert_s = seconds_since(t), convert_cpu = thread_cpu() - cpu;
  if (!cache || cache->stats.samples != static_cast<uint64_t>(samples)) {
    std::fprintf(stderr, "%s: %s\n", file.c_str(), cache ? "samples lost" : cache.error().c_str());
    std::exit(1);
  }
  auto src = file_source::open(cache->dir, "", {.test_fraction = 1e-9});
  if (!src) {
    std::fprintf(stderr, "%s\n", src.error().c_str());
    std::exit(1);
  }
  const int batch_size = 512;
  const auto n = (*src)->samples(data_split::train);
  int64_t ids = 0;
  double read_cpu = 0;
  auto epoch = [&] {  // the second epoch: the pages are mapped by then
    auto start = std::chrono::steady_clock::now();
    auto cpu_start = thread_cpu();
    for (int64_t k = n / batch_size; k < 2 * n / batch_size; ++k)
      ids += static_cast<int64_t>((*src)->make_batch(data_split::train, k, batch_size).ids.size());
    read_cpu = thread_cpu() - cpu_start;
    return seconds_since(start);
  };
  epoch();
  double read_s = epoch();
  if (ids == 0)
    std::exit(1);
  const auto read = static_cast<double>(n / batch_size * batch_size);
  return {static_cast<double>(samples) / convert_cpu, read / read_cpu,
          static_cast<double>(samples) / convert_s, read / read_s};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t samples = argc > 1 ? std::atoll(argv[1]) : 200000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (samples < 1024 || rounds < 1) {
    std::fprintf(stderr, "usage: %s [SAMPLES >= 1024] [ROUNDS >= 1]\n", argv[0]);
    return 2;
  }
  auto dir = fs::temp_directory_path() / ("satrap-jsonl-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto tsv = (dir / "data.tsv").string(), json = (dir / "data.jsonl").string(),
       multi = (dir / "multi.jsonl").string(), records = (dir / "data.tfrecord").string();
  write_files(samples, tsv, json, multi, records);
  text_format_options criteo;
  criteo.format = text_format::criteo;
  std::printf("bytes criteo=%lld jsonl=%lld jsonl_multi_hot=%lld tfrecord=%lld\n",
              static_cast<long long>(fs::file_size(tsv)),
              static_cast<long long>(fs::file_size(json)),
              static_cast<long long>(fs::file_size(multi)),
              static_cast<long long>(fs::file_size(records)));
  std::vector<double> cf, ce, jf, je, mf, me, tff, tfe;
  for (int round = 0; round < rounds; ++round) {
    timing c, j, m;
    if (round % 2 == 0) {
      c = measure(criteo, tsv, (dir / "cache").string(), samples);
      j = measure(jsonl_schema(false), json, (dir / "cache").string(), samples);
    } else {
      j = measure(jsonl_schema(false), json, (dir / "cache").string(), samples);
      c = measure(criteo, tsv, (dir / "cache").string(), samples);
    }
    m = measure(jsonl_schema(true), multi, (dir / "cache").string(), samples);
    auto t = measure(jsonl_schema(false, text_format::tfrecord), records,
                     (dir / "cache").string(), samples);
    std::printf("round=%d tfrecord_first_pass=%.0f tfrecord_cached_epoch=%.0f (samples per CPU "
                "s); wall: %.0f %.0f\n",
                round, t.first_pass, t.cached_epoch, t.first_pass_wall, t.cached_epoch_wall);
    tff.push_back(t.first_pass), tfe.push_back(t.cached_epoch);
    std::printf(
      "round=%d criteo_first_pass=%.0f jsonl_first_pass=%.0f jsonl_multi_first_pass=%.0f "
      "criteo_cached_epoch=%.0f jsonl_cached_epoch=%.0f jsonl_multi_cached_epoch=%.0f "
      "(samples per CPU s); wall: %.0f %.0f %.0f %.0f %.0f %.0f\n",
      round, c.first_pass, j.first_pass, m.first_pass, c.cached_epoch, j.cached_epoch,
      m.cached_epoch, c.first_pass_wall, j.first_pass_wall, m.first_pass_wall, c.cached_epoch_wall,
      j.cached_epoch_wall, m.cached_epoch_wall);
    cf.push_back(c.first_pass), ce.push_back(c.cached_epoch);
    jf.push_back(j.first_pass), je.push_back(j.cached_epoch);
    mf.push_back(m.first_pass), me.push_back(m.cached_epoch);
  }
  fs::remove_all(dir);
  std::printf(
    "samples=%lld rounds=%d criteo_first_pass=%.0f jsonl_first_pass=%.0f "
    "first_pass_ratio=%.2f criteo_cached_epoch=%.0f jsonl_cached_epoch=%.0f "
    "cached_epoch_ratio=%.2f jsonl_multi_first_pass=%.0f jsonl_multi_cached_epoch=%.0f "
    "tfrecord_first_pass=%.0f tfrecord_first_pass_ratio=%.2f tfrecord_cached_epoch=%.0f "
    "tfrecord_cached_epoch_ratio=%.2f\n",
    static_cast<long long>(samples), rounds, median(cf), median(jf), median(jf) / median(cf),
    median(ce), median(je), median(je) / median(ce), median(mf), median(me), median(tff),
    median(tff) / median(cf), median(tfe), median(tfe) / median(ce));
  return 0;
}
