#include "tools/bench/peer_rounds.h"

#include <stdexcept>
#include <utility>

#include "tools/bench/table.h"
#include "tools/bench/timer.h"

namespace tessera::bench {

PeerRounds::PeerRounds(std::vector<int> ids, int rounds)
    : ids_(std::move(ids)),
      rounds_(rounds),
      ours_(ids_.size(), std::vector<double>(size_t(rounds), 0.0)),
      peer_times_(ids_.size()),
      round_ratios_(ids_.size()) {
  if (rounds < 1) throw std::invalid_argument("PeerRounds: expected rounds >= 1");
}

void PeerRounds::add_ours(int round, size_t row, double seconds) {
  ours_.at(row).at(size_t(round)) = seconds;
}

void PeerRounds::add_peer(int round, const PeerResult& answer) {
  if (!answer.available) {
    if (!peer_.available) peer_ = answer;
    return;
  }
  if (!peer_.available) {
    peer_ = answer;
    peer_.seconds.clear();
    peer_.peak_rss_bytes.clear();
  }
  for (size_t row = 0; row < ids_.size(); ++row) {
    const auto it = answer.seconds.find(ids_[row]);
    if (it == answer.seconds.end() || it->second <= 0.0) continue;
    peer_times_[row].push_back(it->second);
    const auto rss = answer.peak_rss_bytes.find(ids_[row]);
    if (rss != answer.peak_rss_bytes.end()) peer_.peak_rss_bytes.emplace(ids_[row], rss->second);
    const double ours = ours_[row].at(size_t(round));
    if (rounds_ > 1 && ours > 0.0) {
      if (!round_ratios_[row].empty()) round_ratios_[row] += " ";
      round_ratios_[row] += format_number(it->second / ours, 2);
    }
  }
}

double PeerRounds::ours_median(size_t row) const {
  for (double s : ours_.at(row)) {
    if (s <= 0.0) return 0.0;
  }
  return median_of(ours_[row]);
}

PeerResult PeerRounds::peer() const {
  PeerResult merged = peer_;
  if (!merged.available) return merged;
  for (size_t row = 0; row < ids_.size(); ++row) {
    if (!peer_times_[row].empty()) merged.seconds[ids_[row]] = median_of(peer_times_[row]);
  }
  return merged;
}

}  // namespace tessera::bench
