// y = x W^T + b for float32 x (rows x K) and float16 W (N x K): W is widened to float32 in registers and
// every product accumulates in float32, so y matches F.linear on the float32 weights to float32 rounding
// while reading half the bytes. Built on first use by half_linear.py; needs AVX2, FMA and F16C.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

static inline float horizontal_sum(__m256 v) {
  __m128 low = _mm256_castps256_ps128(v);
  low = _mm_add_ps(low, _mm256_extractf128_ps(v, 1));
  low = _mm_add_ps(low, _mm_movehl_ps(low, low));
  low = _mm_add_ss(low, _mm_movehdup_ps(low));
  return _mm_cvtss_f32(low);
}

torch::Tensor linear(torch::Tensor x, torch::Tensor weight, c10::optional<torch::Tensor> bias) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.device().is_cpu(), "x must be 2-D float32 on the CPU");
  TORCH_CHECK(weight.dim() == 2 && weight.scalar_type() == torch::kFloat16 && weight.is_contiguous(),
              "weight must be a contiguous 2-D float16 tensor");
  TORCH_CHECK(x.size(1) == weight.size(1), "x has ", x.size(1), " features, weight expects ", weight.size(1));
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias) {
    TORCH_CHECK(bias->scalar_type() == torch::kFloat32 && bias->is_contiguous() && bias->numel() == weight.size(0),
                "bias must be contiguous float32 with one value per output");
  }
  x = x.contiguous();
  const int64_t rows = x.size(0), width = x.size(1), outputs = weight.size(0);
  auto y = torch::empty({rows, outputs}, x.options());
  const float* xp = x.data_ptr<float>();
  const uint16_t* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::Half>());
  const float* bp = has_bias ? bias->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  at::parallel_for(0, outputs, 64, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) {
      const uint16_t* w_row = wp + n * width;  // read from memory once, then from L1 for the other rows
      for (int64_t m = 0; m < rows; ++m) {
        const float* x_row = xp + m * width;
        __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();  // two chains hide the FMA latency
        int64_t k = 0;
        for (; k + 16 <= width; k += 16) {
          even = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w_row + k))),
                                 _mm256_loadu_ps(x_row + k), even);
          odd = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w_row + k + 8))),
                                _mm256_loadu_ps(x_row + k + 8), odd);
        }
        float total = horizontal_sum(_mm256_add_ps(even, odd));
        for (; k < width; ++k) total += x_row[k] * _cvtsh_ss(w_row[k]);
        yp[m * outputs + n] = has_bias ? total + bp[n] : total;
      }
    }
  });
  return y;
}

// The GIL is released for the call, as torch's own operators do: the server decodes several requests at once in
// threads, and holding it here would let only one of them multiply at a time.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear", &linear, "x (rows, K) float32 @ weight (N, K) float16 ^T + bias (N) float32 -> (rows, N) float32",
        pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias") = pybind11::none(),
        pybind11::call_guard<pybind11::gil_scoped_release>());
}
