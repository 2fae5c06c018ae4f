#include "models/serving/infer_request.hpp"

#include <nlohmann/json.hpp>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

namespace satrap {

static_assert(std::endian::native == std::endian::little,
              "the binary tensor extension's data is little-endian: read it in place");

namespace {

using json = nlohmann::json;

constexpr size_t max_depth = 10;        // of the JSON document
constexpr size_t max_data_nesting = 4;  // arrays in arrays under "data"
constexpr size_t max_rank = 4;

enum class dtype : uint8_t { unknown, fp32, int64, uint64, int32 };

size_t dtype_bytes(dtype t) { return t == dtype::fp32 || t == dtype::int32 ? 4 : 8; }

// A JSON value as the SAX parser hands it over.
struct scalar {
  enum kind_t : uint8_t { null_v, bool_v, int_v, uint_v, float_v, string_v } kind = null_v;
  bool b = false;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  const std::string* s = nullptr;
  const char* type_name() const {
    switch (kind) {
      case null_v: return "null";
      case bool_v: return "a boolean";
      case string_v: return "a string";
      case float_v: return "a number with a fraction";
      default: return "an integer";
    }
  }
};

// A number held until its tensor's datatype is known (compact: a body holds millions).
struct held_value {
  scalar::kind_t kind;
  uint64_t bits;
};
constexpr size_t max_held = size_t{1} << 20;

struct tensor {
  std::string name, datatype;
  bool has_name = false, has_datatype = false, has_shape = false, has_data = false;
  size_t index = 0;
  std::vector<int64_t> shape;
  uint64_t elements = 0;     // the shape's product, once has_shape
  int64_t binary_size = -1;  // parameters.binary_data_size
  dtype type = dtype::unknown;
  std::vector<float> f;          // FP32 values
  std::vector<uint64_t> u;       // integer values (bit patterns; INT32 sign-extended)
  std::vector<held_value> held;  // values seen before the datatype was known
  uint64_t count = 0;            // values in data

  std::string what() const {
    return has_name ? "input '" + name + "'" : "inputs[" + std::to_string(index) + "]";
  }
};

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

enum class ctx : uint8_t {
  root,
  req_params,
  inputs,
  input,
  input_params,
  shape,
  data,
  outputs,
  output,
  output_params,
};

// The SAX handler: a stack of where the parser is; values are checked and stored as they come.
class infer_sax {
 public:
  infer_sax(const infer_model_io& io, infer_request_parse& out) : io_(io), out_(out) {}

  std::vector<tensor> inputs;
  struct out_req {
    std::string name;
    bool has_name = false;
    int binary = -1;  // parameters.binary_data: -1 not given
  };
  std::vector<out_req> outputs;
  bool has_outputs = false, binary_output = false;
  std::string error;
  int status = 400;

  bool null() { return value(scalar{}); }
  bool boolean(bool v) {
    scalar s;
    s.kind = scalar::bool_v;
    s.b = v;
    return value(s);
  }
  bool number_integer(json::number_integer_t v) {
    scalar s;
    s.kind = scalar::int_v;
    s.i = v;
    return value(s);
  }
  bool number_unsigned(json::number_unsigned_t v) {
    scalar s;
    s.kind = scalar::uint_v;
    s.u = v;
    return value(s);
  }
  bool number_float(json::number_float_t v, const std::string&) {
    scalar s;
    s.kind = scalar::float_v;
    s.f = v;
    return value(s);
  }
  bool string(std::string& v) {
    scalar s;
    s.kind = scalar::string_v;
    s.s = &v;
    return value(s);
  }
  bool binary(json::binary_t&) { return fail("binary JSON values are not taken"); }

