// The text -> token file pipeline and its command line: streaming equals whole-text encoding,
// validation split, end-of-text markers, progress rendering, and clear errors.
#include "models/data/prepare.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "models/data/bpe_tokenizer.h"
#include "models/data/progress.h"
#include "models/data/token_file.h"
#include "tests/models/data/data_test_util.h"
#include "tools/data/prepare_cli.h"

using namespace tessera;
using namespace tessera::data;
using tessera::data::testing::fixture;
using tessera::data::testing::read_file;
using tessera::data::testing::ScratchDir;
using tessera::data::testing::write_file;

namespace {

std::vector<uint32_t> tokens_of(const std::string& path) {
  const TokenFile f = TokenFile::open(path);
  std::vector<uint32_t> out(f.size());
  for (uint64_t i = 0; i < f.size(); ++i) out[i] = f[i];
  return out;
}

std::string sample_text() {
  // Every reference case joined: letters, numbers, all kinds of white space, non-Latin scripts.
  const nlohmann::json j = nlohmann::json::parse(read_file(fixture("bpe_cases.json")));
  std::string text;
  for (const auto& c : j.at("cases")) text += c.at("text").get<std::string>() + " ";
  return text;
}

TokenizerSpec gpt2_spec() {
  return {
      .kind = "gpt2", .vocab_path = fixture("vocab.json"), .merges_path = fixture("merges.txt")};
}

template <typename T>
std::vector<T> concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

TEST_CASE("prepare with the byte tokenizer writes the bytes, streamed in small chunks",
          "[prepare]") {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 3000; ++i) text.push_back(char(i * 31 % 256));
  write_file(dir.file("a.txt"), text);
  const PrepareResult r = prepare_token_files({.inputs = {dir.file("a.txt")},
                                               .output = dir.file("a.tok"),
                                               .chunk_bytes = 7,
                                               .max_pending_bytes = 64});
  CHECK(r.train_tokens == 3000);
  CHECK(r.input_bytes == 3000);
  CHECK(r.val_path.empty());
  const std::vector<uint32_t> ids = tokens_of(dir.file("a.tok"));
  REQUIRE(ids.size() == text.size());
  for (size_t i = 0; i < ids.size(); ++i)
    REQUIRE(ids[i] == uint32_t(static_cast<unsigned char>(text[i])));
  CHECK(TokenFile::open(dir.file("a.tok")).vocab_size() == 256);
}

TEST_CASE("prepare with GPT-2 BPE equals encoding each whole file", "[prepare]") {
  ScratchDir dir;
  const std::string text = sample_text();
  const std::string second = "A second document. It's short, with 12 numbers.\n";
  write_file(dir.file("a.txt"), text);
  write_file(dir.file("b.txt"), second);
  const BpeTokenizer tok = BpeTokenizer::from_files(fixture("vocab.json"), fixture("merges.txt"));
  for (const size_t chunk : {size_t(13), size_t(100), size_t(1) << 20}) {
    const PrepareResult r = prepare_token_files({.inputs = {dir.file("a.txt"), dir.file("b.txt")},
                                                 .output = dir.file("g.tok"),
                                                 .tokenizer = gpt2_spec(),
                                                 .append_end_of_text = true,
                                                 .chunk_bytes = chunk,
                                                 .max_pending_bytes = size_t(1) << 20});
    const uint32_t eot = *tok.end_of_text();
    const std::vector<uint32_t> want =
        concat(concat(concat(tok.encode(text), {eot}), tok.encode(second)), {eot});
    REQUIRE(tokens_of(dir.file("g.tok")) == want);
    CHECK(r.train_tokens == want.size());
    CHECK(r.vocab_size == tok.vocab_size());
  }
}

TEST_CASE("prepare cuts text without safe points at character boundaries and still round-trips",
          "[prepare]") {
  ScratchDir dir;
  std::string text;
  for (int i = 0; i < 100; ++i) text += "é中x";  // 600 bytes, one pre-token, no ASCII space
  write_file(dir.file("w.txt"), text);
  prepare_token_files({.inputs = {dir.file("w.txt")},
                       .output = dir.file("w.tok"),
                       .tokenizer = gpt2_spec(),
                       .chunk_bytes = 16,
                       .max_pending_bytes = 64});
  const BpeTokenizer tok = BpeTokenizer::from_files(fixture("vocab.json"), fixture("merges.txt"));
  CHECK(tok.decode(tokens_of(dir.file("w.tok"))) == text);
}

