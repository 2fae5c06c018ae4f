#include "models/data/tfrecord_format.hpp"

#include "models/assert.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>

namespace satrap {

namespace {

using sv = std::string_view;

std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t load_u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;  // little-endian hosts only (x86-64, aarch64)
}

uint64_t load_u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string for_feature(const std::string& what, const std::string& name) {
  return what + " for feature '" + name + "'";
}

// Protobuf's wire format over one message.
struct wire {
  sv data;
  size_t pos = 0;
  size_t base = 0;  // data's offset in the record (for error columns)

  bool done() const { return pos >= data.size(); }
  size_t at() const { return base + pos; }

  bool varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= data.size())
        return false;
      auto b = static_cast<uint8_t>(data[pos++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80))
        return true;
    }
    return false;
  }
  // A field's tag; false when malformed.
  bool tag(uint32_t& field, uint32_t& type) {
    uint64_t t = 0;
    if (!varint(t) || (t >> 3) == 0 || (t >> 3) > 0x1fffffff)
      return false;
    field = static_cast<uint32_t>(t >> 3);
    type = static_cast<uint32_t>(t & 7);
    return true;
  }
  bool bytes(sv& out, size_t& out_at) {
    uint64_t n = 0;
    if (!varint(n) || n > data.size() - pos)
      return false;
    out_at = at();
    out = data.substr(pos, static_cast<size_t>(n));
    pos += static_cast<size_t>(n);
    return true;
  }
  // Skips a field of wire type `type` (groups, 3 and 4, are refused).
  bool skip(uint32_t type) {
    uint64_t v = 0;
    sv s;
    size_t a = 0;
    switch (type) {
      case 0: return varint(v);
      case 1:
        if (data.size() - pos < 8)
          return false;
        pos += 8;
        return true;
      case 2: return bytes(s, a);
      case 5:
        if (data.size() - pos < 4)
          return false;
        pos += 4;
        return true;
      default: return false;
    }
  }
};

}  // namespace