  bool key(std::string& k) {
    key_ = k;
    switch (st_.back()) {
      case ctx::root:
        if (k != "id" && k != "parameters" && k != "inputs" && k != "outputs")
          return fail("unknown key \"" + k.substr(0, 40)
                      + "\": a request has \"id\", \"parameters\", \"inputs\" and \"outputs\"");
        if (!seen_root_.insert(k))
          return fail("\"" + k + "\" given twice");
        return true;
      case ctx::input:
        if (k != "name" && k != "shape" && k != "datatype" && k != "parameters" && k != "data")
          return fail(cur().what() + ": unknown key \"" + k.substr(0, 40)
                      + "\" (an input has \"name\", \"shape\", \"datatype\", \"parameters\", "
                        "\"data\")");
        if (!seen_input_.insert(k))
          return fail(cur().what() + ": \"" + k + "\" given twice");
        return true;
      case ctx::output:
        if (k != "name" && k != "parameters")
          return fail("outputs[" + std::to_string(outputs.size() - 1) + "]: unknown key \""
                      + k.substr(0, 40) + "\" (an output has \"name\" and \"parameters\")");
        return true;
      default: return true;  // parameters: checked by value
    }
  }

  bool start_object(std::size_t) {
    if (st_.empty())
      return push(ctx::root);
    switch (st_.back()) {
      case ctx::root:
        if (key_ == "parameters")
          return push(ctx::req_params);
        return fail("\"" + key_ + "\": expected " + root_expect());
      case ctx::inputs:
        inputs.emplace_back();
        inputs.back().index = inputs.size() - 1;
        seen_input_ = {};
        return push(ctx::input);
      case ctx::input:
        if (key_ == "parameters")
          return push(ctx::input_params);
        return fail(cur().what() + ": \"" + key_ + "\": expected " + input_expect());
      case ctx::outputs: outputs.emplace_back(); return push(ctx::output);
      case ctx::output:
        if (key_ == "parameters")
          return push(ctx::output_params);
        return fail("outputs[" + std::to_string(outputs.size() - 1) + "].name: expected a string");
      case ctx::shape:
        return fail(cur().what() + ".shape: expected non-negative integers, got an object");
      case ctx::data: return fail(cur().what() + ".data: expected numbers, got an object");
      default: return fail("parameters: a parameter's value is a boolean, a number or a string");
    }
  }

  bool start_array(std::size_t) {
    if (st_.empty())
      return fail("expected a JSON object with \"inputs\"");
    switch (st_.back()) {
      case ctx::root:
        if (key_ == "inputs")
          return push(ctx::inputs);
        if (key_ == "outputs") {
          has_outputs = true;
          return push(ctx::outputs);
        }
        return fail("\"" + key_ + "\": expected " + root_expect());
      case ctx::input:
        if (key_ == "shape")
          return push(ctx::shape);
        if (key_ == "data") {
          cur().has_data = true;
          data_nesting_ = 1;
          return push(ctx::data);
        }
        return fail(cur().what() + ": \"" + key_ + "\": expected " + input_expect());
      case ctx::data:
        if (++data_nesting_ > max_data_nesting)
          return fail(cur().what() + ".data: nested deeper than " + std::to_string(max_data_nesting)
                      + " arrays");
        return push(ctx::data);
      case ctx::shape:
        return fail(cur().what() + ".shape: expected non-negative integers, got an array");
      case ctx::inputs:
        return fail("inputs[" + std::to_string(inputs.size()) + "]: expected an object");
      case ctx::outputs:
        return fail("outputs[" + std::to_string(outputs.size()) + "]: expected an object");
      case ctx::output:
        return fail("outputs[" + std::to_string(outputs.size() - 1) + "]: \"" + key_
                    + "\": expected a string or an object");
      default: return fail("parameters: a parameter's value is a boolean, a number or a string");
    }
  }