TEST_CASE("prepare splits the tail into a validation file", "[prepare]") {
  ScratchDir dir;
  SECTION("byte tokenizer: exactly the last fraction of the bytes") {
    std::string text(1000, 'x');
    for (size_t i = 0; i < text.size(); ++i) text[i] = char('a' + i % 26);
    write_file(dir.file("t.txt"), text.substr(0, 600));
    write_file(dir.file("u.txt"), text.substr(600));
    const PrepareResult r = prepare_token_files({.inputs = {dir.file("t.txt"), dir.file("u.txt")},
                                                 .output = dir.file("s.tok"),
                                                 .val_fraction = 0.1,
                                                 .chunk_bytes = 64,
                                                 .max_pending_bytes = 64});
    CHECK(r.val_path == dir.file("s.val.tok"));
    CHECK(r.train_tokens == 900);
    CHECK(r.val_tokens == 100);
    const std::vector<uint32_t> both =
        concat(tokens_of(dir.file("s.tok")), tokens_of(dir.file("s.val.tok")));
    CHECK(std::string(both.begin(), both.end()) == text);
  }
  SECTION("GPT-2: cut at a safe point, train + val equals the whole encoding") {
    const std::string text = sample_text();
    write_file(dir.file("t.txt"), text);
    const PrepareResult r = prepare_token_files({.inputs = {dir.file("t.txt")},
                                                 .output = dir.file("s.tok"),
                                                 .tokenizer = gpt2_spec(),
                                                 .val_fraction = 0.2,
                                                 .chunk_bytes = 50,
                                                 .max_pending_bytes = 1000});
    const BpeTokenizer tok = BpeTokenizer::from_files(fixture("vocab.json"), fixture("merges.txt"));
    const std::vector<uint32_t> train = tokens_of(dir.file("s.tok")),
                                val = tokens_of(dir.file("s.val.tok"));
    CHECK(concat(train, val) == tok.encode(text));
    const double val_bytes = double(tok.decode(val).size());
    CHECK(val_bytes >= 0.2 * double(text.size()));
    CHECK(val_bytes < 0.2 * double(text.size()) + 200);  // cut points are never far apart here
    CHECK(r.val_tokens == val.size());
  }
}

TEST_CASE("prepare errors name the problem and leave no output behind", "[prepare]") {
  ScratchDir dir;
  write_file(dir.file("a.txt"), "some text");
  const std::string out = dir.file("o.tok");
  REQUIRE_THROWS_WITH(
      prepare_token_files({.inputs = {dir.file("a.txt"), dir.file("missing.txt")}, .output = out}),
      Catch::Contains("missing.txt") && Catch::Contains("no such file"));
  REQUIRE_THROWS_WITH(prepare_token_files({.inputs = {dir.path()}, .output = out}),
                      Catch::Contains("not a file"));
  REQUIRE_THROWS_WITH(prepare_token_files({.inputs = {}, .output = out}),
                      Catch::Contains("at least one input"));
  REQUIRE_THROWS_WITH(
      prepare_token_files({.inputs = {dir.file("a.txt")}, .output = out, .val_fraction = 1.0}),
      Catch::Contains("fraction in [0, 1)"));
  REQUIRE_THROWS_WITH(
      prepare_token_files(
          {.inputs = {dir.file("a.txt")}, .output = out, .append_end_of_text = true}),
      Catch::Contains("'byte' which has none"));
  REQUIRE_THROWS_WITH(prepare_token_files({.inputs = {dir.file("a.txt")},
                                           .output = out,
                                           .tokenizer = gpt2_spec(),
                                           .val_fraction = 0.01}),
                      Catch::Contains("expected validation tokens"));
  write_file(dir.file("empty.txt"), "");
  REQUIRE_THROWS_WITH(prepare_token_files({.inputs = {dir.file("empty.txt")}, .output = out}),
                      Catch::Contains("no training tokens"));
  CHECK_FALSE(std::filesystem::exists(out));
  CHECK_FALSE(std::filesystem::exists(val_output_path(out)));
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path()), {}) ==
        2);  // the inputs only
}

