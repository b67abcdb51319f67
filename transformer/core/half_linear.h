// The float16-weight matrix product that half_linear.cpp exposes and fused_step.cpp runs every decoder layer on.
// y (rows x outputs) = x (rows x width) W^T + b for float32 x and float16 W (outputs x width, row-major): W is
// widened to float32 in registers and every product accumulates in float32. Needs AVX2, FMA and F16C.
#pragma once
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <vector>

static inline float horizontal_sum(__m256 v) {
  __m128 low = _mm256_castps256_ps128(v);
  low = _mm_add_ps(low, _mm256_extractf128_ps(v, 1));
  low = _mm_add_ps(low, _mm_movehl_ps(low, low));
  low = _mm_add_ss(low, _mm_movehdup_ps(low));
  return _mm_cvtss_f32(low);
}

// R rows at once: each 16 weights are widened once and multiplied into every row, so several rows cost little more
// than one. Per output, the sum runs in the same order for any R (two chains over k, then the tail), so a row's
// result does not depend on which rows share its call.
template <int R>
static inline void half_matmul_rows(const float* xp, int64_t width, const uint16_t* wp, int64_t outputs,
                                    const float* bp, float* yp, int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    const uint16_t* w_row = wp + n * width;
    __m256 even[R], odd[R];  // two chains per row hide the FMA latency
    for (int m = 0; m < R; ++m) even[m] = odd[m] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= width; k += 16) {
      const __m256 w_even = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w_row + k)));
      const __m256 w_odd = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w_row + k + 8)));
      for (int m = 0; m < R; ++m) {
        even[m] = _mm256_fmadd_ps(w_even, _mm256_loadu_ps(xp + m * width + k), even[m]);
        odd[m] = _mm256_fmadd_ps(w_odd, _mm256_loadu_ps(xp + m * width + k + 8), odd[m]);
      }
    }
    for (int m = 0; m < R; ++m) {
      const float* x_row = xp + m * width;
      float total = horizontal_sum(_mm256_add_ps(even[m], odd[m]));
      for (int64_t tail = k; tail < width; ++tail) total += x_row[tail] * _cvtsh_ss(w_row[tail]);
      yp[m * outputs + n] = bp ? total + bp[n] : total;
    }
  }
}

// The same with 16-wide AVX-512 registers, for CPUs that have them (chosen at run time: the build flags stay AVX2, so
// the module loads anywhere): twice the products per instruction, which is what several rows are bound by. Two
// chains of 16 per row, as the AVX2 path has two of 8: the sums run in another order than the AVX2 path's, the same
// for any R.
template <int R>
__attribute__((target("avx512f"))) static void half_matmul_rows_512(const float* xp, int64_t width, const uint16_t* wp,
                                                                    int64_t outputs, const float* bp, float* yp,
                                                                    int64_t begin, int64_t end) {
  for (int64_t n = begin; n < end; ++n) {
    const uint16_t* w_row = wp + n * width;
    __m512 even[R], odd[R];
    for (int m = 0; m < R; ++m) even[m] = odd[m] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 32 <= width; k += 32) {
      const __m512 w_even = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_row + k)));
      const __m512 w_odd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_row + k + 16)));
      for (int m = 0; m < R; ++m) {
        even[m] = _mm512_fmadd_ps(w_even, _mm512_loadu_ps(xp + m * width + k), even[m]);
        odd[m] = _mm512_fmadd_ps(w_odd, _mm512_loadu_ps(xp + m * width + k + 16), odd[m]);
      }
    }
    for (int m = 0; m < R; ++m) {
      const float* x_row = xp + m * width;
      float total = _mm512_reduce_add_ps(_mm512_add_ps(even[m], odd[m]));
      for (int64_t tail = k; tail < width; ++tail) total += x_row[tail] * _cvtsh_ss(w_row[tail]);
      yp[m * outputs + n] = bp ? total + bp[n] : total;
    }
  }
}

// ATTENTION_EXPLORER_NO_AVX512 (any value) keeps the AVX2 path, so that it can be tested on an AVX-512 machine
static inline bool has_avx512() {
  static const bool supported = __builtin_cpu_supports("avx512f") && std::getenv("ATTENTION_EXPLORER_NO_AVX512") == nullptr;
  return supported;
}

