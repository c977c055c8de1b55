// The built-in data: the grammar's entropy bound, the generated text, masked-LM batches and the
// grating images (a matched filter classifies them, so near-100% accuracy is achievable).
#include "models/train/synthetic_data.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "core/factory.h"

using namespace tessera;
using namespace tessera::train;

TEST_CASE(
    "the grammar's sentences are distinct, end in the only '. ', and their entropy is exact") {
  const auto sentences = grammar_sentences();
  std::set<std::string> distinct;
  double total = 0;
  for (const auto& [s, p] : sentences) {
    distinct.insert(s);
    total += p;
    REQUIRE(s.size() > 2);
    CHECK(s.substr(s.size() - 2) == ". ");
    CHECK(s.find(". ") == s.size() - 2);
  }
  CHECK(distinct.size() == sentences.size());
  CHECK(total == Approx(1.0).epsilon(1e-12));
  const GrammarStats st = grammar_stats();
  // H = H_b(1/4) + (1/4) ln 4 + ln 8 (noun) + ln 2 (number) + ln 6 (verb) + ln 4 (object).
  const double hb = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  CHECK(st.entropy_nats == Approx(hb + 0.25 * std::log(4.0) + std::log(8.0) + std::log(2.0) +
                                  std::log(6.0) + std::log(4.0)));
  CHECK(st.nats_per_token() > 0.25);
  CHECK(st.nats_per_token() < 0.35);
}

TEST_CASE("generated text is a sequence of grammar sentences with the grammar's frequencies") {
  const std::string text = generate_grammar_text(7, 200000);
  CHECK(text.size() == 200000);
  CHECK(text == generate_grammar_text(7, 200000));
  CHECK(text != generate_grammar_text(8, 200000));
  std::set<std::string> grammar;
  for (const auto& [s, p] : grammar_sentences()) grammar.insert(s);
  size_t pos = 0, count = 0, plural = 0;
  double bytes = 0;
  while (true) {
    const size_t end = text.find(". ", pos);
    if (end == std::string::npos) break;
    const std::string s = text.substr(pos, end + 2 - pos);
    REQUIRE(grammar.count(s) == 1);
    plural += s.find("s eat ") != std::string::npos || s.find("s like ") != std::string::npos ||
              s.find("s read ") != std::string::npos || s.find("s write ") != std::string::npos ||
              s.find("s see ") != std::string::npos || s.find("s chase ") != std::string::npos;
    bytes += double(s.size());
    ++count;
    pos = end + 2;
  }
  CHECK(count > 7000);
  CHECK(double(plural) / double(count) == Approx(0.5).margin(0.03));
  CHECK(bytes / double(count) == Approx(grammar_stats().mean_bytes).epsilon(0.02));
}

TEST_CASE("masked-LM batches: 15% chosen, 80/10/10, labels only there, stable per row") {
  const int64_t B = 64, T = 128;
  std::vector<int64_t> ids(size_t(B * T));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i % 200);
  Tensor tokens = from_vector<int64_t>(ids, {B, T});
  MlmOptions o{.mask_prob = 0.15, .mask_id = 256, .random_vocab = 256, .seed = 3};
  MlmBatch m = mlm_mask(tokens, 1000, o);
  const int64_t* x = m.input.data<int64_t>();
  const int64_t* y = m.labels.data<int64_t>();
  double chosen = 0, masked = 0, kept = 0;
  for (int64_t i = 0; i < B * T; ++i) {
    if (y[i] == -100) {
      CHECK(x[i] == ids[size_t(i)]);
      continue;
    }
    CHECK(y[i] == ids[size_t(i)]);
    ++chosen;
    masked += x[i] == 256;
    kept += x[i] == ids[size_t(i)];
  }
  CHECK(chosen / double(B * T) == Approx(0.15).margin(0.015));
  CHECK(masked / chosen == Approx(0.8).margin(0.04));
  CHECK(kept / chosen == Approx(0.1 + 0.1 / 256).margin(0.03));
  // Rows 10.. of the batch starting at item 1000 equal a batch starting at item 1010.
  MlmBatch tail = mlm_mask(tokens.slice(0, 10, B).contiguous(), 1010, o);
  for (int64_t i = 0; i < (B - 10) * T; ++i) {
    CHECK(tail.input.data<int64_t>()[i] == x[10 * T + i]);
  }
}

TEST_CASE(
    "grating images: labels and pixels depend only on the item; a matched filter gets >= 99%") {
  ImageOptions o{.image_size = 32, .channels = 3, .num_classes = 10, .noise = 0.5, .seed = 11};
  std::vector<int64_t> items;
  for (int64_t i = 0; i < 300; ++i) items.push_back(i * 7 + 3);
  ImageBatch b = make_images(items, o);
  CHECK(b.images.shape() == Shape{300, 3, 32, 32});
  ImageBatch one = make_images({items[5]}, o);
  CHECK(one.labels.data<int64_t>()[0] == b.labels.data<int64_t>()[5]);
  CHECK(one.images.data<float>()[100] == b.images.data<float>()[5 * 3 * 32 * 32 + 100]);
  CHECK(image_label(items[5], o) == b.labels.data<int64_t>()[5]);
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < 300; ++i) ++counts[size_t(b.labels.data<int64_t>()[i])];
  for (int64_t c : counts) CHECK(c > 10);
  const std::vector<int64_t> pred = matched_filter_classify(b.images, o);
  int64_t correct = 0;
  for (int64_t i = 0; i < 300; ++i) correct += pred[size_t(i)] == b.labels.data<int64_t>()[i];
  CHECK(correct >= 297);
}
