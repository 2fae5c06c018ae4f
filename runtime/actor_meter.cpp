#include "runtime/actor_meter.hpp"

#include <algorithm>
#include <mutex>

namespace satrap {

namespace {

struct registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<actor_meter>> meters;
};

registry& the_registry() {
  static registry r;
  return r;
}

}  // namespace

meter_handle::meter_handle(std::string role, int32_t index, std::string job)
    : meter_(std::make_shared<actor_meter>(std::move(role), index, std::move(job))) {
  auto& r = the_registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.meters.push_back(meter_);
}

meter_handle::~meter_handle() {
  if (!meter_)
    return;
  auto& r = the_registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.meters.erase(std::remove(r.meters.begin(), r.meters.end(), meter_), r.meters.end());
}

std::vector<actor_stat> meters_snapshot() {
  auto& r = the_registry();
  std::lock_guard<std::mutex> guard(r.mutex);
  std::vector<actor_stat> out;
  out.reserve(r.meters.size());
  for (auto& m : r.meters)
    out.push_back(m->stat());
  return out;
}

}  // namespace satrap
