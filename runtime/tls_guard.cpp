#include "runtime/tls_guard.hpp"

#include "runtime/peer_identity.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <dlfcn.h>

namespace {

template <class Fn>
Fn real(const char* name) {
  auto* p = dlvsym(RTLD_NEXT, name, "OPENSSL_3.0.0");
  if (!p)
    p = dlsym(RTLD_NEXT, name);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static auto fn = real<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return fn(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static auto fn = real<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return fn(ssl, buf, num);
}

// A completed handshake records the peer's verified certificate for its socket
// (runtime/peer_identity.hpp).
int SSL_accept(SSL* ssl) {
  static auto fn = real<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  auto r = fn(ssl);
  if (r == 1)
    satrap::peer_identity_tls_established(ssl);
  return r;
}

int SSL_connect(SSL* ssl) {
  static auto fn = real<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  auto r = fn(ssl);
  if (r == 1)
    satrap::peer_identity_tls_established(ssl);
  return r;
}

void SSL_free(SSL* ssl) {
  static auto fn = real<void (*)(SSL*)>("SSL_free");
  if (ssl)
    satrap::peer_identity_tls_freed(ssl);
  fn(ssl);
}

}  // extern "C"

namespace satrap {

std::string tls_guard_check() {
  for (auto [name, mine] :
       {std::pair<const char*, void*>{"SSL_read", reinterpret_cast<void*>(&SSL_read)},
        {"SSL_write", reinterpret_cast<void*>(&SSL_write)},
        {"SSL_accept", reinterpret_cast<void*>(&SSL_accept)},
        {"SSL_connect", reinterpret_cast<void*>(&SSL_connect)},
        {"SSL_free", reinterpret_cast<void*>(&SSL_free)}})
    if (dlsym(RTLD_DEFAULT, name) != mine)
      return std::string("the OpenSSL error-queue guard is not interposed on ") + name
             + ": a failed TLS peer may close other connections";
  return "";
}

}  // namespace satrap
