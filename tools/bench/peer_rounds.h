// The bookkeeping of a bench's `--rounds N`: each round times every row on Tessera's side, then
// runs the PyTorch peer over all rows, so a host whose speed drifts slows both sides alike. This
// merges the rounds into the medians a table reports and each round's ratio.
#pragma once

#include <string>
#include <vector>

#include "tools/bench/torch_peer_client.h"

namespace tessera::bench {

class PeerRounds {
 public:
  // ids[i]: row i's key in a PeerResult's maps (a case id, a shape's index).
  PeerRounds(std::vector<int> ids, int rounds);

  // Tessera's time for a row in a round (0 <= round < rounds); a row never added for a round
  // failed in it.
  void add_ours(int round, size_t row, double seconds);
  // The peer's answer in a round. The first answer that is available names the version, BLAS and
  // threads, and gives each row's peak RSS; later ones add times. A failed answer is kept only
  // while no round has answered (its reason explains the missing columns).
  void add_peer(int round, const PeerResult& answer);

  // The median of a row's times over rounds; 0 when it failed in any round.
  double ours_median(size_t row) const;
  // The merged peer result: times are the medians over the rounds that timed each row.
  PeerResult peer() const;
  // One string per row, the rounds' ratios peer / Tessera ("1.02 0.97 1.01") where both sides
  // timed the row; every string is empty with a single round.
  const std::vector<std::string>& round_ratios() const { return round_ratios_; }

 private:
  std::vector<int> ids_;
  int rounds_;
  std::vector<std::vector<double>> ours_;  // [row][round], 0: not timed
  std::vector<std::vector<double>> peer_times_;  // [row]: the rounds that timed it
  std::vector<std::string> round_ratios_;
  PeerResult peer_;
};

}  // namespace tessera::bench
