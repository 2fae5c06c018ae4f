#include "models/serving/predict_request.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace satrap {

namespace {

using json = nlohmann::json;

// The streaming parse of a request (nlohmann's SAX interface): each value is checked and stored
// as it comes, so nothing is allocated beyond the instances' own ids and floats, and a bad value
// stops the parse at once.
class predict_sax {
 public:
  predict_sax(const predict_request_limits& limits, predict_request_parse& out)
      : limits_(limits),
        in_(out.input),
        slots_(static_cast<size_t>(limits.slots)),
        nd_(static_cast<size_t>(limits.dense_features)) {
    in_.offsets.push_back(0);
  }

  std::string error;
  bool has_instances = false;

  bool null() { return value(nullptr, "null"); }
  bool boolean(bool) { return value(nullptr, "boolean"); }
  bool number_integer(json::number_integer_t v) {
    if (where_ == in::wbag)
      return weight(static_cast<double>(v));
    if (where_ == in::bag) {
      char buf[24];
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
      return fail(bag_at() + "ids out of range: " + buf
                  + " is negative (ids are 0..18446744073709551615)");
    }
    return number(static_cast<double>(v), "number");
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (where_ == in::bag)
      return id(v);
    if (where_ == in::wbag)
      return weight(static_cast<double>(v));
    return number(static_cast<double>(v), "number");
  }
  bool number_float(json::number_float_t v, const std::string& text) {
    if (where_ == in::wbag)
      return weight(v);
    if (where_ == in::bag)
      return fail(bag_at() + "expected an integer id, got " + text.substr(0, 40)
                  + " (ids past 2^64 or with a fraction are out of range)");
    return number(v, "number");
  }
  bool string(std::string& v) {
    if (where_ == in::bag) {
      if (v.empty() || v.size() > 20 || v.find_first_not_of("0123456789") != std::string::npos)
        return fail(bag_at() + "expected a decimal id string, got \"" + v.substr(0, 40) + "\"");
      errno = 0;
      char* end = nullptr;
      unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (errno == ERANGE)
        return fail(bag_at() + "ids out of range: " + v + " is past 18446744073709551615");
      return id(x);
    }
    return value(nullptr, "string");
  }
  bool binary(json::binary_t&) { return value(nullptr, "binary"); }

  bool key(std::string& k) {
    key_ = k;
    if (where_ == in::root) {
      if (k != "instances")
        return fail("unknown key \"" + k.substr(0, 40) + "\": a request has only \"instances\"");
      if (has_instances)
        return fail("\"instances\" given twice");
      return true;
    }
    if (where_ == in::instance) {
      if (k != "dense" && k != "slots" && (k != "weights" || !limits_.weights))
        return fail(at() + ": unknown key \"" + k.substr(0, 40)
                    + (limits_.weights ? "\" (an instance has \"dense\", \"slots\" and \"weights\")"
                                       : "\" (an instance has \"dense\" and \"slots\")"));
      if ((k == "dense" && seen_dense_) || (k == "slots" && seen_slots_)
          || (k == "weights" && seen_weights_))
        return fail(at() + ": \"" + k + "\" given twice");
    }
    return true;
  }

  bool start_object(std::size_t) {
    switch (where_) {
      case in::none: where_ = in::root; return true;
      case in::instances:
        if (n_ == limits_.max_instances)
          return fail("\"instances\": more than " + std::to_string(limits_.max_instances)
                      + " instances, at most " + std::to_string(limits_.max_instances)
                      + " per request");
        where_ = in::instance;
        seen_dense_ = seen_slots_ = seen_weights_ = false;
        first_bag_ = in_.offsets.size() - 1;
        w_.clear();
        wcounts_.clear();
        return true;
      default: return value(nullptr, "object");
    }
  }

  bool start_array(std::size_t) {
    switch (where_) {
      case in::none: return fail("expected a JSON object with \"instances\"");
      case in::root:
        has_instances = true;
        where_ = in::instances;
        return true;
      case in::instance:
        if (key_ == "dense") {
          seen_dense_ = true;
          where_ = in::dense;
          dense_count_ = 0;
          return true;
        }
        if (key_ == "weights") {
          seen_weights_ = true;
          where_ = in::weights;
          return true;
        }
        seen_slots_ = true;
        where_ = in::slots;
        bag_ = 0;
        return true;
      case in::weights:
        if (wcounts_.size() == slots_)
          return fail(at() + ".weights: " + std::to_string(slots_ + 1)
                      + " or more bags, the model has " + std::to_string(slots_) + " slots");
        where_ = in::wbag;
        wcounts_.push_back(0);
        return true;
      case in::slots:
        if (bag_ == slots_)
          return fail(at() + ".slots: unknown slot " + std::to_string(slots_) + ": the model has "
                      + std::to_string(slots_) + " slots (0.." + std::to_string(slots_ - 1) + ")");
        where_ = in::bag;
        bag_ids_ = 0;
        return true;
      default: return value(nullptr, "array");
    }
  }

