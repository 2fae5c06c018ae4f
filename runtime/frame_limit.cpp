#include "runtime/frame_limit.hpp"

#include <caf/io/basp/header.hpp>
#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <atomic>

namespace satrap {

namespace {

std::atomic<uint64_t> limit{default_max_frame_bytes};
std::atomic<uint64_t> refused{0};

using valid_fn = bool (*)(const caf::io::basp::header&);

valid_fn original() {
  static valid_fn fn =
    reinterpret_cast<valid_fn>(dlsym(RTLD_NEXT, "_ZN3caf2io4basp5validERKNS1_6headerE"));
  return fn;
}

}  // namespace

std::string frame_limit_install(uint64_t max_payload_bytes) {
  limit = max_payload_bytes;
  if (!original())
    return "libcaf_io's caf::io::basp::valid was not found: frames are not bounded";
  // The executable's definition must be the one the dynamic linker resolves.
  auto* self = dlsym(RTLD_DEFAULT, "_ZN3caf2io4basp5validERKNS1_6headerE");
  if (self != reinterpret_cast<void*>(static_cast<valid_fn>(&caf::io::basp::valid)))
    return "the frame bound is not interposed on libcaf_io: frames are not bounded";
  return "";
}

uint64_t frame_limit() { return limit; }

uint64_t frames_refused() { return refused; }

}  // namespace satrap

// The interposed check (see frame_limit.hpp).
namespace caf::io::basp {

bool valid(const header& hdr) {
  if (hdr.payload_len > satrap::limit.load(std::memory_order_relaxed)) {
    auto n = ++satrap::refused;
    if (n <= 10 || n % 1000 == 0)
      spdlog::warn("frame_refused payload_bytes={} limit_bytes={} refused_total={}",
                   hdr.payload_len, satrap::limit.load(), n);
    return false;
  }
  auto fn = satrap::original();
  return fn ? fn(hdr) : false;
}

}  // namespace caf::io::basp
