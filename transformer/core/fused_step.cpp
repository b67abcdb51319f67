// One incremental decoding step of every pre-norm decoder layer, the final LayerNorm and the output projection, in a
// single call: the same arithmetic as DecoderLayer.step + Transformer.decode_step, without the ~90 ATen operator
// calls per step whose dispatch cost more than their arithmetic (fused_step.py says when it runs).
//
// Shapes: B rows, D model width, H heads, hs = D / H, F feed-forward width, V vocabulary, S source length,
// C the self-attention cache's capacity (the model's max_len), t = `position` (target positions already cached).
// Per layer, `weights` holds 18 tensors in this order (float32 unless float16 is said):
//   self-attention norm weight, bias; stacked q|k|v projection (3D outputs), bias (3D); output (D), bias;
//   cross-attention norm weight, bias; query projection (D), bias (D); output (D), bias;
//   feed-forward norm weight, bias; fc1 (F), bias (F); fc2 (D), bias (D);
// then the final norm's weight and bias, the output projection (V outputs) and its bias (V). Each projection is
// float16: packed in blocks of outputs on AVX-512 CPUs (half_linear.h's packed_matmul; fused_step.py's `pack`), else
// row-major (N, K) as half_linear.py keeps it; or, with the opt-in int8 decoding, packed int8, and `scales` then holds
// each projection's per-output scales in that order (6 per layer, then the output projection's), else is empty.
#include "half_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace {

constexpr int64_t kLayerTensors = 18;
constexpr int64_t kLayerProjections = 6;  // self q|k|v, self output, cross query, cross output, fc1, fc2

const float* floats(const torch::Tensor& t) { return t.data_ptr<float>(); }

// y = (x - mean) / sqrt(var + eps) * weight + bias per row of width d, moments accumulated in double
void layer_norm(const float* x, int64_t rows, int64_t d, const float* weight, const float* bias, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    double sum = 0;
    for (int64_t k = 0; k < d; ++k) sum += xr[k];
    const double mean = sum / d;
    double squares = 0;
    for (int64_t k = 0; k < d; ++k) squares += (xr[k] - mean) * (xr[k] - mean);
    const float inverse = static_cast<float>(1.0 / std::sqrt(squares / d + eps));
    const float centre = static_cast<float>(mean);
    for (int64_t k = 0; k < d; ++k) yr[k] = (xr[k] - centre) * inverse * weight[k] + bias[k];
  }
}

// One head's attention: query q (hs) over n keys and values (each n x hs, row-major); key_bias (n) adds -inf where
// a key is padding, or is null. Writes the softmax to probabilities (n) and the weighted values to out (hs).
void attend(const float* q, const float* keys, const float* values, int64_t n, int64_t hs, float scale,
            const float* key_bias, float* probabilities, float* out) {
  float highest = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) {
    const float* key = keys + j * hs;
    float score = 0;
    for (int64_t k = 0; k < hs; ++k) score += q[k] * key[k];
    score *= scale;
    if (key_bias) score += key_bias[j];
    probabilities[j] = score;
    highest = std::max(highest, score);
  }
  float total = 0;
  for (int64_t j = 0; j < n; ++j) total += (probabilities[j] = std::exp(probabilities[j] - highest));
  const float inverse = 1.0f / total;
  std::fill(out, out + hs, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const float p = (probabilities[j] *= inverse);
    const float* value = values + j * hs;
    for (int64_t k = 0; k < hs; ++k) out[k] += p * value[k];
  }
}

// y = x W^T + b through W as fused_step.py passed it: packed float16 (3-D, on AVX-512 CPUs), row-major float16
// (2-D), or packed int8 with one float32 scale per output (the opt-in `int8_decoding`; `scales` set)
void project(const float* x, int64_t rows, int64_t width, const torch::Tensor& weight, const float* scales,
             int64_t outputs, const float* bias, float* y) {
  if (weight.scalar_type() == torch::kChar) {
    TORCH_CHECK(scales != nullptr, "int8 weights come with their scales");
    packed_int8_matmul(x, rows, width, weight.data_ptr<int8_t>(), scales, outputs, bias, y);
  } else if (weight.dim() == 3) {
    packed_matmul(x, rows, width, half_data(weight), outputs, bias, y);
  } else {
    half_matmul(x, rows, width, half_data(weight), outputs, bias, y);
  }
}

