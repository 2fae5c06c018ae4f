// tls_guard: clears OpenSSL's per-thread error queue before every TLS read, write and handshake
// step, as OpenSSL requires for SSL_get_error to be right.
//
// CAF 0.17's OpenSSL module runs every TLS session on the middleman's one thread and does not
// clear the queue: after one session fails (a refused handshake, a peer gone without close_notify,
// which OpenSSL 3 reports as an error), the next session's harmless SSL_ERROR_WANT_READ reads as
// SSL_ERROR_SSL and CAF closes that connection too. Any refused client made the head drop its
// nodes. tls_guard.cpp defines SSL_read, SSL_write, SSL_accept and SSL_connect in the satrap
// executable (ELF interposition, as runtime/frame_limit.hpp does for CAF): each clears the queue
// and calls libssl's own (dlvsym RTLD_NEXT).
// SSL_accept and SSL_connect also record the peer certificate of a completed handshake, and
// SSL_free forgets it (runtime/peer_identity.hpp).
// Threading: the queue is per thread; the wrappers keep no state of their own.
#pragma once

#include <string>

namespace satrap {

// "" when the wrappers are the ones the dynamic linker resolves, else why not.
std::string tls_guard_check();

}  // namespace satrap
