// Token comparison and secret files (runtime/secrets.hpp).
#include "runtime/secrets.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <cstdio>
#include <filesystem>

using namespace satrap;

TEST_CASE("token_equal accepts only the exact token, and never an empty one") {
  CHECK(token_equal("abc123", "abc123"));
  CHECK_FALSE(token_equal("abc124", "abc123"));
  CHECK_FALSE(token_equal("abc12", "abc123"));
  CHECK_FALSE(token_equal("abc1234", "abc123"));
  CHECK_FALSE(token_equal("", "abc123"));
  CHECK_FALSE(token_equal("", ""));  // no token configured: nothing matches
}

TEST_CASE("random tokens are hex of the asked length and differ") {
  auto a = random_token(), b = random_token();
  CHECK(a.size() == 32);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
}

TEST_CASE("a secret file is written with mode 0600 and read back") {
  auto path =
    (std::filesystem::temp_directory_path() / ("satrap-secret-" + random_token(4))).string();
  REQUIRE(secret_file_write(path, "s3cret"));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(secret_file_read(path) == "s3cret");
  std::remove(path.c_str());
  CHECK(secret_file_read(path).empty());
}