  bool end_array() {
    auto top = st_.back();
    st_.pop_back();
    if (top == ctx::data)
      --data_nesting_;
    if (top == ctx::shape) {
      auto& t = cur();
      t.has_shape = true;
      uint64_t p = 1;
      for (auto d : t.shape) {
        if (d != 0 && p > (uint64_t{1} << 40) / static_cast<uint64_t>(d))
          return fail(t.what() + ": shape " + shape_text(t.shape) + " is too large", 413);
        p *= static_cast<uint64_t>(d);
      }
      t.elements = p;
      if (t.count > p)
        return too_many(t);
    }
    return true;
  }

  bool end_object() {
    st_.pop_back();
    root_done_ = st_.empty();
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception&) {
    if (error.empty() && root_done_)
      error = "bytes after the JSON object at byte " + std::to_string(position)
              + " (binary tensor data? give its JSON part's length as "
                "Inference-Header-Content-Length)";
    if (error.empty())
      error = "malformed JSON at byte " + std::to_string(position)
              + ": expected {\"inputs\": [{\"name\", \"shape\", \"datatype\", \"data\"}, ...]}";
    return false;
  }

  // After the parse: the values held before the datatype was known.
  bool settle() {
    for (auto& t : inputs)
      if (!t.held.empty()) {
        if (t.type == dtype::unknown)
          return fail(t.what() + ": no \"datatype\"" + (t.has_name ? expect_of(t.name) : ""));
        auto held = std::move(t.held);
        t.count = 0;
        for (auto& h : held) {
          scalar s;
          s.kind = h.kind;
          if (h.kind == scalar::float_v)
            s.f = std::bit_cast<double>(h.bits);
          else if (h.kind == scalar::int_v)
            s.i = static_cast<int64_t>(h.bits);
          else
            s.u = h.bits;
          if (!put(t, s))
            return false;
        }
      }
    return true;
  }

 private:
  struct key_set {
    std::vector<std::string> keys;
    bool insert(const std::string& k) {
      for (auto& x : keys)
        if (x == k)
          return false;
      keys.push_back(k);
      return true;
    }
  };

  tensor& cur() { return inputs.back(); }

  bool fail(std::string why, int code = 400) {
    if (error.empty()) {
      error = std::move(why);
      status = code;
    }
    return false;
  }

  bool push(ctx c) {
    if (st_.size() >= max_depth)
      return fail("JSON nested deeper than " + std::to_string(max_depth));
    st_.push_back(c);
    return true;
  }

  static std::string root_expect() {
    return "\"inputs\" and \"outputs\" arrays, \"parameters\" an object, \"id\" a string";
  }
  static std::string input_expect() {
    return "\"name\" and \"datatype\" strings, \"shape\" and \"data\" arrays, \"parameters\" an "
           "object";
  }

  std::string inputs_text() const {
    std::string s;
    if (io_.dense_features > 0)
      s = "dense (FP32 [N, " + std::to_string(io_.dense_features) + "]) and ";
    return s + "ids (INT64 [N, " + std::to_string(io_.slots) + "]), optional ids_lengths";
  }

  std::string expect_of(const std::string& name) const {
    if (name == "dense")
      return " (dense takes FP32 [N, " + std::to_string(io_.dense_features) + "])";
    if (name == "ids")
      return " (ids takes INT64 or UINT64 [N, " + std::to_string(io_.slots) + "])";
    return " (ids_lengths takes INT32 or INT64 [N, " + std::to_string(io_.slots) + "])";
  }

  // Both the name and the datatype known: is the pair one the model takes?
  bool resolve(tensor& t) {
    if (t.has_name
        && !(t.name == "ids" || t.name == "ids_lengths"
             || (t.name == "dense" && io_.dense_features > 0)))
      return fail("unknown input '" + t.name.substr(0, 40) + "': the model '" + io_.name
                  + "' takes " + inputs_text());
    if (!t.has_name || !t.has_datatype)
      return true;
    const auto& d = t.datatype;
    if (t.name == "dense" && d == "FP32")
      t.type = dtype::fp32;
    else if (t.name == "ids" && d == "INT64")
      t.type = dtype::int64;
    else if (t.name == "ids" && d == "UINT64")
      t.type = dtype::uint64;
    else if (t.name == "ids_lengths" && d == "INT32")
      t.type = dtype::int32;
    else if (t.name == "ids_lengths" && d == "INT64")
      t.type = dtype::int64;
    else
      return fail(t.what() + ": wrong datatype " + d.substr(0, 16) + expect_of(t.name));
    if (t.has_shape && t.elements < (uint64_t{1} << 30)) {
      if (t.type == dtype::fp32)
        t.f.reserve(t.elements);
      else
        t.u.reserve(t.elements);
    }
    return true;
  }

