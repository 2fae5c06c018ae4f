// Error messages: input echoed in a message is made printable (no raw control byte, no invalid
// UTF-8 reaches a terminal or a job record).
#include "runtime/error.hpp"
#include "spec/job_spec.hpp"

#include <doctest/doctest.h>

using namespace satrap;

TEST_CASE("printable escapes control bytes and invalid UTF-8, keeps valid UTF-8") {
  using namespace std::string_literals;
  CHECK(printable("plain text, [0-9] ~") == "plain text, [0-9] ~");
  CHECK(printable("a\0b"s) == "a\\x00b");
  CHECK(printable("\x1b[31mred\n\t\x7f") == "\\x1b[31mred\\x0a\\x09\\x7f");
  CHECK(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")
        == "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  CHECK(printable("\xff\xc3") == "\\xff\\xc3");  // stray and truncated bytes
  CHECK(printable("\xc0\xaf \xed\xa0\x80") == "\\xc0\\xaf \\xed\\xa0\\x80");  // overlong, surrogate
  CHECK(printable(printable("a\0\\x1b"s)) == printable("a\0\\x1b"s));         // idempotent
}

TEST_CASE("a job file's bytes are escaped in the error that echoes them") {
  using namespace std::string_literals;
  auto spec = job_spec_defaults();
  auto err = job_spec_load_text("training: {staleness: \"x\\x1b[31m\\0red\"}\n"s, "job.yaml", spec);
  REQUIRE(err);
  auto text = error_text(err);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\0') == std::string::npos);
  CHECK(text.find("got 'x\\x1b[31m\\x00red'") != std::string::npos);
  // Raw bytes in the file itself (a NUL in a key) are escaped too.
  err = job_spec_load_text("trai\0ning: {staleness: 1}\n"s, "job.yaml", spec);
  REQUIRE(err);
  text = error_text(err);
  for (unsigned char c : text)  // yaml-cpp reads the NUL as a control byte: escaped, whatever it is
    CHECK(c >= 0x20);
  CHECK(text.find("\\x") != std::string::npos);
}