  bool end_array() {
    switch (where_) {
      case in::instances: where_ = in::root; return true;
      case in::dense:
        if (dense_count_ != nd_)
          return fail(at() + ".dense: wrong dense length " + std::to_string(dense_count_)
                      + ", the model has " + std::to_string(nd_) + " dense features");
        where_ = in::instance;
        return true;
      case in::slots:
        if (bag_ < slots_)
          return fail(at() + ".slots: " + std::to_string(bag_) + " bags, the model has "
                      + std::to_string(slots_) + " slots (give every slot a bag)");
        where_ = in::instance;
        return true;
      case in::bag:
        in_.offsets.push_back(static_cast<uint32_t>(in_.ids.size()));
        ++bag_;
        where_ = in::slots;
        return true;
      case in::weights: where_ = in::instance; return true;
      case in::wbag: where_ = in::weights; return true;
      default: return true;
    }
  }

  bool end_object() {
    if (where_ == in::instance) {
      if (nd_ > 0 && !seen_dense_)
        return fail(at() + ".dense: expected an array of " + std::to_string(nd_) + " numbers");
      if (!seen_slots_)
        return fail(at() + ".slots: expected an array of " + std::to_string(slots_)
                    + " bags of ids");
      if (limits_.weights) {  // one weight per id, bag by bag
        if (!seen_weights_)
          return fail(at() + ".weights: expected an array of " + std::to_string(slots_)
                      + " bags of weights (the model's ids carry weights), one per id");
        for (size_t b = 0; b < slots_; ++b) {
          auto ids = in_.offsets[first_bag_ + b + 1] - in_.offsets[first_bag_ + b];
          if (b >= wcounts_.size() || wcounts_[b] != ids)
            return fail(at() + ".weights[" + std::to_string(b)
                        + "]: " + std::to_string(b < wcounts_.size() ? wcounts_[b] : 0)
                        + " weights for " + std::to_string(ids) + " ids");
        }
        in_.weights.insert(in_.weights.end(), w_.begin(), w_.end());
      }
      ++n_;
      where_ = in::instances;
      return true;
    }
    where_ = in::done;
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return fail(
      "malformed JSON: expected {\"instances\": [{\"dense\": [...], \"slots\": "
      "[[ids...], ...]}]}");
  }

  size_t instances() const { return n_; }

 private:
  enum class in : uint8_t {
    none,
    root,
    instances,
    instance,
    dense,
    slots,
    bag,
    weights,
    wbag,
    done
  };

  bool fail(std::string why) {
    if (error.empty())
      error = std::move(why);
    return false;
  }
  std::string at() const { return "instances[" + std::to_string(n_) + "]"; }
  std::string bag_at() const {
    return at() + ".slots[" + std::to_string(bag_) + "][" + std::to_string(bag_ids_) + "]: ";
  }

  // A value that is not what its place takes.
  bool value(std::nullptr_t, const char* type) {
    switch (where_) {
      case in::none:
      case in::root:
        if (where_ == in::root && key_ == "instances")
          return fail("\"instances\": expected a non-empty array of instances");
        return fail("expected a JSON object with \"instances\"");
      case in::instances: return fail(at() + ": expected an object with \"dense\" and \"slots\"");
      case in::instance:
        if (key_ == "dense")
          return fail(at() + ".dense: expected an array of " + std::to_string(nd_) + " numbers");
        if (key_ == "weights")
          return fail(at() + ".weights: expected an array of " + std::to_string(slots_)
                      + " bags of weights");
        return fail(at() + ".slots: expected an array of " + std::to_string(slots_)
                    + " bags of ids");
      case in::dense:
        return fail(at() + ".dense[" + std::to_string(dense_count_) + "]: expected a number, got "
                    + type);
      case in::slots:
        if (bag_ == slots_)
          return fail(at() + ".slots: unknown slot " + std::to_string(slots_) + ": the model has "
                      + std::to_string(slots_) + " slots (0.." + std::to_string(slots_ - 1) + ")");
        return fail(at() + ".slots[" + std::to_string(bag_) + "]: expected an array of ids, got "
                    + type);
      case in::bag:
        return fail(bag_at() + "expected an id (integer or decimal string), got " + type);
      case in::weights:
        return fail(at() + ".weights[" + std::to_string(wcounts_.size())
                    + "]: expected an array of weights, got " + type);
      case in::wbag:
        return fail(at() + ".weights[" + std::to_string(wcounts_.size() - 1) + "]["
                    + std::to_string(wcounts_.back()) + "]: expected a number, got " + type);
      default:
        return fail(
          "malformed JSON: expected {\"instances\": [{\"dense\": [...], \"slots\": "
          "[[ids...], ...]}]}");
    }
  }

