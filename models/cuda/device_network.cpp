// make_device_network and the shared fields input (device_network.hpp).
#include "models/cuda/device_network.hpp"

#include <string>

namespace satrap {

result<std::unique_ptr<device_network>> make_device_network(const dense_model_config& c) {
  if (c.dropout > 0.0f)
    return make_model_error("the CUDA path has no model.dropout");
  switch (c.type) {
    case dense_model_type::dlrm:
      if (c.interaction != dlrm_interaction::dot)
        return make_model_error("the CUDA path has model.interaction dot only (not cat / dot_cat)");
      return make_device_dlrm(c);
    case dense_model_type::dcn_v2: return make_device_dcn_v2(c);
    case dense_model_type::deepfm: return make_device_deepfm(c);
    case dense_model_type::wide_deep: return make_device_wide_deep(c);
    case dense_model_type::torchscript: break;  // a PyTorch module runs in libtorch
  }
  return make_model_error(std::string("the CUDA path has no model type '")
                          + dense_model_type_name(c.type) + "'");
}

device_fields::device_fields(const dense_model_config& c)
    : slots_(c.slots), dim_(c.dim), bottom_(c.dense_features, mlp_sizes(c.bottom, c.dim)) {}

cuda_status device_fields::reserve(int batch) {
  SATRAP_TRY(bottom_.reserve(batch));
  SATRAP_TRY(z_.reserve(static_cast<size_t>(batch) * width()));
  return dx_.reserve(static_cast<size_t>(batch) * dim_);
}

result<const float*> device_fields::forward(const cublas_handle& blas, int batch,
                                            const float* params, const float* dense,
                                            const float* pooled) {
  auto x = bottom_.forward(blas, batch, params, dense);
  if (!x)
    return make_model_error(x.error());
  SATRAP_TRY(
    cuda_concat_rows(blas.stream(), batch, dim_, x.value(), slots_ * dim_, pooled, z_.data()));
  return static_cast<const float*>(z_.data());
}

cuda_status device_fields::backward(const cublas_handle& blas, int batch, const float* params,
                                    const float* dz, float* grads, float* pooled_grad) {
  SATRAP_TRY(
    cuda_split_rows(blas.stream(), batch, dim_, dx_.data(), slots_ * dim_, pooled_grad, dz, false));
  return bottom_.backward(blas, batch, params, dx_.data(), grads, nullptr);
}

}  // namespace satrap
