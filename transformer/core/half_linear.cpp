// y = x W^T + b for float32 x (rows x K) and float16 W (N x K): W is widened to float32 in registers and
// every product accumulates in float32, so y matches F.linear on the float32 weights to float32 rounding
// while reading half the bytes. Built on first use by half_linear.py with fused_step.cpp; needs AVX2, FMA and F16C.
// Also the packed product (half_linear.h's packed_matmul) alone, for tests, and the module's Python bindings.
#include "half_linear.h"

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
  half_matmul(x.data_ptr<float>(), rows, width, half_data(weight), outputs,
              has_bias ? bias->data_ptr<float>() : nullptr, y.data_ptr<float>());
  return y;
}

// The packed product alone, for tests: x (rows, K) float32, packed (blocks, K, kBlock) float16, or int8 with scales
// (N) float32, bias (N) float32.
torch::Tensor packed_linear(torch::Tensor x, torch::Tensor packed, torch::Tensor bias, c10::optional<torch::Tensor> scales) {
  TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "x must be contiguous 2-D float32");
  const bool int8 = packed.scalar_type() == torch::kChar;
  TORCH_CHECK(packed.dim() == 3 && (int8 || packed.scalar_type() == torch::kFloat16) && packed.is_contiguous() &&
              packed.size(1) == x.size(1) && packed.size(2) == kBlock,
              "packed must be contiguous (blocks, K, 64) float16 or int8");
  TORCH_CHECK(bias.scalar_type() == torch::kFloat32 && bias.is_contiguous() && bias.numel() <= packed.size(0) * kBlock &&
              bias.numel() > (packed.size(0) - 1) * kBlock, "bias must hold one float32 per output");
  const bool scaled = scales.has_value() && scales->defined();
  TORCH_CHECK(int8 == scaled, "int8 weights need scales, and only they take them");
  TORCH_CHECK(!scaled || (scales->scalar_type() == torch::kFloat32 && scales->is_contiguous() &&
                          scales->numel() == bias.numel()), "scales must hold one float32 per output");
  auto y = torch::empty({x.size(0), bias.numel()}, x.options());
  if (int8) {
    packed_int8_matmul(x.data_ptr<float>(), x.size(0), x.size(1), packed.data_ptr<int8_t>(), scales->data_ptr<float>(),
                       bias.numel(), bias.data_ptr<float>(), y.data_ptr<float>());
  } else {
    packed_matmul(x.data_ptr<float>(), x.size(0), x.size(1), half_data(packed), bias.numel(), bias.data_ptr<float>(),
                  y.data_ptr<float>());
  }
  return y;
}

// The GIL is released for the call, as torch's own operators do: the server decodes several requests at once in
// threads, and holding it here would let only one of them multiply at a time.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear", &linear, "x (rows, K) float32 @ weight (N, K) float16 ^T + bias (N) float32 -> (rows, N) float32",
        pybind11::arg("x"), pybind11::arg("weight"), pybind11::arg("bias") = pybind11::none(),
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("decoder_step", &decoder_step, "every decoder layer's incremental step and the output projection (fused_step.cpp)",
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("greedy_steps", &greedy_steps, "one row decoded greedily, the whole loop in the kernel (fused_step.cpp)",
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("has_avx512", &has_avx512, "whether the products take their AVX-512 paths (ATTENTION_EXPLORER_NO_AVX512 unset)");
  m.def("packed_linear", &packed_linear,
        "x (rows, K) @ packed float16 weights (blocks, K, 64), or int8 ones times scales (N), + bias (N)",
        pybind11::arg("x"), pybind11::arg("packed"), pybind11::arg("bias"), pybind11::arg("scales") = pybind11::none(),
        pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("select_rows", &select_rows, "rows `rows` of each self-attention cache, its first `filled` positions (fused_step.cpp)",
        pybind11::call_guard<pybind11::gil_scoped_release>());
}