  bool number(double f, const char* type) {
    if (where_ != in::dense)
      return value(nullptr, type);
    if (dense_count_ >= nd_) {  // counted, not stored: the error names the length at the end
      ++dense_count_;
      return true;
    }
    if (!std::isfinite(static_cast<float>(f)))
      return fail(at() + ".dense[" + std::to_string(dense_count_) + "]: expected a finite float");
    in_.dense.push_back(static_cast<float>(f));
    ++dense_count_;
    return true;
  }

  bool weight(double v) {
    if (!std::isfinite(static_cast<float>(v)))
      return fail(at() + ".weights[" + std::to_string(wcounts_.size() - 1) + "]["
                  + std::to_string(wcounts_.back()) + "]: expected a finite float");
    if (w_.size() >= limits_.max_ids_per_bag * slots_)
      return fail(at() + ".weights: more weights than the slots can have ids");
    w_.push_back(static_cast<float>(v));
    ++wcounts_.back();
    return true;
  }

  bool id(uint64_t v) {
    if (bag_ids_ == limits_.max_ids_per_bag)
      return fail(at() + ".slots[" + std::to_string(bag_) + "]: more than "
                  + std::to_string(limits_.max_ids_per_bag) + " ids");
    in_.ids.push_back(v);
    ++bag_ids_;
    return true;
  }

  const predict_request_limits& limits_;
  score_input& in_;
  const size_t slots_, nd_;
  in where_ = in::none;
  std::string key_;
  size_t n_ = 0, dense_count_ = 0, bag_ = 0, bag_ids_ = 0;
  bool seen_dense_ = false, seen_slots_ = false, seen_weights_ = false;
  size_t first_bag_ = 0;           // the instance's first bag in in_.offsets
  std::vector<float> w_;           // the instance's weights, until its ids are known to match
  std::vector<uint32_t> wcounts_;  // weights per bag
};

}  // namespace

predict_request_parse parse_predict_request(std::string_view body,
                                            const predict_request_limits& limits) {
  predict_request_parse r;
  predict_sax sax(limits, r);
  bool ok = json::sax_parse(body.begin(), body.end(), &sax);
  if (!ok || !sax.error.empty()) {
    predict_request_parse failed;
    failed.error = sax.error.empty() ? "malformed JSON: expected {\"instances\": [{\"dense\": "
                                       "[...], \"slots\": [[ids...], ...]}]}"
                                     : sax.error;
    return failed;
  }
  if (!sax.has_instances) {
    r.error = "expected a JSON object with \"instances\"";
    return r;
  }
  if (sax.instances() == 0) {
    r.error = "\"instances\": expected a non-empty array of instances";
    return r;
  }
  r.input.size = static_cast<int>(sax.instances());
  return r;
}

std::string predict_response_json(const std::string& model, const std::string& version,
                                  const float* logits, size_t n,
                                  const std::vector<std::string>& labels) {
  std::string out;
  const size_t tasks = labels.size() > 1 ? labels.size() : 1;
  out.reserve(64 + n * 40 + (tasks > 1 ? n * 24 : 0));
  out += "{\"model\":" + json(model).dump() + ",\"version\":" + json(version).dump();
  char buf[48];
  auto values = [&](const char* key, bool probability) {
    out += ",\"";
    out += key;
    out += "\":[";
    for (size_t i = 0; i < n; ++i) {
      double x = static_cast<double>(logits[i]);
      if (probability)
        x = 1.0 / (1.0 + std::exp(-x));
      size_t task = i % tasks;
      if (task == 0 && i)
        out += ',';
      if (tasks > 1) {
        out += task == 0 ? '{' : ',';
        out += json(labels[task]).dump();
        out += ':';
      }
      std::snprintf(buf, sizeof buf, "%.9g", x);
      out += buf;
      if (tasks > 1 && task + 1 == tasks)
        out += '}';
    }
    out += ']';
  };
  values("predictions", true);
  values("logits", false);
  out += '}';
  return out;
}

}  // namespace satrap