uint32_t crc32c(sv bytes, uint32_t crc) {
  static const auto table = crc32c_table();
  crc = ~crc;
  for (unsigned char c : bytes)
    crc = table[(crc ^ c) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint32_t tfrecord_masked_crc(sv bytes) {
  uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

tfrecord_reader::tfrecord_reader(const std::string& path) {
  file_ = gzopen(path.c_str(), "rb");
  if (!file_) {
    error_ = std::strerror(errno);
    return;
  }
  gzbuffer(static_cast<gzFile>(file_), 1 << 17);
}

tfrecord_reader::~tfrecord_reader() {
  if (file_)
    gzclose(static_cast<gzFile>(file_));
}

bool tfrecord_reader::read_exact(char* out, size_t n, bool& at_end) {
  at_end = false;
  size_t got = 0;
  while (got < n) {
    int r = gzread(static_cast<gzFile>(file_), out + got,
                   static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30)));
    if (r < 0) {
      int code = 0;
      error_ = std::string("read_error: ") + gzerror(static_cast<gzFile>(file_), &code);
      return false;
    }
    if (r == 0) {
      at_end = got == 0;
      if (!at_end)
        error_ = "truncated: the file ends inside record " + std::to_string(number_ + 1);
      return false;
    }
    got += static_cast<size_t>(r);
  }
  bytes_ += n;
  return true;
}

bool tfrecord_reader::next(sv& record) {
  if (!file_ || !error_.empty())
    return false;
  char head[12];
  bool end = false;
  if (!read_exact(head, sizeof head, end))
    return false;  // a clean end of file when `end`
  const uint64_t length = load_u64(head);
  if (tfrecord_masked_crc(sv(head, 8)) != load_u32(head + 8)) {
    error_ = "bad_crc: record " + std::to_string(number_ + 1) + "'s length fails its CRC";
    return false;
  }
  if (length > tfrecord_bytes_max) {
    error_ = "record_too_long: record " + std::to_string(number_ + 1) + " has "
             + std::to_string(length) + " bytes, at most " + std::to_string(tfrecord_bytes_max);
    return false;
  }
  buffer_.resize(static_cast<size_t>(length) + 4);
  if (!read_exact(buffer_.data(), buffer_.size(), end)) {
    if (end)
      error_ = "truncated: the file ends inside record " + std::to_string(number_ + 1);
    return false;
  }
  record = sv(buffer_.data(), static_cast<size_t>(length));
  if (tfrecord_masked_crc(record) != load_u32(buffer_.data() + length)) {
    error_ = "bad_crc: record " + std::to_string(number_ + 1) + "'s data fails its CRC";
    return false;
  }
  ++number_;
  return true;
}

tfrecord_example_parser::tfrecord_example_parser(const text_format_options& options)
    : schema_(options.features), labels_(options.labels) {
  auto layout = feature_schema_layout(schema_, pooling::sum);
  SATRAP_ASSERT(layout.ok(), "tfrecord_example_parser: unchecked schema: {}", layout.error());
  layout_ = std::move(layout.value());
  for (size_t i = 0; i < schema_.size(); ++i) {
    names_.emplace_back(schema_[i].name, static_cast<int>(i));
    if (schema_[i].weights)
      names_.emplace_back(schema_[i].name + "_weights", -1000000 - static_cast<int>(i));
  }
  for (size_t k = 0; k < labels_.size(); ++k)
    names_.emplace_back(labels_[k], -1 - static_cast<int>(k));
  std::sort(names_.begin(), names_.end());
  found_.resize(schema_.size());
  weights_found_.resize(schema_.size());
  labels_found_.resize(labels_.size());
  ids_.resize(schema_.size());
  weights_.resize(schema_.size());
}

// Each value of a list's field 1, packed or not, decoded by the list's kind (int64s, floats or
// bytes) and handed to fn(value, byte offset); fn returns an error to stop. A malformed list is
// bad_example; a value of a wire type the kind does not take is `mismatch` (with what it expected).
template <class Fn>
std::optional<parse_error> tfrecord_example_parser::each_value(const list_view& v,
                                                               const parse_error& mismatch,
                                                               Fn&& fn) {
  auto bad = [](const wire& w, const char* what) {
    return parse_error{static_cast<int>(w.at()) + 1, "bad_example", what};
  };
  auto fixed32 = [](wire& w, float& f) {
    if (w.data.size() - w.pos < 4)
      return false;
    std::memcpy(&f, w.data.data() + w.pos, 4);
    w.pos += 4;
    return true;
  };
  wire w{v.body, 0, v.at};
  while (!w.done()) {
    uint32_t field = 0, type = 0;
    if (!w.tag(field, type))
      return bad(w, "a protobuf field tag");
    if (field != 1) {
      if (!w.skip(type))
        return bad(w, "a protobuf field");
      continue;
    }
    const size_t at = w.at();
    list_value x;
    if (v.kind == list_kind::bytes && type == 2) {
      size_t unused = 0;
      if (!w.bytes(x.text, unused))
        return bad(w, "a bytes value");
    } else if (v.kind == list_kind::int64s && type == 0) {
      uint64_t u = 0;
      if (!w.varint(u))
        return bad(w, "a varint");
      x.number = static_cast<double>(static_cast<int64_t>(u));
      x.id = u;
    } else if (v.kind == list_kind::floats && type == 5) {
      float f = 0;
      if (!fixed32(w, f))
        return bad(w, "a float");
      x.number = f;
    } else if (type == 2 && v.kind != list_kind::bytes) {  // packed
      sv packed;
      size_t packed_at = 0;
      if (!w.bytes(packed, packed_at))
        return bad(w, "a packed list");
      wire p{packed, 0, packed_at};
      while (!p.done()) {
        list_value y;
        const size_t value_at = p.at();
        if (v.kind == list_kind::int64s) {
          uint64_t u = 0;
          if (!p.varint(u))
            return bad(p, "a varint");
          y.number = static_cast<double>(static_cast<int64_t>(u));
          y.id = u;
        } else {
          float f = 0;
          if (!fixed32(p, f))
            return bad(p, "a float");
          y.number = f;
        }
        if (auto e = fn(y, value_at))
          return e;
      }
      continue;
    } else {
      auto e = mismatch;
      if (e.column == 0)
        e.column = static_cast<int>(w.at()) + 1;
      return e;
    }
    if (auto e = fn(x, at))
      return e;
  }
  return std::nullopt;
}

std::optional<parse_error> tfrecord_example_parser::one_number(const std::string& name,
                                                               const list_view& v, const char* what,
                                                               double& out) {
  const parse_error wrong{
    static_cast<int>(v.at) + 1, "wrong_type",
    std::string(what) + " (an int64_list or float_list of one value) for '" + name + "'"};
  if (v.kind != list_kind::floats && v.kind != list_kind::int64s)
    return wrong;
  int n = 0;
  if (auto e = each_value(v, wrong, [&](const list_value& x, size_t) {
        out = x.number;
        ++n;
        return std::optional<parse_error>{};
      }))
    return e;
  if (n != 1)
    return wrong;
  return std::nullopt;
}

// A bag's or sequence's ids (and weights) into ids_[feature] / weights_[feature]; an id feature
// takes one value or none.
std::optional<parse_error> tfrecord_example_parser::sparse(int feature, const list_view& v,
                                                           const list_view* weights) {
  auto& f = schema_[static_cast<size_t>(feature)];
  auto& out = ids_[static_cast<size_t>(feature)];
  const int table = layout_.table_of[static_cast<size_t>(feature)];
  const auto limit =
    static_cast<size_t>(f.kind == feature_kind::id                        ? 1
                        : f.kind == feature_kind::bag && f.max_length > 0 ? f.max_length
                                                                          : feature_ids_max);
  const int column = static_cast<int>(v.at) + 1;
  if (v.kind != list_kind::bytes && v.kind != list_kind::int64s)
    return parse_error{column, "wrong_type",
                       for_feature("an int64_list or bytes_list of ids", f.name)};
  auto id = [&](const list_value& x, size_t) -> std::optional<parse_error> {
    if (out.size() == limit)
      return parse_error{
        column, "too_long",
        for_feature(f.kind == feature_kind::id ? std::string("one id")
                                               : "at most " + std::to_string(limit) + " ids",
                    f.name)};
    out.push_back(v.kind == list_kind::bytes ? feature_string_id_hash(table, x.text)
                                             : feature_id_hash(table, x.id));
    return std::nullopt;
  };
  const parse_error not_id{0, "bad_example",
                           v.kind == list_kind::bytes ? "a bytes value" : "an int64 value"};
  if (auto e = each_value(v, not_id, id))
    return e;
  if (!f.weights)
    return std::nullopt;
  auto& ws = weights_[static_cast<size_t>(feature)];
  if (weights == nullptr || weights->kind == list_kind::none)
    return parse_error{column, "bad_weights",
                       for_feature("a float_list '" + f.name + "_weights' beside the ids", f.name)};
  if (weights->kind != list_kind::floats)
    return parse_error{static_cast<int>(weights->at) + 1, "bad_weights",
                       for_feature("'" + f.name + "_weights' as a float_list", f.name)};
  auto weight = [&](const list_value& x, size_t at) -> std::optional<parse_error> {
    if (!std::isfinite(x.number))
      return parse_error{static_cast<int>(at) + 1, "bad_weights",
                         for_feature("finite weights", f.name)};
    if (ws.size() == static_cast<size_t>(feature_ids_max))
      return parse_error{
        static_cast<int>(at) + 1, "too_long",
        for_feature("at most " + std::to_string(feature_ids_max) + " weights", f.name)};
    ws.push_back(static_cast<float>(x.number));
    return std::nullopt;
  };
  if (auto e = each_value(*weights, parse_error{0, "bad_example", "a float value"}, weight))
    return e;
  if (ws.size() != out.size())
    return parse_error{static_cast<int>(weights->at) + 1, "bad_weights",
                       for_feature("one weight per id (" + std::to_string(out.size()) + " ids, "
                                     + std::to_string(ws.size()) + " weights)",
                                   f.name)};
  return std::nullopt;
}

std::optional<parse_error> tfrecord_example_parser::parse(sv record, text_sample& out) {
  out.features.clear();
  out.weights.clear();
  out.label = 0.0f;
  out.more_labels.assign(labels_.size() - 1, 0.0f);
  out.dense.assign(static_cast<size_t>(std::max(layout_.dense, 1)), 1.0f);
  for (auto* v : {&found_, &weights_found_, &labels_found_})
    std::fill(v->begin(), v->end(), list_view{});
  for (size_t i = 0; i < ids_.size(); ++i) {
    ids_[i].clear();
    weights_[i].clear();
  }
  auto bad = [](const wire& w, const char* what) {
    return parse_error{static_cast<int>(w.at()) + 1, "bad_example", what};
  };
  // Example { Features features = 1; } Features { map<string, Feature> feature = 1; }
  // Feature { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
  wire ex{record, 0, 0};
  while (!ex.done()) {
    uint32_t field = 0, type = 0;
    if (!ex.tag(field, type))
      return bad(ex, "a protobuf tf.train.Example (a field tag)");
    if (field != 1 || type != 2) {
      if (!ex.skip(type))
        return bad(ex, "a protobuf tf.train.Example (a field)");
      continue;
    }
    sv features;
    size_t features_at = 0;
    if (!ex.bytes(features, features_at))
      return bad(ex, "the Example's features message");
    wire fs{features, 0, features_at};
    while (!fs.done()) {
      if (!fs.tag(field, type))
        return bad(fs, "a Features field tag");
      if (field != 1 || type != 2) {
        if (!fs.skip(type))
          return bad(fs, "a Features field");
        continue;
      }
      sv entry;
      size_t entry_at = 0;
      if (!fs.bytes(entry, entry_at))
        return bad(fs, "a feature map entry");
      wire en{entry, 0, entry_at};
      sv key, value;
      size_t key_at = 0, value_at = 0;
      bool has_value = false;
      while (!en.done()) {
        if (!en.tag(field, type))
          return bad(en, "a map entry's field tag");
        if (field == 1 && type == 2) {
          if (!en.bytes(key, key_at))
            return bad(en, "a feature name");
        } else if (field == 2 && type == 2) {
          if (!en.bytes(value, value_at))
            return bad(en, "a Feature");
          has_value = true;
        } else if (!en.skip(type)) {
          return bad(en, "a map entry's field");
        }
      }
      auto it = std::lower_bound(names_.begin(), names_.end(), key,
                                 [](const auto& a, sv k) { return sv(a.first) < k; });
      if (it == names_.end() || it->first != key)
        continue;  // not a feature of the job
      list_view list{list_kind::none, sv(), value_at, true};
      if (has_value) {
        wire fe{value, 0, value_at};
        while (!fe.done()) {
          if (!fe.tag(field, type))
            return bad(fe, "a Feature's field tag");
          if (field >= 1 && field <= 3 && type == 2) {
            size_t at = 0;
            if (!fe.bytes(list.body, at))
              return bad(fe, "a Feature's value list");
            list.at = at;
            list.kind = field == 1   ? list_kind::bytes
                        : field == 2 ? list_kind::floats
                                     : list_kind::int64s;
          } else if (!fe.skip(type)) {
            return bad(fe, "a Feature's field");
          }
        }
      }
      if (it->second >= 0)
        found_[static_cast<size_t>(it->second)] = list;
      else if (it->second <= -1000000)
        weights_found_[static_cast<size_t>(-1000000 - it->second)] = list;
      else
        labels_found_[static_cast<size_t>(-1 - it->second)] = list;
      // (a key given twice: the last wins, as protobuf's map does)
    }
  }
  const int end = static_cast<int>(record.size()) + 1;
  for (size_t k = 0; k < labels_.size(); ++k) {
    auto& v = labels_found_[k];
    if (v.kind == list_kind::none)
      return parse_error{end, "missing_label", "the label '" + labels_[k] + "'"};
    double y = -1;
    if (auto e = one_number(labels_[k], v, "a label", y))
      return e;
    if (!(y == 0.0 || y == 1.0))
      return parse_error{static_cast<int>(v.at) + 1, "bad_label",
                         "the label '" + labels_[k] + "': 0 or 1"};
    (k == 0 ? out.label : out.more_labels[k - 1]) = static_cast<float>(y);
  }
  for (size_t i = 0; i < schema_.size(); ++i) {
    auto& f = schema_[i];
    auto& v = found_[i];
    if (!v.present)
      return parse_error{end, "missing_feature", "the feature '" + f.name + "'"};
    if (f.kind == feature_kind::dense) {
      double x = 0;
      if (auto e = one_number(f.name, v, "a dense value", x))
        return e;
      if (!std::isfinite(x) || std::fabs(x) > 3.0e38)
        return parse_error{static_cast<int>(v.at) + 1, "wrong_type",
                           for_feature("a finite number", f.name)};
      out.dense[static_cast<size_t>(layout_.dense_of[i])] = static_cast<float>(x);
      continue;
    }
    if (v.kind != list_kind::none)  // (a Feature with no list: no value, the missing id)
      if (auto e = sparse(static_cast<int>(i), v, &weights_found_[i]))
        return e;
    const int slot = layout_.slot_of[i];
    auto& ids = ids_[i];
    size_t first = 0;
    if (f.kind == feature_kind::sequence && ids.size() > static_cast<size_t>(f.max_length))
      first = ids.size() - static_cast<size_t>(f.max_length);  // the most recent kept
    for (size_t k = first; k < ids.size(); ++k) {
      out.features.emplace_back(slot, ids[k]);
      if (layout_.weighted)
        out.weights.push_back(f.weights ? weights_[i][k] : 1.0f);
    }
  }
  return std::nullopt;
}

}  // namespace satrap
