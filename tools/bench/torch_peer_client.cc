// Spawning the PyTorch peer, with OpenBLAS on the host ISA's kernels: once per request (spec file
// out, JSON in) or kept running for a stream of requests (TorchPeerSession).
#include "tools/bench/torch_peer_client.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tools/bench/openblas_peer.h"

namespace tessera::bench {
namespace {

namespace fs = std::filesystem;

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Writes the case list to a private temporary file; removed by the destructor.
class SpecFile {
 public:
  explicit SpecFile(const std::string& json) {
    std::string tmpl = (fs::temp_directory_path() / "tessera_bench_spec_XXXXXX").string();
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) return;
    ::close(fd);
    path_ = tmpl;
    std::ofstream(path_) << json;
  }
  ~SpecFile() {
    if (!path_.empty()) std::remove(path_.c_str());
  }
  SpecFile(const SpecFile&) = delete;
  SpecFile& operator=(const SpecFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

PeerResult parse_peer_output(const std::string& text) {
  PeerResult r;
  // The JSON object is the last line; anything before it is stray library chatter.
  const size_t start = text.rfind("\n{");
  const std::string json_text = start == std::string::npos ? text : text.substr(start + 1);
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    r.reason = text.empty() ? "the peer printed nothing"
                            : "the peer's output is not JSON: " + text.substr(0, 200);
    return r;
  }
  if (j.contains("error")) {
    r.reason = j["error"].is_string() ? j["error"].get<std::string>() : j["error"].dump();
    return r;
  }
  if (!j.contains("results") || !j["results"].is_array()) {
    r.reason = "the peer's JSON has no \"results\" list";
    return r;
  }
  r.torch_version = j.value("torch_version", "?");
  r.blas = j.value("blas", "?");
  r.device = j.value("device", "");
  r.threads = j.value("threads", 0);
  for (const auto& item : j["results"]) {
    if (!item.contains("id") || !item.contains("seconds")) continue;
    const int id = item["id"].get<int>();
    r.seconds[id] = item["seconds"].get<double>();
    if (item.contains("peak_rss_bytes")) r.peak_rss_bytes[id] = item["peak_rss_bytes"].get<int64_t>();
    if (item.contains("peak_device_bytes"))
      r.peak_device_bytes[id] = item["peak_device_bytes"].get<int64_t>();
  }
  r.available = true;
  return r;
}

namespace {

// `python` itself when it names a path; else the first executable of that name on PATH ("" when
// none), as a shell would find it.
std::string resolve_program(const std::string& python) {
  if (python.find('/') != std::string::npos) return python;
  const std::string path = env_or_empty("PATH");
  size_t start = 0;
  while (start <= path.size()) {
    const size_t colon = std::min(path.find(':', start), path.size());
    const fs::path dir = path.substr(start, colon - start);
    const fs::path candidate = (dir.empty() ? fs::path(".") : dir) / python;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = colon + 1;
  }
  return "";
}

// The peer's interpreter, resolved, or "" with the reason why it cannot run.
std::string peer_python(const PeerOptions& opts, std::string& reason) {
  const std::string python = resolve_program(opts.python);
  if (python.empty() || !fs::exists(python)) {
    reason = opts.python + " not found";
    return "";
  }
  if (opts.script.empty() || !fs::exists(opts.script)) {
    reason = "torch_peer.py not found" + (opts.script.empty() ? "" : " at " + opts.script);
    return "";
  }
  return python;
}

// `env ... python script <args> --threads N`: OpenBLAS runs the kernels of the host's ISA (see
// openblas_coretype_for_host: its own detection can fall back to SSE3 ones), whatever
// OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE the caller set.
std::vector<std::string> peer_command(const std::string& python, const PeerOptions& opts,
                                      const std::vector<std::string>& args) {
  const std::string threads = std::to_string(opts.threads);
  const std::string core = openblas_coretype_for_host();
  std::vector<std::string> cmd = {"env", "-u", "OPENBLAS_CORETYPE", "-u", "OPENBLAS_L2_SIZE"};
  if (!core.empty()) cmd.push_back("OPENBLAS_CORETYPE=" + core);
  cmd.push_back("OMP_NUM_THREADS=" + threads);
  cmd.insert(cmd.end(), {python, opts.script});
  cmd.insert(cmd.end(), args.begin(), args.end());
  cmd.insert(cmd.end(), {"--threads", threads});
  return cmd;
}

// The timing protocol's flags, so both sides measure alike.
std::vector<std::string> timing_args(const TimingOptions& t) {
  return {"--warmup",   std::to_string(t.warmup),   "--min-seconds", std::to_string(t.min_seconds),
          "--min-reps", std::to_string(t.min_reps), "--max-reps",    std::to_string(t.max_reps)};
}

std::string exit_reason(int status, const std::string& reason) {
  return "the peer exited with status " +
         std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + " (" + reason + ")";
}

// Writes spec_json to a temporary file and runs the peer with `<spec_flag> FILE <extra>`; the
// answer's JSON is parsed, failures become a reason.
PeerResult run_peer(const char* spec_flag, const std::string& spec_json,
                    const std::vector<std::string>& extra, const PeerOptions& opts) {
  PeerResult r;
  const std::string python = peer_python(opts, r.reason);
  if (python.empty()) return r;
  SpecFile spec(spec_json);
  if (spec.path().empty()) {
    r.reason = "could not create a temporary spec file";
    return r;
  }
  std::vector<std::string> args = {spec_flag, spec.path()};
  args.insert(args.end(), extra.begin(), extra.end());
  std::string cmd;
  for (const std::string& word : peer_command(python, opts, args)) {
    cmd += (cmd.empty() ? "" : " ") + shell_quote(word);
  }
  std::fflush(stdout);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (!pipe) {
    r.reason = "could not start " + python;
    return r;
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  r = parse_peer_output(out);
  if (!r.available && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    r.reason = exit_reason(status, r.reason);
  }
  return r;
}

}  // namespace

PeerResult run_torch_train_peer(const std::string& spec_json, const PeerOptions& opts) {
  return run_peer("--train-spec", spec_json, {}, opts);
}

PeerResult run_torch_cuda_peer(const std::string& spec_json, int device, const PeerOptions& opts) {
  return run_peer("--cuda-spec", spec_json, {"--device", std::to_string(device)}, opts);
}

TorchPeerSession::TorchPeerSession(const PeerOptions& opts) {
  const std::string python = peer_python(opts, failure_);
  if (python.empty()) return;
  std::vector<std::string> args = {"--serve"};
  const std::vector<std::string> timing = timing_args(opts.timing);
  args.insert(args.end(), timing.begin(), timing.end());
  std::vector<std::string> words = peer_command(python, opts, args);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);

