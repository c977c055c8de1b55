// The streaming text -> token file pipeline (see prepare.h).
#include "models/data/prepare.h"

#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "core/error.h"
#include "models/data/progress.h"
#include "models/data/token_file.h"

namespace tessera::data {

namespace {

constexpr const char* kOp = "prepare";

// The last UTF-8 character boundary at or before `limit` (a cut of last resort).
size_t char_boundary(std::string_view text, size_t limit) {
  size_t p = limit;
  while (p > 0 && p < text.size() && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
  return p == 0 ? limit : p;
}

// Routes encoded text to the training writer until the split, then to the validation writer.
struct Sink {
  const Tokenizer& tok;
  TokenFileWriter& train;
  TokenFileWriter* val;
  bool to_val = false;
  std::vector<uint32_t> ids;

  void emit(std::string_view text) {
    ids.clear();
    tok.encode(text, ids);
    (to_val ? *val : train).append(ids);
  }
};

// True when writing `output` would replace `input`: the same inode (hard links, symlinks) when both
// exist, else the same canonical path (a missing output cannot be an existing input).
bool same_file(const std::string& input, const std::string& output) {
  struct stat in_st, out_st;
  if (::stat(input.c_str(), &in_st) == 0 && ::stat(output.c_str(), &out_st) == 0)
    return in_st.st_dev == out_st.st_dev && in_st.st_ino == out_st.st_ino;
  std::error_code ec1, ec2;
  const std::filesystem::path a = std::filesystem::weakly_canonical(input, ec1);
  const std::filesystem::path b = std::filesystem::weakly_canonical(output, ec2);
  return !ec1 && !ec2 && a == b;
}

// Refuses an output path (the training file or its validation file) that is one of the inputs,
// before anything is written.
void check_output_not_input(const PrepareOptions& options, const std::string& out,
                            const char* what) {
  for (const std::string& input : options.inputs) {
    TS_CHECK(!same_file(input, out), kOp, "expected the ", what, " '", out,
             "' to differ from the inputs, got the input '", input,
             "' itself (the same file): writing it would replace the text; choose another output "
             "path");
  }
}

}  // namespace

std::string val_output_path(const std::string& output) {
  const std::string ext = ".tok";
  if (output.size() > ext.size() && output.ends_with(ext))
    return output.substr(0, output.size() - ext.size()) + ".val" + ext;
  return output + ".val.tok";
}

PrepareResult prepare_token_files(const PrepareOptions& options) {
  const auto start_time = std::chrono::steady_clock::now();
  TS_CHECK(!options.inputs.empty(), kOp, "expected at least one input file, got none");
  TS_CHECK(!options.output.empty(), kOp, "expected an output path, got none");
  TS_CHECK(options.val_fraction >= 0.0 && options.val_fraction < 1.0, kOp,
           "expected a validation fraction in [0, 1), got ", options.val_fraction);
  TS_CHECK(options.chunk_bytes >= 1 && options.max_pending_bytes >= options.chunk_bytes, kOp,
           "expected 1 <= chunk_bytes <= max_pending_bytes, got ", options.chunk_bytes, " and ",
           options.max_pending_bytes);
  check_output_not_input(options, options.output, "output");
  if (options.val_fraction > 0.0)
    check_output_not_input(options, val_output_path(options.output), "validation output");
  uint64_t total = 0;
  for (const std::string& input : options.inputs) {
    std::error_code ec;
    TS_CHECK(std::filesystem::is_regular_file(input, ec), kOp, "expected a readable text file '",
             input, "', got ",
             std::filesystem::exists(input, ec) ? "something that is not a file" : "no such file");
    total += std::filesystem::file_size(input);
  }
  const std::unique_ptr<Tokenizer> tok = make_tokenizer(options.tokenizer);
  const std::optional<uint32_t> eot = tok->end_of_text();
  TS_CHECK(!options.append_end_of_text || eot.has_value(), kOp, "expected a tokenizer with an ",
           "end-of-text token to append one, got '", tok->name(), "' which has none");

  PrepareResult result;
  result.train_path = options.output;
  result.input_bytes = total;
  result.vocab_size = tok->vocab_size();
  const bool split = options.val_fraction > 0.0;
  TokenFileWriter train(options.output, uint64_t(tok->vocab_size()));
  std::unique_ptr<TokenFileWriter> val;
  if (split) {
    result.val_path = val_output_path(options.output);
    val = std::make_unique<TokenFileWriter>(result.val_path, uint64_t(tok->vocab_size()));
  }
  // Validation text starts at the last cut point at or before this byte of the concatenated input.
  const uint64_t split_at = total - uint64_t(std::llround(options.val_fraction * double(total)));
  Sink sink{*tok, train, val.get(), false, {}};
  ProgressBar bar(options.progress, "prepare", total);
  uint64_t consumed = 0;  // bytes of input already encoded
  std::string buf;
  for (const std::string& input : options.inputs) {
    std::ifstream in(input, std::ios::binary);
    TS_CHECK(in.good(), kOp, "expected a readable text file '", input, "', got an open failure");
    buf.clear();
    bool eof = false;
    while (!eof) {
      const size_t have = buf.size();
      buf.resize(have + options.chunk_bytes);
      in.read(buf.data() + have, std::streamsize(options.chunk_bytes));
      buf.resize(have + size_t(in.gcount()));
      TS_CHECK(!in.bad(), kOp, "expected to read '", input, "', got a read error");
      eof = in.eof();
      if (split && !sink.to_val && consumed + buf.size() >= split_at) {
        const size_t limit = size_t(split_at - consumed);
        const size_t p = (eof && limit == buf.size())
                             ? limit
                             : tok->safe_split(std::string_view(buf).substr(0, limit));
        sink.emit(std::string_view(buf).substr(0, p));
        buf.erase(0, p);
        consumed += p;
        sink.to_val = true;
      }
      size_t cut;
      if (eof) {
        cut = buf.size();
      } else {
        cut = tok->safe_split(buf);
        if (cut == 0) {
          if (buf.size() < options.max_pending_bytes) continue;  // read on to a safe point
          cut = char_boundary(buf, buf.size());
        }
      }
      sink.emit(std::string_view(buf).substr(0, cut));
      buf.erase(0, cut);
      consumed += cut;
      bar.update(consumed);
    }
    if (options.append_end_of_text) (sink.to_val ? *val : train).append(std::span(&*eot, 1));
  }
  result.train_tokens = train.count();
  result.val_tokens = split ? val->count() : 0;
  TS_CHECK(result.train_tokens > 0, kOp, "expected some text to tokenise in the inputs, got ",
           total, " bytes and no training tokens");
  TS_CHECK(!split || result.val_tokens > 0, kOp, "expected validation tokens with fraction ",
           options.val_fraction, ", got none: the inputs (", total,
           " bytes) are too small or have no cut point in their last part");
  train.finish();
  if (split) val->finish();
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  bar.finish(str_cat(result.train_tokens, " train tokens",
                     split ? str_cat(", ", result.val_tokens, " val tokens") : std::string()));
  return result;
}

}  // namespace tessera::data
