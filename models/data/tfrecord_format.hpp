// TFRecord files of tf.train.Example (`data.source: tfrecord`), plain or gzip: what TensorFlow,
// Monolith and DeepRec users already have. Features and labels are found by name in each
// Example's feature map, with the job's feature schema (data.features, feature_schema.hpp):
//   id        an int64_list or bytes_list of one value (a bytes id hashes as the JSON lines string
//             id of the same text, an int64 id as the JSON lines integer id); an empty list: no
//             value (the slot's missing id)
//   bag       an int64_list or bytes_list of any length (at most max_length ids)
//   sequence  the same, oldest first; the most recent max_length are kept
//   weights   a feature with weights: true takes its weights from the float_list "<name>_weights",
//             one per id
//   dense     a float_list or int64_list of one value
//   label     each of data.labels: an int64_list or float_list of one value, 0 or 1
// Framing: each record is uint64 length, uint32 masked CRC-32C of the length, the bytes, uint32
// masked CRC-32C of the bytes (little-endian); both CRCs are checked. Errors name the record
// (1-based) and a short fixed reason: bad_crc, truncated, record_too_long (the framing), and
// bad_example, missing_feature, missing_label, wrong_type, bad_label, bad_weights, too_long
// (the Example), with the feature's name. The Example is decoded from protobuf's wire format
// directly (no per-record allocation once the scratch has grown); unknown fields are skipped.
// Threading: a reader or parser has one owner.
#pragma once

#include "models/data/feature_schema.hpp"
#include "models/data/text_format.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace satrap {

// CRC-32C (Castagnoli) and TFRecord's mask of it.
uint32_t crc32c(std::string_view bytes, uint32_t crc = 0);
uint32_t tfrecord_masked_crc(std::string_view bytes);

inline constexpr uint64_t tfrecord_bytes_max = 64ull << 20;  // one record, at most

class tfrecord_reader {
 public:
  explicit tfrecord_reader(const std::string& path);
  ~tfrecord_reader();
  tfrecord_reader(const tfrecord_reader&) = delete;
  tfrecord_reader& operator=(const tfrecord_reader&) = delete;

  bool is_open() const { return file_ != nullptr; }
  // The next record into `record` (valid until the next call); false at the end of the file, or
  // on a damaged one: then error() names the reason ("bad_crc: ...", "truncated: ...").
  bool next(std::string_view& record);
  int64_t record_number() const { return number_; }  // 1-based, of the last record returned
  const std::string& error() const { return error_; }
  uint64_t bytes() const { return bytes_; }  // uncompressed bytes read so far

 private:
  bool read_exact(char* out, size_t n, bool& at_end);

  void* file_ = nullptr;  // gzFile
  std::string buffer_;
  int64_t number_ = 0;
  std::string error_;
  uint64_t bytes_ = 0;
};

class tfrecord_example_parser {
 public:
  // `options` must pass text_format_check with format tfrecord.
  explicit tfrecord_example_parser(const text_format_options& options);
  // Decodes one serialized Example; on success fills `out` like jsonl_parser::parse. The error's
  // column is the byte offset in the record (1-based).
  std::optional<parse_error> parse(std::string_view record, text_sample& out);

 private:
  enum class list_kind { none, bytes, floats, int64s };
  struct list_view {  // one Feature's value list, undecoded
    list_kind kind = list_kind::none;
    std::string_view body;  // the list message (BytesList, FloatList or Int64List)
    size_t at = 0;          // its offset in the record
    bool present = false;   // the key was in the Example (with a list, or none: no value)
  };
  struct list_value {       // one value of a list, as its kind reads it
    double number = 0;      // int64s and floats
    uint64_t id = 0;        // int64s: the bits
    std::string_view text;  // bytes
  };
  template <class Fn>
  std::optional<parse_error> each_value(const list_view& v, const parse_error& mismatch, Fn&& fn);
  std::optional<parse_error> sparse(int feature, const list_view& v, const list_view* weights);
  std::optional<parse_error> one_number(const std::string& name, const list_view& v,
                                        const char* what, double& out);

  feature_schema schema_;
  feature_layout layout_;
  std::vector<std::string> labels_;
  // Names looked up per map entry: features, then labels, then "<name>_weights" entries.
  std::vector<std::pair<std::string, int>>
    names_;                               // sorted; label k: -1-k; weights of f: -1000000-f
  std::vector<list_view> found_;          // per feature
  std::vector<list_view> weights_found_;  // per feature
  std::vector<list_view> labels_found_;   // per label
  std::vector<std::vector<uint64_t>> ids_;
  std::vector<std::vector<float>> weights_;
};

}  // namespace satrap
