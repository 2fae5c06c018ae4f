#include "runtime/error.hpp"

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace satrap {

const char* to_string(errc x) {
  switch (x) {
    case errc::ok: return "ok";
    case errc::invalid_config: return "invalid_config";
    case errc::unauthorized: return "unauthorized";
    case errc::io_failure: return "io_failure";
    case errc::peer_failure: return "peer_failure";
    case errc::invalid_payload: return "invalid_payload";
  }
  return "unknown";
}

std::string error_text(const caf::error& e) {
  if (!e)
    return "no error";
  if (e.category() == caf::atom("satrap")) {
    const auto& ctx = e.context();
    if (ctx.size() == 1 && ctx.match_element<std::string>(0))
      return ctx.get_as<std::string>(0);
    return to_string(static_cast<errc>(e.code()));
  }
  if (e.category() == caf::atom("system"))
    return caf::to_string(static_cast<caf::sec>(e.code()));
  return caf::to_string(e);
}

}  // namespace satrap
