// A small result type for expected failures in models/ (which must not depend on CAF): either a
// value or an error message that says what went wrong and where (file, field, what was expected).
// Bugs are SATRAP_ASSERTs, not results: value() of an error (or error() of a value) aborts, in
// Release too. A result<ok_t> is a status: success carries nothing. Every fallible function of
// models/ answers this way (no error out-parameters, no "" for success).
// Threading: a plain value.
#pragma once

#include "models/assert.hpp"

#include <string>
#include <utility>
#include <variant>

namespace satrap {

struct model_error {
  std::string message;     // for a user: what failed, where, and what was expected
  bool bad_input = false;  // the input's fault (a bad option, a bad line, a missing file), not the
                           // machine's (a write that failed): callers answer it differently
};

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}
  result(model_error e) : v_(std::move(e)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() {
    SATRAP_ASSERT(ok(), "value() of an error result: {}", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  const T& value() const {
    SATRAP_ASSERT(ok(), "value() of an error result: {}", std::get<1>(v_).message);
    return std::get<0>(v_);
  }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const std::string& error() const {
    SATRAP_ASSERT(!ok(), "error() of a result that holds a value");
    return std::get<1>(v_).message;
  }
  bool bad_input() const { return !ok() && std::get<1>(v_).bad_input; }
  // The error as it is, to pass on from a result of another type.
  const model_error& failure() const {
    SATRAP_ASSERT(!ok(), "failure() of a result that holds a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, model_error> v_;
};

struct ok_t {};  // result<ok_t>: success carries nothing

inline model_error make_model_error(std::string message) { return model_error{std::move(message)}; }
inline model_error make_input_error(std::string message) {
  return model_error{std::move(message), true};
}

}  // namespace satrap