TEST_CASE("prepare refuses an output that is one of its inputs, also through links", "[prepare]") {
  namespace fs = std::filesystem;
  ScratchDir dir;
  const std::string text = "the text nobody may overwrite\n";
  write_file(dir.file("a.txt"), text);
  write_file(dir.file("b.txt"), "another file\n");
  fs::create_symlink(dir.file("a.txt"), dir.file("sym.txt"));
  fs::create_hard_link(dir.file("a.txt"), dir.file("hard.txt"));
  fs::create_directory(dir.file("sub"));
  const std::string a = dir.file("a.txt");
  const auto refused = [&](const std::vector<std::string>& inputs, const std::string& output,
                           double val_fraction = 0.0) {
    INFO("output " << output);
    REQUIRE_THROWS_WITH(
        prepare_token_files({.inputs = inputs, .output = output, .val_fraction = val_fraction}),
        Catch::Contains("(the same file)") && Catch::Contains("choose another output path"));
  };
  refused({a}, a);                          // the very same path
  refused({dir.file("b.txt"), a}, a);       // any of the inputs
  refused({a}, dir.file("sub/../a.txt"));   // another spelling
  refused({a}, dir.file("sym.txt"));        // a symlink to the input
  refused({dir.file("sym.txt")}, a);        // the input through a symlink
  refused({a}, dir.file("hard.txt"));       // a hard link to the input
  write_file(dir.file("c.val.tok"), text);  // the validation file would replace an input
  REQUIRE_THROWS_WITH(
      prepare_token_files(
          {.inputs = {dir.file("c.val.tok")}, .output = dir.file("c.tok"), .val_fraction = 0.5}),
      Catch::Contains("validation output") && Catch::Contains("c.val.tok"));
  // Nothing was touched: the input keeps its text and no token or temporary file appeared.
  CHECK(read_file(a) == text);
  CHECK(read_file(dir.file("c.val.tok")) == text);
  CHECK(fs::is_symlink(dir.file("sym.txt")));
  CHECK(std::distance(fs::directory_iterator(dir.path()), {}) == 6);
  CHECK_FALSE(fs::exists(dir.file("c.tok")));
  // A different file of the same content is fine.
  write_file(dir.file("copy.txt"), text);
  CHECK(prepare_token_files({.inputs = {a}, .output = dir.file("copy.txt")}).train_tokens ==
        text.size());

  std::ostringstream out, err;
  CHECK(tools::run_prepare_command(
            {"--input", a, "--output", dir.file("sym.txt"), "--tokenizer", "byte", "--quiet"}, out,
            err) == 1);
  CHECK(err.str().find("(the same file)") != std::string::npos);
  CHECK(read_file(a) == text);
}

TEST_CASE("validation path and progress rendering", "[prepare]") {
  CHECK(val_output_path("data/train.tok") == "data/train.val.tok");
  CHECK(val_output_path("corpus.bin") == "corpus.bin.val.tok");
  const std::string line = ProgressBar::render("prepare", 50'000'000, 100'000'000, 10.0);
  CHECK(line == "prepare [############------------]  50.0% 50.0/100.0 MB 5.0 MB/s ETA 0:10");
  std::ostringstream os;
  ProgressBar bar(&os, "prepare", 10);
  bar.finish("3 train tokens");
  CHECK(os.str().find("100.0%") != std::string::npos);
  CHECK(os.str().ends_with("3 train tokens\n"));
}

TEST_CASE("prepare command line", "[prepare]") {
  ScratchDir dir;
  write_file(dir.file("a.txt"), "hello world");
  write_file(dir.file("b.txt"), " and more");
  const tools::PrepareCommand cmd = tools::parse_prepare_args(
      {"--input", "x.txt", "y.txt", "--output", "o.tok", "--tokenizer", "gpt2", "--vocab", "v.json",
       "--merges", "m.txt", "--val-fraction", "0.05", "--append-eot", "--quiet"});
  CHECK(cmd.options.inputs == std::vector<std::string>{"x.txt", "y.txt"});
  CHECK(cmd.options.val_fraction == 0.05);
  CHECK(cmd.options.append_end_of_text);
  CHECK(cmd.quiet);
  CHECK(cmd.options.tokenizer.merges_path == "m.txt");
  REQUIRE_THROWS_WITH(
      tools::parse_prepare_args({"--input", "a", "--output", "o", "--tokenizer", "gpt2"}),
      Catch::Contains("--vocab and --merges"));
  REQUIRE_THROWS_WITH(tools::parse_prepare_args({"--input", "a", "--output"}),
                      Catch::Contains("value after --output"));
  REQUIRE_THROWS_WITH(tools::parse_prepare_args({"--input", "a", "--output", "o", "--tokenizer",
                                                 "byte", "--val-fraction", "x"}),
                      Catch::Contains("number for --val-fraction"));
  REQUIRE_THROWS_WITH(tools::parse_prepare_args({"--frobnicate"}),
                      Catch::Contains("'--frobnicate'"));

  std::ostringstream out, err;
  CHECK(tools::run_prepare_command({"--input", dir.file("a.txt"), dir.file("b.txt"), "--output",
                                    dir.file("o.tok"), "--tokenizer", "byte"},
                                   out, err) == 0);
  CHECK(out.str().find("20 tokens (vocab 256)") != std::string::npos);
  CHECK(err.str().find("100.0%") != std::string::npos);  // the progress bar's last state
  CHECK(tokens_of(dir.file("o.tok")).size() == 20);
  std::ostringstream out2, err2;
  CHECK(tools::run_prepare_command({"--input", dir.file("nope.txt"), "--output", dir.file("p.tok"),
                                    "--tokenizer", "byte", "--quiet"},
                                   out2, err2) == 1);
  CHECK(err2.str().find("nope.txt") != std::string::npos);
  std::ostringstream out3, err3;
  CHECK(tools::run_prepare_command({"--tokenizer"}, out3, err3) == 2);
  CHECK(err3.str().find("usage: prepare") != std::string::npos);
}
