// SATRAP_ASSERT stays on in every build type: a broken invariant prints file:line, the condition
// and the message, then aborts (checked in a forked child, whatever CMAKE_BUILD_TYPE is).
#include "models/assert.hpp"
#include "models/result.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct child_end {
  int signal = 0;  // the signal that ended it, 0 if it exited
  std::string stderr_text;
};

// Runs `f` in a child with stderr into a pipe.
template <class F>
child_end run_child(F f) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    f();
    ::_exit(0);
  }
  ::close(fds[1]);
  child_end end;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;)
    end.stderr_text.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  end.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return end;
}

}  // namespace

TEST_CASE("SATRAP_ASSERT: a true condition costs nothing and says nothing") {
  auto end = run_child([] {
    int step = 3;
    SATRAP_ASSERT(step == 3, "step={}", step);
    SATRAP_ASSERT(step > 0);
  });
  CHECK(end.signal == 0);
  CHECK(end.stderr_text.empty());
}

TEST_CASE("SATRAP_ASSERT: a broken invariant aborts with where, what and the message") {
  auto end = run_child([] {
    int step = 4, next = 7;
    SATRAP_ASSERT(step == next, "step={} next={}", step, next);
  });
  CHECK(end.signal == SIGABRT);
  INFO(end.stderr_text);
  CHECK(end.stderr_text.find("assert_test.cpp:") != std::string::npos);
  CHECK(end.stderr_text.find("step == next: step=4 next=7") != std::string::npos);
}

TEST_CASE("result: value() of an error aborts in every build type") {
  auto end = run_child([] {
    satrap::result<int> r = satrap::make_model_error("the file is gone");
    volatile int x = r.value();
    (void)x;
  });
  CHECK(end.signal == SIGABRT);
  CHECK(end.stderr_text.find("value() of an error result: the file is gone") != std::string::npos);
}
