// Generated training data: grammar text, masked-LM batches, grating images (see synthetic_data.h).
#include "models/train/synthetic_data.h"

#include <cmath>
#include <numbers>

#include "core/error.h"
#include "core/factory.h"
#include "core/philox.h"

namespace tessera::train {

namespace {

// ---- The grammar: "the [ADJ ]NOUN[s] VERB[s] OBJECT. " ----
// A verb agrees with the subject's number and chooses the class of its object.
constexpr double kAdjProb = 0.25;
const std::vector<std::string> kAdjectives = {"big", "small", "red", "old"};
const std::vector<std::string> kNouns = {"cat", "dog", "bird", "fox", "cow", "frog", "bee", "owl"};
struct Verb {
  const char* stem;
  int object_class;
};
const std::vector<Verb> kVerbs = {{"eat", 0},   {"like", 0}, {"read", 1},
                                  {"write", 1}, {"see", 2},  {"chase", 2}};
const std::vector<std::vector<std::string>> kObjects = {{"apples", "bread", "honey", "corn"},
                                                        {"books", "letters", "poems", "maps"},
                                                        {"mice", "fish", "ants", "sheep"}};

// Draws from a counter-based stream: value n of `seed` is philox(seed, n).
class Stream {
 public:
  explicit Stream(uint64_t seed) : seed_(seed) {}
  uint32_t next() { return philox(seed_, counter_++).v[0]; }
  double uniform() { return uint_to_unit_float(next()); }
  size_t pick(size_t n) { return size_t(next() % uint32_t(n)); }

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

std::string sentence(bool adj, size_t a, size_t noun, bool plural, size_t verb, size_t object) {
  std::string s = "the ";
  if (adj) s += kAdjectives[a] + " ";
  s += kNouns[noun] + (plural ? "s " : " ");
  s += std::string(kVerbs[verb].stem) + (plural ? " " : "s ");
  s += kObjects[kVerbs[verb].object_class][object] + ". ";
  return s;
}

}  // namespace

std::vector<std::pair<std::string, double>> grammar_sentences() {
  std::vector<std::pair<std::string, double>> out;
  const double p_noun = 1.0 / double(kNouns.size()), p_verb = 1.0 / double(kVerbs.size());
  for (int adj = 0; adj < 2; ++adj) {
    const size_t num_adj = adj ? kAdjectives.size() : 1;
    const double p_adj = adj ? kAdjProb / double(kAdjectives.size()) : 1.0 - kAdjProb;
    for (size_t a = 0; a < num_adj; ++a)
      for (size_t n = 0; n < kNouns.size(); ++n)
        for (int plural = 0; plural < 2; ++plural)
          for (size_t v = 0; v < kVerbs.size(); ++v) {
            const auto& objects = kObjects[kVerbs[v].object_class];
            for (size_t o = 0; o < objects.size(); ++o) {
              const double p = p_adj * p_noun * 0.5 * p_verb / double(objects.size());
              out.emplace_back(sentence(adj, a, n, plural, v, o), p);
            }
          }
  }
  return out;
}

GrammarStats grammar_stats() {
  GrammarStats s;
  for (const auto& [text, p] : grammar_sentences()) {
    s.entropy_nats -= p * std::log(p);
    s.mean_bytes += p * double(text.size());
    ++s.num_sentences;
  }
  return s;
}

std::string generate_grammar_text(uint64_t seed, int64_t num_bytes) {
  TS_CHECK(num_bytes > 0, "generate_grammar_text", "expected num_bytes > 0, got ", num_bytes);
  Stream rng(seed);
  std::string text;
  text.reserve(size_t(num_bytes) + 64);
  while (int64_t(text.size()) < num_bytes) {
    const bool adj = rng.uniform() < kAdjProb;
    const size_t a = rng.pick(kAdjectives.size());
    const size_t n = rng.pick(kNouns.size());
    const bool plural = rng.pick(2) == 1;
    const size_t v = rng.pick(kVerbs.size());
    const size_t o = rng.pick(kObjects[kVerbs[v].object_class].size());
    text += sentence(adj, a, n, plural, v, o);
  }
  text.resize(size_t(num_bytes));
  return text;
}

MlmBatch mlm_mask(const Tensor& tokens, int64_t first_item, const MlmOptions& o) {
  TS_CHECK(tokens.dim() == 2 && tokens.dtype() == DType::i64, "mlm_mask",
           "expected tokens (B, T) i64, got ", tokens.describe());
  TS_CHECK(o.random_vocab > 0 && o.mask_prob > 0 && o.mask_prob <= 1, "mlm_mask",
           "expected random_vocab > 0 and mask_prob in (0, 1], got ", o.random_vocab, " and ",
           o.mask_prob);
  const int64_t B = tokens.size(0), T = tokens.size(1);
  const Tensor src = tokens.contiguous();
  const int64_t* in = src.data<int64_t>();
  MlmBatch out{empty({B, T}, {.dtype = DType::i64}), full({B, T}, -100.0, {.dtype = DType::i64})};
  int64_t* x = out.input.data<int64_t>();
  int64_t* y = out.labels.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t row = uint64_t(first_item + b);
    int64_t chosen = 0, best_t = 0;
    float best_u = 2.0f;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t i = b * T + t;
      x[i] = in[i];
      const Philox4 r = philox(o.seed, row * uint64_t(T) + uint64_t(t));
      const float u = uint_to_unit_float(r.v[0]);
      if (u < best_u) best_u = u, best_t = t;
      if (u >= o.mask_prob) continue;
      ++chosen;
      y[i] = in[i];
      const float kind = uint_to_unit_float(r.v[1]);
      if (kind < 0.8f)
        x[i] = o.mask_id;
      else if (kind < 0.9f)
        x[i] = int64_t(r.v[2] % uint32_t(o.random_vocab));
    }
    if (chosen == 0) {  // never a row without a label: mask its most likely position
      const int64_t i = b * T + best_t;
      y[i] = in[i];
      x[i] = o.mask_id;
    }
  }
  return out;
}

