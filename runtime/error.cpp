#include "runtime/error.hpp"

#include <caf/message.hpp>
#include <caf/sec.hpp>

#include <cerrno>
#include <cstring>
#include <new>

namespace satrap {

const char* to_string(errc x) {
  switch (x) {
    case errc::ok: return "ok";
    case errc::invalid_config: return "invalid_config";
    case errc::unauthorized: return "unauthorized";
    case errc::io_failure: return "io_failure";
    case errc::peer_failure: return "peer_failure";
    case errc::invalid_payload: return "invalid_payload";
    case errc::no_resource: return "no_resource";
  }
  return "unknown";
}

namespace {

// The length of the valid UTF-8 sequence at s[i] (2-4), or 0 when there is none.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto c = b(i);
  size_t n = c >= 0xC2 && c <= 0xDF   ? 2
             : c >= 0xE0 && c <= 0xEF ? 3
             : c >= 0xF0 && c <= 0xF4 ? 4
                                      : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80)
      return 0;
  // Overlong forms and surrogates (E0 80-9F, ED A0-BF) and code points past U+10FFFF (F0 80-8F,
  // F4 90-BF) are not valid UTF-8.
  auto c1 = b(i + 1);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90)
      || (c == 0xF4 && c1 > 0x8F))
    return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < text.size();) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (auto n = c >= 0x80 ? utf8_sequence(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out.append("\\x").push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
      ++i;
    }
  }
  return out;
}

bool failure_is_deterministic(const caf::error& e) {
  if (!e || e.category() != caf::atom("satrap"))
    return false;
  auto c = static_cast<errc>(e.code());
  return c == errc::invalid_config || c == errc::no_resource;
}

errc io_errc_of(std::string_view message) {
  for (int code : {ENOSPC, EDQUOT, EFBIG, EROFS, EACCES, EPERM, ENOTDIR, ENAMETOOLONG, EISDIR})
    if (message.find(std::strerror(code)) != std::string_view::npos)
      return errc::no_resource;
  return errc::io_failure;
}

caf::error exception_error(const std::exception_ptr& e, std::string_view role) {
  auto where = std::string(role) + ": ";
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return make_error(errc::no_resource, where + "out of memory (std::bad_alloc)");
  } catch (const std::exception& x) {
    return make_error(errc::peer_failure, where + "exception: " + x.what());
  } catch (...) {
    return make_error(errc::peer_failure, where + "unknown exception");
  }
}

std::string error_text(const caf::error& e) {
  if (!e)
    return "no error";
  if (e.category() == caf::atom("satrap")) {
    const auto& ctx = e.context();
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      return printable(ctx.get_as<std::string>(0));
    return to_string(static_cast<errc>(e.code()));
  }
  if (e.category() == caf::atom("system"))
    return caf::to_string(static_cast<caf::sec>(e.code()));
  return caf::to_string(e);
}

}  // namespace satrap