void add_into(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

// tokens (B,): each row's newest token, embedded as the model does: token_embedding (V, D) row * embedding_scale +
// positions (max_len, D) row t. self_keys / self_values per layer (B, H, C, hs): positions
// 0..t-1 filled; this step writes position t. cross_keys / cross_values per layer (N, H, S, hs), one per sentence,
// and source_rows (B,) the sentence of each row (beam search's rows share their sentence's). source_bias (N, S):
// 0 for source tokens, -inf for padding; none when no sentence is padded. Returns the logits (B, V), then with `record`
// each layer's self-attention probabilities (B, H, 1, t + 1), its cross-attention probabilities (B, H, 1, S) and its
// output (B, 1, D), layer by layer within each kind.
std::vector<torch::Tensor> decoder_step(torch::Tensor tokens, torch::Tensor token_embedding, double embedding_scale,
                                        torch::Tensor positions, std::vector<torch::Tensor> weights,
                                        std::vector<torch::Tensor> self_keys, std::vector<torch::Tensor> self_values,
                                        std::vector<torch::Tensor> cross_keys, std::vector<torch::Tensor> cross_values,
                                        torch::Tensor source_rows, c10::optional<torch::Tensor> source_bias,
                                        int64_t position, int64_t heads, double eps, bool record,
                                        std::vector<torch::Tensor> scales) {
  const int64_t layers = static_cast<int64_t>(self_keys.size());
  TORCH_CHECK(scales.empty() || static_cast<int64_t>(scales.size()) == kLayerProjections * layers + 1,
              "expected no scales or ", kLayerProjections * layers + 1, ", got ", scales.size());
  // the per-output scales of layer l's projection i (l = layers, i = 0: the output projection), or null
  auto scales_of = [&](int64_t l, int64_t i) { return scales.empty() ? nullptr : floats(scales[kLayerProjections * l + i]); };
  TORCH_CHECK(static_cast<int64_t>(weights.size()) == kLayerTensors * layers + 4, "expected ", kLayerTensors * layers + 4,
              " weight tensors for ", layers, " layers, got ", weights.size());
  TORCH_CHECK(tokens.scalar_type() == torch::kLong && tokens.dim() == 1 && tokens.is_contiguous(),
              "tokens must be a 1-D int64 tensor");
  TORCH_CHECK(token_embedding.is_contiguous() && positions.is_contiguous() && token_embedding.size(1) == positions.size(1),
              "the token and position tables must be contiguous, of one width");
  const int64_t rows = tokens.numel(), d = token_embedding.size(1), head_size = d / heads;
  TORCH_CHECK(position < positions.size(0), "position ", position, " is beyond the model's ", positions.size(0));
  const int64_t source_length = cross_keys.at(0).size(2), capacity = self_keys.at(0).size(2);
  const int64_t ff = weights[15].numel(), vocabulary = weights[kLayerTensors * layers + 3].numel();  // from the biases
  TORCH_CHECK(position < capacity, "position ", position, " is beyond the cache's ", capacity, " positions");
  TORCH_CHECK(source_rows.scalar_type() == torch::kLong && source_rows.numel() == rows && source_rows.is_contiguous(),
              "source_rows must hold one int64 sentence index per row");
  const int64_t* sentence_of = source_rows.data_ptr<int64_t>();
  for (int64_t b = 0; b < rows; ++b) {
    TORCH_CHECK(sentence_of[b] >= 0 && sentence_of[b] < cross_keys.at(0).size(0), "row ", b, "'s sentence ",
                sentence_of[b], " has no source keys");
  }
  const float* bias_rows = source_bias.has_value() && source_bias->defined() ? floats(*source_bias) : nullptr;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_size)), norm_eps = static_cast<float>(eps);
  const int64_t seen = position + 1;

  std::vector<float> x(rows * d);
  const int64_t* token = tokens.data_ptr<int64_t>();
  const float* position_row = floats(positions) + position * d;
  const float token_scale = static_cast<float>(embedding_scale);  // as torch multiplies float32 by a Python float
  for (int64_t b = 0; b < rows; ++b) {
    TORCH_CHECK(token[b] >= 0 && token[b] < token_embedding.size(0), "token ", token[b], " is outside the vocabulary");
    const float* embedding_row = floats(token_embedding) + token[b] * d;
    for (int64_t k = 0; k < d; ++k) x[b * d + k] = embedding_row[k] * token_scale + position_row[k];
  }
  std::vector<float> normed(rows * d), projected(rows * 3 * d), mixed(rows * d), update(rows * d), hidden(rows * ff);
  std::vector<float> scratch(std::max(seen, source_length));
  std::vector<torch::Tensor> self_probabilities, cross_probabilities, outputs;
  const auto options = token_embedding.options();

  for (int64_t l = 0; l < layers; ++l) {
    const torch::Tensor* w = weights.data() + kLayerTensors * l;
    // masked self-attention over the cached prefix and this position
    layer_norm(x.data(), rows, d, floats(w[0]), floats(w[1]), norm_eps, normed.data());
    project(normed.data(), rows, d, w[2], scales_of(l, 0), 3 * d, floats(w[3]), projected.data());
    float* keys = self_keys[l].data_ptr<float>();
    float* values = self_values[l].data_ptr<float>();
    float* self_out = nullptr;
    if (record) {
      self_probabilities.push_back(torch::empty({rows, heads, 1, seen}, options));
      self_out = self_probabilities.back().data_ptr<float>();
    }
    for (int64_t b = 0; b < rows; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t cache = (b * heads + h) * capacity * head_size;
        const float* row = projected.data() + b * 3 * d + h * head_size;
        std::memcpy(keys + cache + position * head_size, row + d, head_size * sizeof(float));
        std::memcpy(values + cache + position * head_size, row + 2 * d, head_size * sizeof(float));
        float* probabilities = self_out ? self_out + (b * heads + h) * seen : scratch.data();
        attend(row, keys + cache, values + cache, seen, head_size, scale, nullptr, probabilities,
               mixed.data() + b * d + h * head_size);
      }
    }
    project(mixed.data(), rows, d, w[4], scales_of(l, 1), d, floats(w[5]), update.data());
    add_into(x.data(), update.data(), rows * d);

    // cross-attention over the encoder output
    layer_norm(x.data(), rows, d, floats(w[6]), floats(w[7]), norm_eps, normed.data());
    project(normed.data(), rows, d, w[8], scales_of(l, 2), d, floats(w[9]), projected.data());
    const float* source_keys = floats(cross_keys[l]);
    const float* source_values = floats(cross_values[l]);
    float* cross_out = nullptr;
    if (record) {
      cross_probabilities.push_back(torch::empty({rows, heads, 1, source_length}, options));
      cross_out = cross_probabilities.back().data_ptr<float>();
    }
    for (int64_t b = 0; b < rows; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t source = (sentence_of[b] * heads + h) * source_length * head_size;
        float* probabilities = cross_out ? cross_out + (b * heads + h) * source_length : scratch.data();
        attend(projected.data() + b * d + h * head_size, source_keys + source, source_values + source, source_length,
               head_size, scale, bias_rows ? bias_rows + sentence_of[b] * source_length : nullptr, probabilities,
               mixed.data() + b * d + h * head_size);
      }
    }
    project(mixed.data(), rows, d, w[10], scales_of(l, 3), d, floats(w[11]), update.data());
    add_into(x.data(), update.data(), rows * d);

    // feed-forward
    layer_norm(x.data(), rows, d, floats(w[12]), floats(w[13]), norm_eps, normed.data());
    project(normed.data(), rows, d, w[14], scales_of(l, 4), ff, floats(w[15]), hidden.data());
    for (float& value : hidden) value = std::max(value, 0.0f);
    project(hidden.data(), rows, ff, w[16], scales_of(l, 5), d, floats(w[17]), update.data());
    add_into(x.data(), update.data(), rows * d);
    if (record) {
      outputs.push_back(torch::empty({rows, 1, d}, options));
      std::copy(x.begin(), x.end(), outputs.back().data_ptr<float>());
    }
  }

  const torch::Tensor* final = weights.data() + kLayerTensors * layers;
  layer_norm(x.data(), rows, d, floats(final[0]), floats(final[1]), norm_eps, normed.data());
  auto logits = torch::empty({rows, vocabulary}, options);
  project(normed.data(), rows, d, final[2], scales_of(layers, 0), vocabulary, floats(final[3]), logits.data_ptr<float>());

  std::vector<torch::Tensor> result{logits};
  result.insert(result.end(), self_probabilities.begin(), self_probabilities.end());
  result.insert(result.end(), cross_probabilities.begin(), cross_probabilities.end());
  result.insert(result.end(), outputs.begin(), outputs.end());
  return result;
}

