// Runs tools/bench/torch_peer.py (PyTorch eager) on the same cases (bench kernels), training steps
// (bench train) or GPU cases (bench cuda) and reads its JSON answer, so Tessera and PyTorch are
// measured in the same run on the same machine state.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "tools/bench/cases.h"
#include "tools/bench/timer.h"

namespace tessera::bench {

struct PeerOptions {
  // Debian's interpreter, the one that sees python3-torch; a name without '/' is looked up on PATH.
  std::string python = "/usr/bin/python3";
  std::string script;                       // torch_peer.py; find_peer_script() when empty
  int threads = 1;
  TimingOptions timing;
};

struct PeerResult {
  bool available = false;
  std::string reason;  // why not, when !available
  std::string torch_version, blas;
  std::string device;  // the GPU's name (cuda mode only)
  int threads = 0;
  std::map<int, double> seconds;          // case id -> median seconds
  std::map<int, int64_t> peak_rss_bytes;  // case id -> the peer's peak RSS (train mode only)
  std::map<int, int64_t> peak_device_bytes;  // case id -> torch.cuda.max_memory_allocated (cuda)
};

// The peer kept running for many requests (`torch_peer.py --serve`), so bench kernels can time the
// two sides case by case in alternation: on a host whose speed drifts over tens of seconds, a
// round of every case on one side and then on the other compares different machines.
class TorchPeerSession {
 public:
  // Starts the peer and waits until it has imported torch; a failure to start is reported by
  // every time() call. Never throws.
  explicit TorchPeerSession(const PeerOptions& opts);
  ~TorchPeerSession();  // ends the peer's input and waits for it
  TorchPeerSession(const TorchPeerSession&) = delete;
  TorchPeerSession& operator=(const TorchPeerSession&) = delete;

  // The peer's times for these cases (opts.timing's protocol). Never throws: a missing
  // interpreter, script or torch gives available == false and a reason, and once the peer is gone
  // or cannot import torch, every later call returns that reason.
  PeerResult time(const std::vector<BenchCase>& cases);

 private:
  int finish();  // closes the pipes and reaps the peer; its wait status

  std::string failure_;
  int pid_ = -1;
  FILE* to_ = nullptr;    // the peer's stdin
  FILE* from_ = nullptr;  // its stdout
  void (*old_sigpipe_)(int) = nullptr;
};

// The training-step mode (`torch_peer.py --train-spec`): spec_json is the object that script
// documents ({"config", "shapes", "warmup", "steps", ...}); opts.timing is unused. Never throws: a
// missing interpreter, script or torch gives available == false and a reason.
PeerResult run_torch_train_peer(const std::string& spec_json, const PeerOptions& opts);

// The GPU mode (`torch_peer.py --cuda-spec FILE --device N`, see torch_cuda_peer.py): spec_json is
// cuda_spec_json()'s object for one section. opts.timing is unused. Never throws.
PeerResult run_torch_cuda_peer(const std::string& spec_json, int device, const PeerOptions& opts);

// Parses the script's stdout (one JSON object; {"error": ...} when torch is missing).
PeerResult parse_peer_output(const std::string& text);

// torch_peer.py beside the binary: in its Bazel runfiles, next to it, or in the source tree
// (bazel run sets BUILD_WORKSPACE_DIRECTORY). Empty when not found.
std::string find_peer_script(const std::string& argv0);

}  // namespace tessera::bench