  bool too_many(const tensor& t) {
    return fail(t.what() + ": more values in data than its shape " + shape_text(t.shape)
                + " holds (" + std::to_string(t.elements) + ")");
  }

  bool put(tensor& t, const scalar& s) {
    if (t.has_shape && t.count >= t.elements)
      return too_many(t);
    auto at = [&] { return t.what() + ".data[" + std::to_string(t.count) + "]: "; };
    if (s.kind == scalar::null_v || s.kind == scalar::bool_v || s.kind == scalar::string_v)
      return fail(at() + "expected a number, got " + s.type_name());
    ++t.count;
    switch (t.type) {
      case dtype::unknown:
        if (t.held.size() >= max_held)
          return fail(t.what() + ": give \"datatype\" before \"data\" for more than "
                      + std::to_string(max_held) + " values");
        t.held.push_back({s.kind, s.kind == scalar::float_v ? std::bit_cast<uint64_t>(s.f)
                                  : s.kind == scalar::int_v ? static_cast<uint64_t>(s.i)
                                                            : s.u});
        return true;
      case dtype::fp32: {
        double v = s.kind == scalar::float_v ? s.f
                   : s.kind == scalar::int_v ? static_cast<double>(s.i)
                                             : static_cast<double>(s.u);
        auto x = static_cast<float>(v);
        if (!std::isfinite(x))
          return fail(at() + "expected a finite FP32 value");
        t.f.push_back(x);
        return true;
      }
      case dtype::int64:
        if (s.kind == scalar::float_v)
          return fail(at() + "expected an integer, got a number with a fraction or exponent");
        if (s.kind == scalar::uint_v && s.u > static_cast<uint64_t>(INT64_MAX))
          return fail(at() + "out of range for INT64 (send an id past 2^63-1 as its two's "
                             "complement, or the tensor as UINT64)");
        t.u.push_back(s.kind == scalar::uint_v ? s.u : static_cast<uint64_t>(s.i));
        return true;
      case dtype::uint64:
        if (s.kind == scalar::float_v)
          return fail(at() + "expected an integer, got a number with a fraction or exponent");
        if (s.kind == scalar::int_v && s.i < 0)
          return fail(at() + "out of range for UINT64: negative");
        t.u.push_back(s.kind == scalar::uint_v ? s.u : static_cast<uint64_t>(s.i));
        return true;
      case dtype::int32: {
        if (s.kind == scalar::float_v)
          return fail(at() + "expected an integer, got a number with a fraction or exponent");
        bool ok = s.kind == scalar::int_v ? s.i >= INT32_MIN && s.i <= INT32_MAX
                                          : s.u <= static_cast<uint64_t>(INT32_MAX);
        if (!ok)
          return fail(at() + "out of range for INT32");
        t.u.push_back(s.kind == scalar::uint_v ? s.u : static_cast<uint64_t>(s.i));
        return true;
      }
    }
    return true;
  }