// Greedy decoding of one row with the whole loop here (decode_single_path's loop for one greedy sentence, without
// a Python round per step): from `token` at `position`, each step's logits get padding and <s> forbidden
// (`never_produced`), then ATen's own softmax, top-k and argmax, as decode_single_path computes them, so every
// number is the same; it stops after EOS or `limit` tokens. Returns the chosen ids (T), their probabilities (T),
// each step's best `topk` ids (T, k) and probabilities (T, k).
std::vector<torch::Tensor> greedy_steps(torch::Tensor token, torch::Tensor token_embedding, double embedding_scale,
                                        torch::Tensor positions, std::vector<torch::Tensor> weights,
                                        std::vector<torch::Tensor> self_keys, std::vector<torch::Tensor> self_values,
                                        std::vector<torch::Tensor> cross_keys, std::vector<torch::Tensor> cross_values,
                                        torch::Tensor source_rows, c10::optional<torch::Tensor> source_bias,
                                        int64_t position, int64_t heads, double eps, torch::Tensor never_produced,
                                        int64_t eos, int64_t limit, int64_t topk, std::vector<torch::Tensor> scales) {
  TORCH_CHECK(token.numel() == 1, "greedy_steps decodes one row, got ", token.numel());
  TORCH_CHECK(limit >= 1, "limit must be at least 1, got ", limit);
  std::vector<int64_t> ids;
  std::vector<float> chosen_probabilities;
  std::vector<torch::Tensor> top_ids, top_probabilities;
  for (int64_t step = 0; step < limit; ++step) {
    auto logits = decoder_step(token, token_embedding, embedding_scale, positions, weights, self_keys, self_values,
                               cross_keys, cross_values, source_rows, source_bias, position + step, heads, eps,
                               false, scales)[0];
    logits.index_fill_(-1, never_produced, -std::numeric_limits<float>::infinity());
    const auto probabilities = logits.softmax(-1);
    auto best = probabilities.topk(std::min<int64_t>(topk, probabilities.size(-1)), -1);
    const auto chosen = probabilities.argmax(-1);
    const auto chosen_probability = probabilities.gather(1, chosen.unsqueeze(1)).squeeze(1);
    top_ids.push_back(std::get<1>(best));
    top_probabilities.push_back(std::get<0>(best));
    ids.push_back(chosen.item<int64_t>());
    chosen_probabilities.push_back(chosen_probability.item<float>());
    if (ids.back() == eos) break;
    token = chosen.contiguous();
  }
  const int64_t steps = static_cast<int64_t>(ids.size());
  return {torch::tensor(ids, torch::kLong), torch::tensor(chosen_probabilities, torch::kFloat32),
          torch::cat(top_ids).reshape({steps, -1}), torch::cat(top_probabilities).reshape({steps, -1})};
}

