// Argument parsing and reporting for `prepare` (see prepare_cli.h).
#include "tools/data/prepare_cli.h"

#include <cstdlib>

#include "core/error.h"

namespace tessera::tools {

const char* const kPrepareUsage =
    "usage: prepare --input FILE [FILE ...] --output OUT.tok --tokenizer byte|gpt2\n"
    "               [--vocab vocab.json --merges merges.txt] [--val-fraction F]\n"
    "               [--append-eot] [--quiet]\n"
    "Tokenises text files into a Tessera token file (and OUT.val.tok holding the last F of the\n"
    "input when --val-fraction is given). gpt2 needs the vocab.json and merges.txt of a GPT-2\n"
    "tokenizer. --append-eot puts <|endoftext|> after each input file.\n";

PrepareCommand parse_prepare_args(const std::vector<std::string>& args) {
  constexpr const char* op = "prepare";
  PrepareCommand cmd;
  data::PrepareOptions& opts = cmd.options;
  const auto value = [&](size_t& i) -> const std::string& {
    TS_CHECK(i + 1 < args.size() && !args[i + 1].starts_with("--"), op, "expected a value after ",
             args[i], ", got ",
             i + 1 < args.size() ? "'" + args[i + 1] + "'" : "the end of the arguments");
    return args[++i];
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      cmd.help = true;
    } else if (a == "--input") {
      opts.inputs.push_back(value(i));
      while (i + 1 < args.size() && !args[i + 1].starts_with("--"))
        opts.inputs.push_back(args[++i]);
    } else if (a == "--output") {
      opts.output = value(i);
    } else if (a == "--tokenizer") {
      opts.tokenizer.kind = value(i);
    } else if (a == "--vocab") {
      opts.tokenizer.vocab_path = value(i);
    } else if (a == "--merges") {
      opts.tokenizer.merges_path = value(i);
    } else if (a == "--val-fraction") {
      const std::string& v = value(i);
      char* end = nullptr;
      opts.val_fraction = std::strtod(v.c_str(), &end);
      TS_CHECK(end != v.c_str() && *end == '\0', op, "expected a number for --val-fraction, got '",
               v, "'");
    } else if (a == "--append-eot") {
      opts.append_end_of_text = true;
    } else if (a == "--quiet") {
      cmd.quiet = true;
    } else {
      TS_FAIL(op, "expected an option of the usage below, got '", a, "'");
    }
  }
  if (cmd.help) return cmd;
  TS_CHECK(!opts.inputs.empty(), op, "expected --input FILE, got none");
  TS_CHECK(!opts.output.empty(), op, "expected --output FILE, got none");
  TS_CHECK(opts.tokenizer.kind == "byte" || opts.tokenizer.kind == "gpt2", op,
           "expected --tokenizer byte or gpt2, got '", opts.tokenizer.kind, "'");
  TS_CHECK(opts.tokenizer.kind == "byte" ||
               (!opts.tokenizer.vocab_path.empty() && !opts.tokenizer.merges_path.empty()),
           op, "expected --vocab and --merges with --tokenizer gpt2, got ",
           opts.tokenizer.vocab_path.empty() ? "no --vocab" : "no --merges");
  return cmd;
}

int run_prepare_command(const std::vector<std::string>& args, std::ostream& out,
                        std::ostream& err) {
  PrepareCommand cmd;
  try {
    cmd = parse_prepare_args(args);
  } catch (const Error& e) {
    err << "prepare: " << e.what() << "\n" << kPrepareUsage;
    return 2;
  }
  if (cmd.help) {
    out << kPrepareUsage;
    return 0;
  }
  data::PrepareOptions& opts = cmd.options;
  opts.progress = cmd.quiet ? nullptr : &err;
  try {
    const data::PrepareResult r = data::prepare_token_files(opts);
    out << "wrote " << r.train_path << ": " << r.train_tokens << " tokens (vocab " << r.vocab_size
        << ")\n";
    if (!r.val_path.empty()) out << "wrote " << r.val_path << ": " << r.val_tokens << " tokens\n";
    out << "read " << r.input_bytes << " bytes in " << r.seconds << " s\n";
    return 0;
  } catch (const Error& e) {
    err << "\nprepare: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tessera::tools