  bool value(const scalar& s) {
    if (st_.empty())
      return fail("expected a JSON object with \"inputs\"");
    switch (st_.back()) {
      case ctx::root:
        if (key_ == "id") {
          if (s.kind != scalar::string_v)
            return fail("\"id\": expected a string, got " + std::string(s.type_name()));
          out_.id = s.s->substr(0, 256);
          return true;
        }
        return fail("\"" + key_ + "\": expected " + root_expect());
      case ctx::req_params:
        if (key_ == "binary_data_output") {
          if (s.kind != scalar::bool_v)
            return fail("parameters.binary_data_output: expected a boolean");
          binary_output = s.b;
        }
        return true;
      case ctx::inputs:
        return fail("inputs[" + std::to_string(inputs.size()) + "]: expected an object, got "
                    + s.type_name());
      case ctx::input: {
        auto& t = cur();
        if (key_ == "name" || key_ == "datatype") {
          if (s.kind != scalar::string_v)
            return fail(t.what() + "." + key_ + ": expected a string, got " + s.type_name());
          if (key_ == "name") {
            t.name = *s.s;
            t.has_name = true;
            for (size_t i = 0; i + 1 < inputs.size(); ++i)
              if (inputs[i].has_name && inputs[i].name == t.name)
                return fail("input '" + t.name.substr(0, 40) + "' given twice");
          } else {
            t.datatype = *s.s;
            t.has_datatype = true;
          }
          return resolve(t);
        }
        return fail(t.what() + ": \"" + key_ + "\": expected " + input_expect());
      }
      case ctx::input_params:
        if (key_ == "binary_data_size") {
          if (s.kind == scalar::uint_v)
            cur().binary_size = static_cast<int64_t>(std::min<uint64_t>(s.u, INT64_MAX));
          else if (s.kind == scalar::int_v && s.i >= 0)
            cur().binary_size = s.i;
          else
            return fail(cur().what()
                        + ".parameters.binary_data_size: expected a non-negative integer");
        }
        return true;
      case ctx::shape: {
        auto& t = cur();
        if (!(s.kind == scalar::uint_v || (s.kind == scalar::int_v && s.i >= 0)))
          return fail(t.what() + ".shape: expected non-negative integers, got "
                      + (s.kind == scalar::int_v ? std::to_string(s.i) : s.type_name()));
        if (t.shape.size() >= max_rank)
          return fail(t.what() + ".shape: more than " + std::to_string(max_rank) + " dimensions");
        uint64_t d = s.kind == scalar::uint_v ? s.u : static_cast<uint64_t>(s.i);
        t.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(d, uint64_t{1} << 40)));
        return true;
      }
      case ctx::data: return put(cur(), s);
      case ctx::outputs:
        return fail("outputs[" + std::to_string(outputs.size()) + "]: expected an object, got "
                    + s.type_name());
      case ctx::output: {
        auto& o = outputs.back();
        if (key_ == "name") {
          if (s.kind != scalar::string_v)
            return fail("outputs[" + std::to_string(outputs.size() - 1)
                        + "].name: expected a string");
          o.name = *s.s;
          o.has_name = true;
          return true;
        }
        return fail("outputs[" + std::to_string(outputs.size() - 1)
                    + "].parameters: expected an object");
      }
      case ctx::output_params:
        if (key_ == "binary_data") {
          if (s.kind != scalar::bool_v)
            return fail("outputs[" + std::to_string(outputs.size() - 1)
                        + "].parameters.binary_data: expected a boolean");
          outputs.back().binary = s.b ? 1 : 0;
        }
        return true;
    }
    return true;
  }

  const infer_model_io& io_;
  infer_request_parse& out_;
  std::vector<ctx> st_;
  std::string key_;
  key_set seen_root_, seen_input_;
  size_t data_nesting_ = 0;
  bool root_done_ = false;
};

infer_request_parse failed(int status, std::string why) {
  infer_request_parse r;
  r.status = status;
  r.error = std::move(why);
  return r;
}

}  // namespace

void append_escaped(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  out += '"';
}