namespace {

struct Grating {
  double cos_a, sin_a, freq;
};

Grating grating_of(int64_t k) {
  const double a = double(k % 8) * std::numbers::pi / 8.0;
  return {std::cos(a), std::sin(a), 2.0 + double(k / 8)};
}

uint64_t image_seed(uint64_t seed) { return seed ^ 0x5EEDF00DBEEFull; }

}  // namespace

int64_t image_label(int64_t item, const ImageOptions& o) {
  return int64_t(philox(image_seed(o.seed), uint64_t(item)).v[0] % uint32_t(o.num_classes));
}

ImageBatch make_images(const std::vector<int64_t>& items, const ImageOptions& o) {
  TS_CHECK(o.num_classes > 0 && o.image_size > 0 && o.channels > 0, "make_images",
           "expected positive classes, size and channels, got ", o.num_classes, ", ", o.image_size,
           ", ", o.channels);
  const int64_t B = int64_t(items.size()), C = o.channels, S = o.image_size;
  ImageBatch out{empty({B, C, S, S}), empty({B}, {.dtype = DType::i64})};
  float* px = out.images.data<float>();
  int64_t* labels = out.labels.data<int64_t>();
  const uint64_t seed = image_seed(o.seed);
  for (int64_t b = 0; b < B; ++b) {
    const uint64_t item = uint64_t(items[size_t(b)]);
    const Philox4 r = philox(seed, item);
    const int64_t k = int64_t(r.v[0] % uint32_t(o.num_classes));
    labels[b] = k;
    const double phase = 2.0 * std::numbers::pi * uint_to_unit_float(r.v[1]);
    const Grating g = grating_of(k);
    const uint64_t noise_seed = seed + 0x9E3779B97F4A7C15ull * (item + 1);
    for (int64_t y = 0; y < S; ++y)
      for (int64_t x = 0; x < S; ++x) {
        const double arg = 2.0 * std::numbers::pi * g.freq *
                               (double(x) * g.cos_a + double(y) * g.sin_a) / double(S) +
                           phase;
        const float signal = float(std::cos(arg));
        for (int64_t c = 0; c < C; ++c) {
          const uint64_t i = uint64_t((c * S + y) * S + x);
          px[((b * C + c) * S + y) * S + x] =
              signal + float(o.noise) * philox_normal(noise_seed, i);
        }
      }
  }
  return out;
}

std::vector<int64_t> matched_filter_classify(const Tensor& images, const ImageOptions& o) {
  TS_CHECK(images.dim() == 4 && images.dtype() == DType::f32, "matched_filter_classify",
           "expected images (B, C, H, W) f32, got ", images.describe());
  const Tensor x = images.contiguous();
  const int64_t B = x.size(0), C = x.size(1), S = x.size(2);
  const float* px = x.data<float>();
  std::vector<int64_t> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    double best = -1;
    for (int64_t k = 0; k < o.num_classes; ++k) {
      const Grating g = grating_of(k);
      double energy = 0;
      for (int64_t c = 0; c < C; ++c) {
        double re = 0, im = 0;
        for (int64_t y = 0; y < S; ++y)
          for (int64_t xx = 0; xx < S; ++xx) {
            const double arg = 2.0 * std::numbers::pi * g.freq *
                               (double(xx) * g.cos_a + double(y) * g.sin_a) / double(S);
            const double v = px[((b * C + c) * S + y) * S + xx];
            re += v * std::cos(arg);
            im += v * std::sin(arg);
          }
        energy += re * re + im * im;
      }
      if (energy > best) best = energy, out[size_t(b)] = k;
    }
  }
  return out;
}

}  // namespace tessera::train
