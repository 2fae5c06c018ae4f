// SATRAP_ASSERT: an invariant check that stays on in every build type, Release included.
//
// A broken invariant is a bug, not an expected failure (those are result<T> / caf::error values):
// the process prints where and what to stderr and aborts, so a supervisor sees a crash instead of
// a wrong model trained from a corrupted state. Use it on the entry and exit of protocols (step
// numbers monotone, counts consistent) and wherever a Release-mode `assert` would otherwise let a
// bad index through. Do not use it on input from a file, a user or another process: check that at
// the edge and answer with an error (runtime/payload_checks.hpp, models/result.hpp).
//
//   SATRAP_ASSERT(step == st.next_compute, "step={} next={}", step, st.next_compute);
//
// The message is printf-free: its arguments are streamed in order into the `{}` placeholders, so
// the header needs neither spdlog nor fmt (models/ stays free of both). The arguments are only
// evaluated when the condition fails. Threading: any thread; the report is written with one
// fwrite, so reports of two failing threads do not interleave within a line.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

namespace satrap::detail {

inline void assert_format(std::ostringstream& out, std::string_view fmt) { out << fmt; }

template <class T, class... Rest>
void assert_format(std::ostringstream& out, std::string_view fmt, const T& x, const Rest&... rest) {
  auto at = fmt.find("{}");
  if (at == std::string_view::npos) {  // more arguments than placeholders: append them
    out << fmt << ' ' << x;
    ((out << ' ' << rest), ...);
    return;
  }
  out << fmt.substr(0, at) << x;
  assert_format(out, fmt.substr(at + 2), rest...);
}

[[noreturn]] inline void assert_fail(const char* file, int line, const char* condition,
                                     const std::string& message) {
  std::string text = std::string("satrap: invariant broken at ") + file + ":" + std::to_string(line)
                     + ": " + condition;
  if (!message.empty())
    text += ": " + message;
  text += '\n';
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  std::abort();
}

template <class... Args>
[[noreturn]] void assert_fail_fmt(const char* file, int line, const char* condition,
                                  std::string_view fmt = {}, const Args&... args) {
  std::ostringstream out;
  assert_format(out, fmt, args...);
  assert_fail(file, line, condition, out.str());
}

}  // namespace satrap::detail

#define SATRAP_ASSERT(cond, ...)                                                               \
  do {                                                                                         \
    if (__builtin_expect(!(cond), 0))                                                          \
      ::satrap::detail::assert_fail_fmt(__FILE__, __LINE__, #cond __VA_OPT__(, ) __VA_ARGS__); \
  } while (false)

// SATRAP_DEBUG_ASSERT: the same check, compiled only where NDEBUG is not defined (the sanitizer
// build of CI, Debug builds). Only for the store's hottest paths, where an always-on check costs
// measurable time or repeats work (row_index::insert's "not yet present" is a second lookup per
// insert; even a cheap check in the lookup pipeline and in insert, with its cold reporting call,
// cost embedding_store_bench's lookup ratio about 7%: 0.33-0.39 against 0.36-0.42 in alternating
// runs); everywhere else use SATRAP_ASSERT. In Release its condition is not evaluated.
#ifdef NDEBUG
#define SATRAP_DEBUG_ASSERT(cond, ...) \
  do {                                 \
  } while (false)
#else
#define SATRAP_DEBUG_ASSERT(cond, ...) SATRAP_ASSERT(cond __VA_OPT__(, ) __VA_ARGS__)
#endif