size_t parse_header_length(const std::string& value, size_t body_size, size_t max_body,
                           std::string& error, int& status) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
    error =
      "Inference-Header-Content-Length: expected a byte count, got \"" + value.substr(0, 40) + "\"";
    status = 400;
    return std::string::npos;
  }
  if (n > max_body) {
    error = "Inference-Header-Content-Length " + value + " is past the server's body limit of "
            + std::to_string(max_body) + " bytes";
    status = 413;
    return std::string::npos;
  }
  if (n > body_size) {
    error = "Inference-Header-Content-Length " + value + " is past the body's "
            + std::to_string(body_size) + " bytes";
    status = 400;
    return std::string::npos;
  }
  return static_cast<size_t>(n);
}

infer_request_parse parse_infer_request(std::string_view body, size_t header_length,
                                        const infer_model_io& io) {
  infer_request_parse r;
  bool binary_ext = header_length != std::string::npos;
  std::string_view head = binary_ext ? body.substr(0, header_length) : body;
  std::string_view blobs = binary_ext ? body.substr(header_length) : std::string_view();
  infer_sax sax(io, r);
  bool ok = json::sax_parse(head.begin(), head.end(), &sax);
  if (!ok || !sax.settle())
    return failed(sax.status, sax.error.empty() ? "malformed JSON" : sax.error);
  auto& inputs = sax.inputs;
  if (inputs.empty())
    return failed(400, "\"inputs\": expected a non-empty array of the model's inputs");
  tensor *dense = nullptr, *ids = nullptr, *lengths = nullptr;
  // The inputs' data, in order: JSON values, or the next binary_data_size bytes.
  size_t at = 0;
  for (auto& t : inputs) {
    if (!t.has_name)
      return failed(400, t.what() + ": no \"name\"");
    if (!t.has_datatype)
      return failed(400, t.what() + ": no \"datatype\"");
    if (!t.has_shape)
      return failed(400, t.what() + ": no \"shape\"");
    (t.name == "dense" ? dense : t.name == "ids" ? ids : lengths) = &t;
    if (t.binary_size >= 0) {
      if (t.has_data)
        return failed(400, t.what() + ": both \"data\" and parameters.binary_data_size");
      if (!binary_ext)
        return failed(400, t.what() + ": parameters.binary_data_size without an "
                                      "Inference-Header-Content-Length header");
      auto want = t.elements * dtype_bytes(t.type);
      if (static_cast<uint64_t>(t.binary_size) != want)
        return failed(400, t.what() + ": binary_data_size " + std::to_string(t.binary_size)
                             + ", shape " + shape_text(t.shape) + " of " + t.datatype + " needs "
                             + std::to_string(want) + " bytes");
      if (blobs.size() - at < want)
        return failed(400, t.what() + ": binary_data_size " + std::to_string(want)
                             + " is past the body (" + std::to_string(blobs.size() - at)
                             + " bytes of binary data left)");
      const char* p = blobs.data() + at;
      at += want;
      if (t.type == dtype::fp32) {
        t.f.resize(t.elements);
        std::memcpy(t.f.data(), p, want);
        for (size_t i = 0; i < t.f.size(); ++i)
          if (!std::isfinite(t.f[i]))
            return failed(400, t.what() + "[" + std::to_string(i) + "]: not a finite FP32 value");
      } else if (t.type == dtype::int32) {
        t.u.resize(t.elements);
        for (size_t i = 0; i < t.elements; ++i) {
          int32_t v;
          std::memcpy(&v, p + 4 * i, 4);
          t.u[i] = static_cast<uint64_t>(static_cast<int64_t>(v));
        }
      } else {
        t.u.resize(t.elements);
        std::memcpy(t.u.data(), p, want);
      }
      t.count = t.elements;
    } else if (!t.has_data) {
      return failed(400, t.what() + ": no data (give \"data\", or parameters.binary_data_size "
                                    "with the binary extension)");
    } else if (t.count != t.elements) {
      return failed(400, t.what() + ": " + std::to_string(t.count) + " values in data, shape "
                           + shape_text(t.shape) + " needs " + std::to_string(t.elements));
    }
  }
  if (at != blobs.size())
    return failed(400, "binary data: " + std::to_string(blobs.size())
                         + " bytes after the JSON header, the inputs' binary_data_size add up to "
                         + std::to_string(at));
  const auto S = static_cast<uint64_t>(io.slots), D = static_cast<uint64_t>(io.dense_features);
  auto fixed = [](uint64_t v) { return std::to_string(v); };
  if (!ids)
    return failed(400, "missing input 'ids' (INT64 [N, " + fixed(S) + "])");
  if (D > 0 && !dense)
    return failed(400, "missing input 'dense' (FP32 [N, " + fixed(D) + "])");
  // The instances: from dense, or the ids' (or their lengths') first dimension.
  const tensor& rows_of = lengths ? *lengths : *ids;
  if (rows_of.shape.size() != 2 || static_cast<uint64_t>(rows_of.shape[1]) != S)
    return failed(400, rows_of.what() + ": shape " + shape_text(rows_of.shape)
                         + " does not match the model's [N, " + fixed(S) + "] (" + fixed(S)
                         + " slots)");
  auto n = static_cast<uint64_t>(rows_of.shape[0]);
  if (dense) {
    if (dense->shape.size() != 2 || static_cast<uint64_t>(dense->shape[1]) != D)
      return failed(400, "input 'dense': shape " + shape_text(dense->shape)
                           + " does not match the model's [N, " + fixed(D) + "] (" + fixed(D)
                           + " dense features)");
    if (static_cast<uint64_t>(dense->shape[0]) != n)
      return failed(400, "input 'dense' has " + fixed(static_cast<uint64_t>(dense->shape[0]))
                           + " rows, " + rows_of.what() + " has " + fixed(n));
  }
  if (n == 0)
    return failed(400, "no instances: N = 0");
  if (n > io.max_instances)
    return failed(413, std::to_string(n) + " instances, at most " + std::to_string(io.max_instances)
                         + " per request");
  auto& in = r.input;
  in.size = static_cast<int>(n);
  in.offsets.resize(n * S + 1);
  if (lengths) {
    if (ids->shape.size() != 1)
      return failed(400, "input 'ids': shape " + shape_text(ids->shape)
                           + ": with ids_lengths, ids is [T], the bags' ids one after another");
    uint64_t total = 0;
    in.offsets[0] = 0;
    for (size_t b = 0; b < lengths->u.size(); ++b) {
      auto len = static_cast<int64_t>(lengths->u[b]);
      if (len < 0 || static_cast<uint64_t>(len) > io.max_ids_per_bag)
        return failed(400, "input 'ids_lengths'[" + fixed(b / S) + ", " + fixed(b % S)
                             + "]: " + std::to_string(len) + " ids, a bag has 0.."
                             + std::to_string(io.max_ids_per_bag));
      total += static_cast<uint64_t>(len);
      if (total > UINT32_MAX)
        return failed(413, "input 'ids_lengths': more than 2^32-1 ids");
      in.offsets[b + 1] = static_cast<uint32_t>(total);
    }
    if (total != ids->elements)
      return failed(400, "input 'ids': shape " + shape_text(ids->shape) + ", the lengths in "
                           "ids_lengths add up to " + fixed(total));
  } else {
    if (ids->shape.size() != 2 || static_cast<uint64_t>(ids->shape[1]) != S
        || static_cast<uint64_t>(ids->shape[0]) != n)
      return failed(400, "input 'ids': shape " + shape_text(ids->shape)
                           + " does not match the model's [N, " + fixed(S) + "] (" + fixed(S)
                           + " slots, one id each)");
    for (uint64_t b = 0; b <= n * S; ++b)
      in.offsets[b] = static_cast<uint32_t>(b);
  }
  in.ids = std::move(ids->u);
  if (dense)
    in.dense = std::move(dense->f);
  // Outputs: those named (each once), else both as JSON; binary_data_output makes every
  // output binary unless the output says otherwise.
  if (sax.has_outputs && sax.outputs.empty())
    return failed(400, "\"outputs\": empty (leave it out for every output)");
  for (auto& o : sax.outputs) {
    infer_output_request w;
    if (!o.has_name)
      return failed(400, "outputs: an output without \"name\"");
    if (o.name == "predictions")
      w.what = infer_output::predictions;
    else if (o.name == "logits")
      w.what = infer_output::logits;
    else
      return failed(400, "unknown output '" + o.name.substr(0, 40) + "': the model '" + io.name
                           + "' gives predictions (FP32 [N]) and logits (FP32 [N])");
    for (auto& x : r.outputs)
      if (x.what == w.what)
        return failed(400, "output '" + o.name + "' asked twice");
    w.binary = o.binary >= 0 ? o.binary == 1 : sax.binary_output;
    r.outputs.push_back(w);
  }
  if (r.outputs.empty())
    r.outputs = {{infer_output::predictions, sax.binary_output},
                 {infer_output::logits, sax.binary_output}};
  return r;
}

