#include "models/serving/predict_request.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

namespace satrap {

namespace {

using json = nlohmann::json;

std::string at(size_t i) { return "instances[" + std::to_string(i) + "]"; }

// An id: an unsigned JSON integer, or a decimal string of one.
bool read_id(const json& v, uint64_t& out, std::string& why) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    why = "ids out of range: " + v.dump() + " is negative (ids are 0..18446744073709551615)";
    return false;
  }
  if (v.is_number_float()) {
    why = "expected an integer id, got " + v.dump()
          + " (ids past 2^64 or with a fraction are out of range)";
    return false;
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) {
      why = "expected a decimal id string, got \"" + s.substr(0, 40) + "\"";
      return false;
    }
    errno = 0;
    char* end = nullptr;
    unsigned long long x = std::strtoull(s.c_str(), &end, 10);
    if (errno == ERANGE) {
      why = "ids out of range: " + s + " is past 18446744073709551615";
      return false;
    }
    out = x;
    return true;
  }
  why = "expected an id (integer or decimal string), got " + std::string(v.type_name());
  return false;
}

}  // namespace

predict_request_parse parse_predict_request(std::string_view body,
                                            const predict_request_limits& limits) {
  predict_request_parse r;
  json doc = json::parse(body.begin(), body.end(), nullptr, false);
  if (doc.is_discarded()) {
    r.error =
      "malformed JSON: expected {\"instances\": [{\"dense\": [...], \"slots\": [[ids...], ...]}]}";
    return r;
  }
  if (!doc.is_object() || !doc.contains("instances")) {
    r.error = "expected a JSON object with \"instances\"";
    return r;
  }
  for (auto& [key, value] : doc.items())
    if (key != "instances") {
      r.error = "unknown key \"" + key + "\": a request has only \"instances\"";
      return r;
    }
  const auto& inst = doc["instances"];
  if (!inst.is_array() || inst.empty()) {
    r.error = "\"instances\": expected a non-empty array of instances";
    return r;
  }
  if (inst.size() > limits.max_instances) {
    r.error = "\"instances\": " + std::to_string(inst.size()) + " instances, at most "
              + std::to_string(limits.max_instances) + " per request";
    return r;
  }
  auto& in = r.input;
  const size_t n = inst.size(), slots = static_cast<size_t>(limits.slots),
               nd = static_cast<size_t>(limits.dense_features);
  in.size = static_cast<int>(n);
  in.offsets.reserve(n * slots + 1);
  in.offsets.push_back(0);
  in.dense.reserve(n * nd);
  for (size_t i = 0; i < n; ++i) {
    const auto& x = inst[i];
    if (!x.is_object()) {
      r.error = at(i) + ": expected an object with \"dense\" and \"slots\"";
      return r;
    }
    for (auto& [key, value] : x.items())
      if (key != "dense" && key != "slots") {
        r.error = at(i) + ": unknown key \"" + key + "\" (an instance has \"dense\" and \"slots\")";
        return r;
      }
    if (nd > 0 || x.contains("dense")) {
      auto it = x.find("dense");
      if (it == x.end() || !it->is_array()) {
        r.error = at(i) + ".dense: expected an array of " + std::to_string(nd) + " numbers";
        return r;
      }
      if (it->size() != nd) {
        r.error = at(i) + ".dense: wrong dense length " + std::to_string(it->size())
                  + ", the model has " + std::to_string(nd) + " dense features";
        return r;
      }
      for (size_t d = 0; d < nd; ++d) {
        const auto& v = (*it)[d];
        if (!v.is_number()) {
          r.error =
            at(i) + ".dense[" + std::to_string(d) + "]: expected a number, got " + v.type_name();
          return r;
        }
        double f = v.get<double>();
        if (!std::isfinite(static_cast<float>(f))) {
          r.error = at(i) + ".dense[" + std::to_string(d) + "]: expected a finite float";
          return r;
        }
        in.dense.push_back(static_cast<float>(f));
      }
    }
    auto it = x.find("slots");
    if (it == x.end() || !it->is_array()) {
      r.error = at(i) + ".slots: expected an array of " + std::to_string(slots) + " bags of ids";
      return r;
    }
    if (it->size() > slots) {
      r.error = at(i) + ".slots: unknown slot " + std::to_string(slots) + ": the model has "
                + std::to_string(slots) + " slots (0.." + std::to_string(slots - 1) + ")";
      return r;
    }
    if (it->size() < slots) {
      r.error = at(i) + ".slots: " + std::to_string(it->size()) + " bags, the model has "
                + std::to_string(slots) + " slots (give every slot a bag)";
      return r;
    }
    for (size_t s = 0; s < slots; ++s) {
      const auto& bag = (*it)[s];
      if (!bag.is_array()) {
        r.error = at(i) + ".slots[" + std::to_string(s) + "]: expected an array of ids, got "
                  + bag.type_name();
        return r;
      }
      if (bag.size() > limits.max_ids_per_bag) {
        r.error = at(i) + ".slots[" + std::to_string(s) + "]: more than "
                  + std::to_string(limits.max_ids_per_bag) + " ids";
        return r;
      }
      for (size_t k = 0; k < bag.size(); ++k) {
        uint64_t id = 0;
        std::string why;
        if (!read_id(bag[k], id, why)) {
          r.error = at(i) + ".slots[" + std::to_string(s) + "][" + std::to_string(k) + "]: " + why;
          return r;
        }
        in.ids.push_back(id);
      }
      in.offsets.push_back(static_cast<uint32_t>(in.ids.size()));
    }
  }
  return r;
}

std::string predict_response_json(const std::string& model, const std::string& version,
                                  const float* logits, size_t n) {
  std::string out;
  out.reserve(64 + n * 40);
  out += "{\"model\":" + json(model).dump() + ",\"version\":" + json(version).dump()
         + ",\"predictions\":[";
  char buf[48];
  for (size_t i = 0; i < n; ++i) {
    double p = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[i])));
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", p);
    out += buf;
  }
  out += "],\"logits\":[";
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", static_cast<double>(logits[i]));
    out += buf;
  }
  out += "]}";
  return out;
}

}  // namespace satrap