// Beam search and finished sentences move rows: each self-attention cache (B, H, C, hs) becomes its rows `rows` (R,),
// in that order (rows may repeat), of which only the first `filled` positions are copied: the rest is written
// before it is read.
std::vector<torch::Tensor> select_rows(std::vector<torch::Tensor> caches, torch::Tensor rows, int64_t filled) {
  TORCH_CHECK(rows.scalar_type() == torch::kLong && rows.dim() == 1 && rows.is_contiguous(), "rows must be a 1-D int64 tensor");
  const int64_t* picked = rows.data_ptr<int64_t>();
  const int64_t count = rows.numel();
  std::vector<torch::Tensor> selected;
  selected.reserve(caches.size());
  for (const auto& cache : caches) {
    TORCH_CHECK(cache.is_contiguous() && cache.scalar_type() == torch::kFloat32 && cache.dim() == 4 &&
                filled <= cache.size(2), "a cache must be contiguous float32 (B, H, C, hs) with C >= filled");
    const int64_t batch = cache.size(0), heads = cache.size(1), stride = cache.size(2) * cache.size(3);
    auto out = torch::empty({count, heads, cache.size(2), cache.size(3)}, cache.options());
    const float* from = cache.data_ptr<float>();
    float* to = out.data_ptr<float>();
    for (int64_t r = 0; r < count; ++r) {
      TORCH_CHECK(picked[r] >= 0 && picked[r] < batch, "row ", picked[r], " is outside the ", batch, " rows");
      for (int64_t h = 0; h < heads; ++h) {
        std::memcpy(to + (r * heads + h) * stride, from + (picked[r] * heads + h) * stride,
                    filled * cache.size(3) * sizeof(float));
      }
    }
    selected.push_back(out);
  }
  return selected;
}