template <int R>
static inline void matmul_rows(bool wide, const float* xp, int64_t width, const uint16_t* wp, int64_t outputs,
                               const float* bp, float* yp, int64_t begin, int64_t end) {
  if (wide) half_matmul_rows_512<R>(xp, width, wp, outputs, bp, yp, begin, end);
  else half_matmul_rows<R>(xp, width, wp, outputs, bp, yp, begin, end);
}

// bias may be null; rows are taken 4 at a time, then the rest
static inline void half_matmul(const float* xp, int64_t rows, int64_t width, const uint16_t* wp, int64_t outputs,
                               const float* bp, float* yp) {
  const bool wide = has_avx512();
  at::parallel_for(0, outputs, 64, [&](int64_t begin, int64_t end) {
    int64_t m = 0;
    for (; m + 4 <= rows; m += 4) matmul_rows<4>(wide, xp + m * width, width, wp, outputs, bp, yp + m * outputs, begin, end);
    const float* x_rest = xp + m * width;
    float* y_rest = yp + m * outputs;
    switch (rows - m) {
      case 3: matmul_rows<3>(wide, x_rest, width, wp, outputs, bp, y_rest, begin, end); break;
      case 2: matmul_rows<2>(wide, x_rest, width, wp, outputs, bp, y_rest, begin, end); break;
      case 1: matmul_rows<1>(wide, x_rest, width, wp, outputs, bp, y_rest, begin, end); break;
      default: break;
    }
  });
}

// On AVX-512 CPUs the fused step's products read the weights packed in blocks of kBlock outputs (fused_step.py's
// `pack`): block b holds W[b * kBlock + j][k] at (b, k, j), the last block padded with zeros. Each block is read front
// to back, and every k adds x[m][k] times kBlock weights to kBlock running sums: no horizontal sums, which bound the
// row-major product above for several rows (a beam-4 step: 0.93 -> 0.66 ms). Each output sums its K products in
// order, one FMA each, so the result is the same for any number of rows and any split into threads. (With AVX2's 16
// registers the same scheme ran 20% slower than the row-major product for four rows, so AVX2 keeps that one.)
constexpr int64_t kBlock = 64;

// 16 consecutive weights widened to float32: float16 ones, or the opt-in int8 ones (fused_step.py's `quantize`: each
// an integer q with W[n][k] ~ q * scale[n], symmetric, one scale per output), sign-extended and converted exactly
__attribute__((target("avx512f"))) static inline __m512 widen16(const uint16_t* w) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}
__attribute__((target("avx512f"))) static inline __m512 widen16(const int8_t* w) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))));
}

// Weight: uint16_t (float16 bits) or int8_t; scales (one per output) only with int8, where each sum is scaled once at
// the end (int8 reads half the bytes of float16, which bound a step on one row); else null
template <typename Weight, int R>
__attribute__((target("avx512f"))) static void packed_rows_512(const float* xp, int64_t width, const Weight* packed,
                                                               const float* scales, int64_t outputs, const float* bp,
                                                               float* yp, int64_t first_block, int64_t last_block) {
  for (int64_t block = first_block; block < last_block; ++block) {
    const Weight* w = packed + block * width * kBlock;
    __m512 sums[R][4];
    for (int m = 0; m < R; ++m) for (int v = 0; v < 4; ++v) sums[m][v] = _mm512_setzero_ps();
    for (int64_t k = 0; k < width; ++k, w += kBlock) {
      __m512 weights[4];
      for (int v = 0; v < 4; ++v) weights[v] = widen16(w + 16 * v);
      for (int m = 0; m < R; ++m) {
        const __m512 x = _mm512_set1_ps(xp[m * width + k]);
        for (int v = 0; v < 4; ++v) sums[m][v] = _mm512_fmadd_ps(weights[v], x, sums[m][v]);
      }
    }
    const int64_t start = block * kBlock, count = std::min<int64_t>(kBlock, outputs - start);
    for (int m = 0; m < R; ++m) {
      alignas(64) float out[kBlock];
      for (int v = 0; v < 4; ++v) _mm512_store_ps(out + 16 * v, sums[m][v]);
      for (int64_t j = 0; j < count; ++j) {
        const float value = scales ? out[j] * scales[start + j] : out[j];
        yp[m * outputs + start + j] = bp ? value + bp[start + j] : value;
      }
    }
  }
}

