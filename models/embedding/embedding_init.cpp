#include "models/embedding/embedding_options.hpp"

#include <cmath>

#include "models/embedding/id_map.hpp"

namespace satrap {

namespace {

double unit_of(uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }  // [0, 1)

}  // namespace

void embedding_init_row(const embedding_options& options, uint64_t id, float* out) {
  uint64_t base = mix64(id ^ mix64(options.seed + 0x5851f42d4c957f2dULL));
  const double s = options.init_scale;
  for (int d = 0; d < options.dim; ++d) {
    uint64_t r = mix64(base + static_cast<uint64_t>(d) * 0x9e3779b97f4a7c15ULL);
    switch (options.init) {
      case embedding_init_kind::uniform:
        out[d] = static_cast<float>((2.0 * unit_of(r) - 1.0) * s);
        break;
      case embedding_init_kind::normal: {  // Box-Muller from two independent draws
        double u1 = 1.0 - unit_of(r), u2 = unit_of(mix64(r ^ 0xd1b54a32d192ed03ULL));
        out[d] =
          static_cast<float>(s * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
        break;
      }
      case embedding_init_kind::zeros: out[d] = 0.0f; break;
    }
  }
}

}  // namespace satrap
