// The trainers' built-in data, generated at run time (no download) with structure a model can learn
// and a known best achievable result:
//  - text: sentences of a small probabilistic grammar over bytes ("the big cats chase mice. "),
//    whose exact entropy rate (grammar_stats) is the lowest loss any model can reach;
//  - masked-LM batches (BERT's 80/10/10 rule) over any token windows;
//  - images: oriented sinusoidal gratings, one orientation/frequency per class, random phase and
//    Gaussian noise; a matched-filter classifier gets them right (near 100%).
// Everything is a pure function of (seed, item index), so ranks and resumed runs agree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera::train {

// ---- Text ----

struct GrammarStats {
  double entropy_nats = 0;    // entropy of one sentence, H(S)
  double mean_bytes = 0;      // expected sentence length, E[L]
  int64_t num_sentences = 0;  // distinct sentences (all with positive probability)
  // The stream's entropy rate H(S) / E[L] in nats per byte: sentences are i.i.d. and end with the
  // only ". " of each, so the stream parses uniquely and no predictor beats this cross-entropy on
  // average (windows that start mid-sentence lose a little more at their start).
  double nats_per_token() const { return entropy_nats / mean_bytes; }
};

// Exact, by enumerating every sentence of the grammar with its probability.
GrammarStats grammar_stats();
// Every sentence with its probability (for tests and grammar_stats).
std::vector<std::pair<std::string, double>> grammar_sentences();

// num_bytes bytes of i.i.d. grammar sentences drawn with `seed` (the last one cut off).
std::string generate_grammar_text(uint64_t seed, int64_t num_bytes);

// ---- Masked LM ----

struct MlmOptions {
  double mask_prob = 0.15;     // positions chosen per row (each independently)
  int64_t mask_id = 256;       // the [MASK] token
  int64_t random_vocab = 256;  // the 10% random replacements are drawn from [0, random_vocab)
  uint64_t seed = 0;
};

struct MlmBatch {
  Tensor input;   // (B, T) i64: chosen positions 80% [MASK], 10% a random token, 10% unchanged
  Tensor labels;  // (B, T) i64: the original token at chosen positions, -100 elsewhere
};

// Masks tokens (B, T) i64; row b's draws depend only on (seed, first_item + b), so the same
// sequence is masked the same way whichever rank or batch reads it. Each row gets at least one
// chosen position.
MlmBatch mlm_mask(const Tensor& tokens, int64_t first_item, const MlmOptions& options);

// ---- Images ----

struct ImageOptions {
  int64_t image_size = 32;
  int64_t channels = 3;
  int64_t num_classes = 10;
  double noise = 0.5;  // std of the per-pixel Gaussian noise; the grating's amplitude is 1
  uint64_t seed = 0;
};

struct ImageBatch {
  Tensor images;  // (B, C, H, W) f32
  Tensor labels;  // (B) i64
};

// Class k: a grating cos(2 pi f (x cos a + y sin a) / size + phase) with a = (k % 8) * pi / 8 and
// f = 2 + k / 8 cycles per image, the same on every channel, plus noise. Item i's label, phase and
// noise depend only on (seed, i).
ImageBatch make_images(const std::vector<int64_t>& items, const ImageOptions& options);
int64_t image_label(int64_t item, const ImageOptions& options);

// The matched-filter classifier the claim above rests on: for each class, the energy of the image
// (averaged over channels) along the class's cos and sin gratings; the class with the most wins.
// images (B, C, H, W) f32 -> predicted labels.
std::vector<int64_t> matched_filter_classify(const Tensor& images, const ImageOptions& options);

}  // namespace tessera::train