// y (rows x outputs) = x (rows x width) W^T + b, W packed as above (AVX-512 only); bias may be null; rows 4 at a time
template <typename Weight>
static inline void packed_product(const float* xp, int64_t rows, int64_t width, const Weight* packed,
                                  const float* scales, int64_t outputs, const float* bp, float* yp) {
  TORCH_CHECK(has_avx512(), "packed weights need AVX-512; this CPU takes the row-major product");
  const int64_t blocks = (outputs + kBlock - 1) / kBlock;
  at::parallel_for(0, blocks, 1, [&](int64_t first, int64_t last) {
    int64_t m = 0;
    for (; m + 4 <= rows; m += 4) {
      packed_rows_512<Weight, 4>(xp + m * width, width, packed, scales, outputs, bp, yp + m * outputs, first, last);
    }
    const float* x_rest = xp + m * width;
    float* y_rest = yp + m * outputs;
    switch (rows - m) {
      case 3: packed_rows_512<Weight, 3>(x_rest, width, packed, scales, outputs, bp, y_rest, first, last); break;
      case 2: packed_rows_512<Weight, 2>(x_rest, width, packed, scales, outputs, bp, y_rest, first, last); break;
      case 1: packed_rows_512<Weight, 1>(x_rest, width, packed, scales, outputs, bp, y_rest, first, last); break;
      default: break;
    }
  });
}

static inline void packed_matmul(const float* xp, int64_t rows, int64_t width, const uint16_t* packed, int64_t outputs,
                                 const float* bp, float* yp) {
  packed_product(xp, rows, width, packed, nullptr, outputs, bp, yp);
}

static inline void packed_int8_matmul(const float* xp, int64_t rows, int64_t width, const int8_t* packed,
                                      const float* scales, int64_t outputs, const float* bp, float* yp) {
  packed_product(xp, rows, width, packed, scales, outputs, bp, yp);
}

static inline const uint16_t* half_data(const torch::Tensor& t) {
  return reinterpret_cast<const uint16_t*>(t.data_ptr<at::Half>());
}

// fused_step.cpp
std::vector<torch::Tensor> decoder_step(torch::Tensor tokens, torch::Tensor token_embedding, double embedding_scale,
                                        torch::Tensor positions, std::vector<torch::Tensor> weights,
                                        std::vector<torch::Tensor> self_keys, std::vector<torch::Tensor> self_values,
                                        std::vector<torch::Tensor> cross_keys, std::vector<torch::Tensor> cross_values,
                                        torch::Tensor source_rows, c10::optional<torch::Tensor> source_bias,
                                        int64_t position, int64_t heads, double eps, bool record,
                                        std::vector<torch::Tensor> scales);
std::vector<torch::Tensor> greedy_steps(torch::Tensor token, torch::Tensor token_embedding, double embedding_scale,
                                        torch::Tensor positions, std::vector<torch::Tensor> weights,
                                        std::vector<torch::Tensor> self_keys, std::vector<torch::Tensor> self_values,
                                        std::vector<torch::Tensor> cross_keys, std::vector<torch::Tensor> cross_values,
                                        torch::Tensor source_rows, c10::optional<torch::Tensor> source_bias,
                                        int64_t position, int64_t heads, double eps, torch::Tensor never_produced,
                                        int64_t eos, int64_t limit, int64_t topk, std::vector<torch::Tensor> scales);
std::vector<torch::Tensor> select_rows(std::vector<torch::Tensor> caches, torch::Tensor rows, int64_t filled);
// half_linear.cpp
torch::Tensor packed_linear(torch::Tensor x, torch::Tensor packed, torch::Tensor bias,
                            c10::optional<torch::Tensor> scales);