  int to_peer[2], from_peer[2];
  if (::pipe2(to_peer, O_CLOEXEC) != 0) {
    failure_ = "could not create a pipe";
    return;
  }
  if (::pipe2(from_peer, O_CLOEXEC) != 0) {
    ::close(to_peer[0]);
    ::close(to_peer[1]);
    failure_ = "could not create a pipe";
    return;
  }
  std::fflush(stdout);
  pid_ = ::fork();
  if (pid_ == 0) {  // the child: its stdin and stdout are the pipes' far ends
    ::dup2(to_peer[0], STDIN_FILENO);
    ::dup2(from_peer[1], STDOUT_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(to_peer[0]);
  ::close(from_peer[1]);
  if (pid_ < 0) {
    ::close(to_peer[1]);
    ::close(from_peer[0]);
    failure_ = "could not start " + python;
    return;
  }
  // A peer that dies mid-request must give a reason, not kill the bench with SIGPIPE.
  old_sigpipe_ = std::signal(SIGPIPE, SIG_IGN);
  to_ = ::fdopen(to_peer[1], "w");
  from_ = ::fdopen(from_peer[0], "r");
  if (to_ == nullptr || from_ == nullptr) {
    if (to_ == nullptr) ::close(to_peer[1]);
    if (from_ == nullptr) ::close(from_peer[0]);
    failure_ = exit_reason(finish(), "could not open the pipes");
    return;
  }
  // An empty request returns once torch is imported (the import's seconds of CPU must not overlap
  // the first case timed on our side); a peer without torch answers it with the reason, which
  // every later request then gets.
  const PeerResult ready = time({});
  if (!ready.available && failure_.empty()) failure_ = ready.reason;
}

TorchPeerSession::~TorchPeerSession() { finish(); }

int TorchPeerSession::finish() {
  if (to_ != nullptr) std::fclose(to_);  // end of input: the peer exits
  if (from_ != nullptr) std::fclose(from_);
  to_ = from_ = nullptr;
  int status = 0;
  if (pid_ > 0) {
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    std::signal(SIGPIPE, old_sigpipe_);
  }
  return status;
}

PeerResult TorchPeerSession::time(const std::vector<BenchCase>& cases) {
  PeerResult r;
  if (!failure_.empty()) {
    r.reason = failure_;
    return r;
  }
  const std::string request = cases_to_json(cases) + "\n";
  std::string line;
  // A write to a peer that has exited fails; what it printed before (why) is still read.
  std::fputs(request.c_str(), to_);
  std::fflush(to_);
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), from_) != nullptr) {
    line += buf;
    if (line.back() == '\n') break;
  }
  r = parse_peer_output(line);
  if (line.empty()) {  // the peer is gone: every later request gets its exit status
    failure_ = exit_reason(finish(), r.reason);
    r.reason = failure_;
  }
  return r;
}

std::string find_peer_script(const std::string& argv0) {
  const std::string rel = "tessera/tools/bench/torch_peer.py";
  std::vector<fs::path> candidates;
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const std::string dir = env_or_empty(env); !dir.empty())
      candidates.push_back(fs::path(dir) / rel);
  }
  if (!argv0.empty()) {
    candidates.push_back(fs::path(argv0 + ".runfiles") / rel);
    candidates.push_back(fs::path(argv0).parent_path() / "torch_peer.py");
  }
  if (const std::string ws = env_or_empty("BUILD_WORKSPACE_DIRECTORY"); !ws.empty()) {
    candidates.push_back(fs::path(ws) / "tools/bench/torch_peer.py");
  }
  candidates.push_back("tools/bench/torch_peer.py");
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return fs::absolute(p, ec).string();
  }
  return "";
}

}  // namespace tessera::bench