std::string infer_response(const infer_model_io& io, const std::string& id, const float* logits,
                           size_t n, const std::vector<infer_output_request>& outputs,
                           size_t& header_length) {
  std::vector<float> probs;
  auto values = [&](infer_output what) -> const float* {
    if (what == infer_output::logits)
      return logits;
    if (probs.empty()) {
      probs.resize(n);
      for (size_t i = 0; i < n; ++i)
        probs[i] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[i]))));
    }
    return probs.data();
  };
  std::string out;
  out.reserve(160 + n * 24);
  out += "{\"model_name\":";
  append_escaped(out, io.name);
  out += ",\"model_version\":";
  append_escaped(out, io.version);
  if (!id.empty()) {
    out += ",\"id\":";
    append_escaped(out, id);
  }
  out += ",\"outputs\":[";
  bool any_binary = false;
  char buf[32];
  for (size_t o = 0; o < outputs.size(); ++o) {
    auto& w = outputs[o];
    out += o ? ",{\"name\":\"" : "{\"name\":\"";
    out += w.what == infer_output::logits ? "logits" : "predictions";
    out += "\",\"datatype\":\"FP32\",\"shape\":[" + std::to_string(n) + "]";
    if (w.binary) {
      any_binary = true;
      out += ",\"parameters\":{\"binary_data_size\":" + std::to_string(n * 4) + "}}";
      continue;
    }
    out += ",\"data\":[";
    const float* v = values(w.what);
    for (size_t i = 0; i < n; ++i) {
      if (i)
        out += ',';
      if (!std::isfinite(v[i])) {  // JSON has no NaN or infinity
        out += "null";
        continue;
      }
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v[i]);
      out.append(buf, end);
    }
    out += "]}";
  }
  out += "]}";
  header_length = std::string::npos;
  if (any_binary) {
    header_length = out.size();
    for (auto& w : outputs)
      if (w.binary)
        out.append(reinterpret_cast<const char*>(values(w.what)), n * 4);
  }
  return out;
}

std::string infer_model_metadata(const infer_model_io& io) {
  std::string out = "{\"name\":";
  append_escaped(out, io.name);
  out += ",\"versions\":[";
  append_escaped(out, io.version);
  out += "],\"platform\":\"satrap\",\"inputs\":[";
  if (io.dense_features > 0)
    out += "{\"name\":\"dense\",\"datatype\":\"FP32\",\"shape\":[-1,"
           + std::to_string(io.dense_features) + "]},";
  out += "{\"name\":\"ids\",\"datatype\":\"INT64\",\"shape\":[-1," + std::to_string(io.slots)
         + "]}],\"outputs\":[{\"name\":\"predictions\",\"datatype\":\"FP32\",\"shape\":[-1]},"
           "{\"name\":\"logits\",\"datatype\":\"FP32\",\"shape\":[-1]}]}";
  return out;
}

}  // namespace satrap
