// Pipeline schedules as per-rank action lists, and the simulator that checks them (see
// schedule.h).
#include "parallel/pipeline/schedule.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

#include "core/error.h"

namespace tessera::parallel::pipeline {
namespace {

// A compute action of a rank's order, before the transfers around it are added.
struct Step {
  ActionType type;
  int chunk;
  int micro_batch;
};

// Backwards run in micro-batch order in every schedule, so a parameter's gradient is summed over
// micro-batches in the same order whichever schedule runs, and the sums agree bit for bit.
std::vector<Step> gpipe_order(int micro_batches) {
  std::vector<Step> out;
  for (int m = 0; m < micro_batches; ++m) out.push_back({ActionType::forward, 0, m});
  for (int m = 0; m < micro_batches; ++m) out.push_back({ActionType::backward, 0, m});
  return out;
}

// PipeDream-flush. Rank r's first gradient needs micro-batch 0 through the P - r - 1 ranks after
// it and back, so it runs that many warm-up forwards, then its forwards and backwards alternate
// (one forward each time a backward frees a micro-batch: at most P - r in flight), then the
// cool-down drains the backwards left.
std::vector<Step> one_f_one_b_order(int stages, int micro_batches, int rank, ActionType backward) {
  const int warmup = std::min(stages - rank - 1, micro_batches);
  std::vector<Step> out;
  for (int m = 0; m < warmup; ++m) out.push_back({ActionType::forward, 0, m});
  for (int i = 0; i < micro_batches - warmup; ++i) {
    out.push_back({ActionType::forward, 0, warmup + i});
    out.push_back({backward, 0, i});
  }
  for (int m = micro_batches - warmup; m < micro_batches; ++m) out.push_back({backward, 0, m});
  return out;
}

// ZB-H1: 1F1B's order with B in place of the full backward (so 1F1B's activation memory), the Ws
// filling the bubbles. In the cool-down a rank waits before each backward while the next rank
// runs its forward or W, so one W (the oldest) goes before each cool-down B (it fills the gap when
// W costs about F); the rest follow the last B, where nobody waits for them. Under equal F, B and W costs (M >= P) each
// rank idles P - 1 units against 1F1B's 3 (P - 1).
std::vector<Step> zero_bubble_order(int stages, int micro_batches, int rank) {
  const std::vector<Step> base =
      one_f_one_b_order(stages, micro_batches, rank, ActionType::backward_input);
  const size_t cooldown_begin = base.size() - size_t(std::min(stages - rank - 1, micro_batches));
  // A W keeps what its weight gradients read (the linears' inputs and output gradients) until it
  // runs, so the Ws waiting are bounded whatever M, as ZB-H1 does: rank r may hold r Ws beyond
  // 1F1B's P - r micro-batches in flight, so every rank holds at most P, 1F1B's peak (rank 0's).
  // Before a forward that would exceed that, the oldest W runs; the rest fill the cool-down.
  const int limit = std::min(stages - rank, micro_batches) + rank;
  int forwarded = 0, weighted = 0;
  std::vector<Step> out;
  std::deque<int> pending;  // micro-batches whose B ran and W did not
  for (size_t i = 0; i < base.size(); ++i) {
    const bool needs_room = base[i].type == ActionType::forward && forwarded - weighted >= limit;
    const bool cooldown_b = base[i].type == ActionType::backward_input && i >= cooldown_begin;
    if ((needs_room || cooldown_b) && !pending.empty()) {
      out.push_back({ActionType::backward_weight, 0, pending.front()});
      pending.pop_front();
      ++weighted;
    }
    if (base[i].type == ActionType::forward) ++forwarded;
    out.push_back(base[i]);
    if (base[i].type == ActionType::backward_input) pending.push_back(base[i].micro_batch);
  }
  for (int m : pending) out.push_back({ActionType::backward_weight, 0, m});
  return out;
}

// Megatron's interleaved 1F1B. Virtual step k in 0 .. vM - 1 names a (chunk, micro-batch):
// micro-batches go in groups of P, each group through chunk 0, then chunk 1, ...; backwards walk
// the chunks in reverse. The warm-up, Megatron's count, is (v - 1) P forwards to take the first
// group through chunks 0 .. v - 2, plus two steps (a forward on and a backward back) per rank
// after this one before the first gradient of chunk v - 1 can arrive. Megatron runs every forward
// first when M == P; that is not needed here (the simulator shows these lists never deadlock).
Step interleaved_step(int stages, int chunks, int k, ActionType type) {
  const int group = k / (stages * chunks), in_group = k % (stages * chunks);
  int chunk = in_group / stages;
  if (type != ActionType::forward) chunk = chunks - 1 - chunk;
  return {type, chunk, group * stages + in_group % stages};
}

std::vector<Step> interleaved_order(int stages, int chunks, int micro_batches, int rank) {
  const int total = chunks * micro_batches;
  const int warmup = std::min((chunks - 1) * stages + 2 * (stages - rank - 1), total);
  const auto fwd = [&](int k) { return interleaved_step(stages, chunks, k, ActionType::forward); };
  const auto bwd = [&](int k) { return interleaved_step(stages, chunks, k, ActionType::backward); };
  std::vector<Step> out;
  for (int k = 0; k < warmup; ++k) out.push_back(fwd(k));
  for (int i = 0; i < total - warmup; ++i) {
    out.push_back(fwd(warmup + i));
    out.push_back(bwd(i));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(bwd(k));
  return out;
}

// Receives sit right before the compute that needs them, sends right after the compute that
// makes their data. With sends that never block, a later receive can only wait less, so the lists
// deadlock only if the compute orders do (the simulator shows they do not).
std::vector<Action> with_transfers(const ScheduleSpec& spec, int rank,
                                   const std::vector<Step>& steps) {
  const int P = spec.stages, last = P * spec.virtual_stages - 1;
  std::vector<Action> out;
  for (const Step& s : steps) {
    const int stage = s.chunk * P + rank;
    const auto transfer = [&](ActionType t, int peer_stage) {
      out.push_back({t, s.micro_batch, s.chunk, peer_stage % P});
    };
    const Action compute{s.type, s.micro_batch, s.chunk, -1};
    if (s.type == ActionType::forward) {
      if (stage > 0) transfer(ActionType::recv_activation, stage - 1);
      out.push_back(compute);
      if (stage < last) transfer(ActionType::send_activation, stage + 1);
    } else if (s.type == ActionType::backward || s.type == ActionType::backward_input) {
      if (stage < last) transfer(ActionType::recv_gradient, stage + 1);
      out.push_back(compute);
      if (stage > 0) transfer(ActionType::send_gradient, stage - 1);
    } else {
      out.push_back(compute);
    }
  }
  return out;
}


// The simulator. Every rank runs its list on its own clock: a compute adds its cost, a send
// stamps its message with the sender's clock, a receive waits until max(own clock, the message's
// stamp). Nothing else is shared (sends never block, ranks have no other resource to contend
// for), so this gives the times an event-ordered simulation would, whatever order the ranks are
// advanced in: each rank runs until it blocks on a receive, round after round, until all finish or
// a round moves nobody (a deadlock).
class Simulator {
 public:
  Simulator(const ScheduleSpec& spec, const std::vector<std::vector<Action>>& lists,
            const SimulationCosts& costs)
      : spec_(spec), lists_(lists), costs_(costs), ranks_(size_t(spec.stages)) {
    for (Rank& r : ranks_) r.done.assign(size_t(spec.virtual_stages * spec.micro_batches), 0);
  }

  SimulationResult run() {
    for (bool moved = true; moved;) {
      moved = false;
      for (int r = 0; r < spec_.stages; ++r)
        while (ranks_[size_t(r)].next < lists_[size_t(r)].size() && step(r)) moved = true;
    }
    check_finished();
    SimulationResult out;
    for (const Rank& r : ranks_) out.makespan = std::max(out.makespan, r.clock);
    for (const Rank& r : ranks_) {
      out.busy.push_back(r.busy);
      out.bubble_fraction.push_back(out.makespan > 0 ? 1 - r.busy / out.makespan : 0);
      out.peak_in_flight.push_back(r.peak);
    }
    return out;
  }

 private:
  // What a rank has done for one (chunk, micro-batch).
  enum Flag : uint8_t {
    kGotActivation = 1,
    kForward = 2,
    kSentActivation = 4,
    kGotGradient = 8,
    kBackward = 16,  // the full backward or B
    kSplit = 32,     // ... and it was B, which owes a W
    kWeight = 64,
    kSentGradient = 128,
  };
  struct Rank {
    size_t next = 0;  // index of the next action
    double clock = 0, busy = 0;
    int in_flight = 0, peak = 0;
    std::vector<uint8_t> done;  // Flags per chunk * M + micro-batch
  };
  // (receiver, sender, is gradient, micro-batch, receiving stage) -> the send's time.
  using Key = std::tuple<int, int, bool, int, int>;

  std::string where(int r, const Action& a) const {
    return str_cat("rank ", r, " action ", ranks_[size_t(r)].next, " ", to_string(a));
  }
  void compute(Rank& st, double cost) {
    st.clock += cost;
    st.busy += cost;
  }

  // Runs rank r's next action; false when it is a receive whose message has not been sent.
  bool step(int r) {
    Rank& st = ranks_[size_t(r)];
    const Action& a = lists_[size_t(r)][st.next];
    const int P = spec_.stages, last = P * spec_.virtual_stages - 1;
    TS_CHECK(a.chunk >= 0 && a.chunk < spec_.virtual_stages && a.micro_batch >= 0 &&
                 a.micro_batch < spec_.micro_batches,
             "simulate", where(r, a), ": expected a chunk in 0..", spec_.virtual_stages - 1,
             " and a micro-batch in 0..", spec_.micro_batches - 1);
    const int stage = a.chunk * P + r;
    uint8_t& f = st.done[size_t(a.chunk * spec_.micro_batches + a.micro_batch)];
    const auto need = [&](bool ok, const char* what) {
      TS_CHECK(ok, "simulate", where(r, a), ": expected ", what);
    };
    const auto need_peer = [&](bool stage_ok, int peer_stage) {
      need(stage_ok, "no such transfer at this stage (none before stage 0 or after the last)");
      TS_CHECK(a.peer == peer_stage % P, "simulate", where(r, a), ": expected peer ",
               peer_stage % P, " (the rank of stage ", peer_stage, ")");
    };
    const auto once = [&](uint8_t flag) {
      need(!(f & flag), "it once per chunk and micro-batch, got it again");
      f |= flag;
    };
    const auto post = [&](bool gradient, int to_stage) {
      once(gradient ? kSentGradient : kSentActivation);
      mail_[Key{a.peer, r, gradient, a.micro_batch, to_stage}] = st.clock;
    };
    const auto take = [&](bool gradient) {  // false: not sent yet
      const uint8_t flag = gradient ? kGotGradient : kGotActivation;
      need(!(f & flag), "it once per chunk and micro-batch, got it again");
      auto it = mail_.find(Key{r, a.peer, gradient, a.micro_batch, stage});
      if (it == mail_.end()) return false;
      f |= flag;
      st.clock = std::max(st.clock, it->second);
      mail_.erase(it);
      return true;
    };
    if (a.type == ActionType::forward || a.type == ActionType::backward ||
        a.type == ActionType::backward_input || a.type == ActionType::backward_weight)
      need(a.peer == -1, "peer -1 for a compute action");
    switch (a.type) {
      case ActionType::forward:
        need(stage == 0 || (f & kGotActivation), "its activation received before the forward");
        once(kForward);
        compute(st, costs_.forward);
        st.peak = std::max(st.peak, ++st.in_flight);
        break;
      case ActionType::backward:
      case ActionType::backward_input:
        need(f & kForward, "the forward before the backward");
        need(stage == last || (f & kGotGradient), "its gradient received before the backward");
        once(kBackward);
        if (a.type == ActionType::backward_input) f |= kSplit;
        compute(st, a.type == ActionType::backward ? costs_.backward : costs_.backward_input);
        --st.in_flight;
        break;
      case ActionType::backward_weight:
        need(f & kSplit, "a backward_input before its backward_weight");
        once(kWeight);
        compute(st, costs_.backward_weight);
        break;
      case ActionType::send_activation:
        need_peer(stage < last, stage + 1);
        need(f & kForward, "the forward before its send");
        post(false, stage + 1);
        break;
      case ActionType::send_gradient:
        need_peer(stage > 0, stage - 1);
        need(f & kBackward, "the backward before its send");
        post(true, stage - 1);
        break;
      case ActionType::recv_activation:
        need_peer(stage > 0, stage - 1);
        if (!take(false)) return false;
        break;
      case ActionType::recv_gradient:
        need_peer(stage < last, stage + 1);
        if (!take(true)) return false;
        break;
    }
    ++st.next;
    return true;
  }

  void check_finished() const {
    std::string stuck;
    for (int r = 0; r < spec_.stages; ++r) {
      const Rank& st = ranks_[size_t(r)];
      if (st.next < lists_[size_t(r)].size())
        stuck += str_cat(stuck.empty() ? "" : "; ", where(r, lists_[size_t(r)][st.next]));
    }
    TS_CHECK(stuck.empty(), "simulate",
             "deadlock: every unfinished rank waits for a message never sent: ", stuck);
    if (!mail_.empty()) {
      const auto& [to, from, gradient, m, stage] = mail_.begin()->first;
      TS_FAIL("simulate", mail_.size(), " message(s) sent and never received, the first: rank ",
              from, "'s ", gradient ? "gradient" : "activation", " of micro-batch ", m,
              " for stage ", stage, " on rank ", to);
    }
    for (int r = 0; r < spec_.stages; ++r)
      for (int c = 0; c < spec_.virtual_stages; ++c)
        for (int m = 0; m < spec_.micro_batches; ++m) {
          const uint8_t f = ranks_[size_t(r)].done[size_t(c * spec_.micro_batches + m)];
          const char* missing = !(f & kForward)                  ? "forward"
                                : !(f & kBackward)               ? "backward"
                                : (f & kSplit) && !(f & kWeight) ? "backward_weight"
                                                                 : nullptr;
          TS_CHECK(!missing, "simulate", "expected rank ", r, " to run the ", missing, " of chunk ",
                   c, ", micro-batch ", m, ", got a list without it");
        }
  }

  const ScheduleSpec& spec_;
  const std::vector<std::vector<Action>>& lists_;
  const SimulationCosts& costs_;
  std::vector<Rank> ranks_;
  std::map<Key, double> mail_;
};

}  // namespace

const char* action_type_name(ActionType t) {
  switch (t) {
    case ActionType::forward:
      return "forward";
    case ActionType::backward:
      return "backward";
    case ActionType::backward_input:
      return "backward_input";
    case ActionType::backward_weight:
      return "backward_weight";
    case ActionType::send_activation:
      return "send_activation";
    case ActionType::recv_activation:
      return "recv_activation";
    case ActionType::send_gradient:
      return "send_gradient";
    case ActionType::recv_gradient:
      return "recv_gradient";
  }
  return "?";
}

ScheduleKind schedule_kind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved,
                         ScheduleKind::zero_bubble})
    if (name == schedule_name(k)) return k;
  TS_FAIL("schedule", "expected a pipeline schedule gpipe, 1f1b, interleaved or zero_bubble, got '",
          name, "'");
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
      return "gpipe";
    case ScheduleKind::one_f_one_b:
      return "1f1b";
    case ScheduleKind::interleaved:
      return "interleaved";
    case ScheduleKind::zero_bubble:
      return "zero_bubble";
  }
  return "?";
}

std::string to_string(const Action& a) {
  std::string s = str_cat(action_type_name(a.type), "(chunk ", a.chunk, ", micro-batch ", a.micro_batch);
  if (a.peer >= 0) s += str_cat(", peer ", a.peer);
  return s + ")";
}

bool runs_model_chunks(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b:
    case ScheduleKind::zero_bubble:
      return false;
    case ScheduleKind::interleaved:
      return true;
  }
  return false;
}

int micro_batch_multiple(ScheduleKind kind, int stages) {
  // Interleaving walks the micro-batches in groups of P through each chunk.
  return runs_model_chunks(kind) ? stages : 1;
}

void check_schedule(const ScheduleSpec& spec) {
  const char* name = schedule_name(spec.kind);
  TS_CHECK(spec.stages >= 1, "schedule", "expected at least 1 pipeline stage, got ", spec.stages);
  TS_CHECK(spec.micro_batches >= 1, "schedule", "expected at least 1 micro-batch, got ",
           spec.micro_batches);
  TS_CHECK(spec.virtual_stages >= 1, "schedule", "expected at least 1 virtual stage, got ",
           spec.virtual_stages);
  TS_CHECK(spec.virtual_stages == 1 || runs_model_chunks(spec.kind), "schedule",
           "expected 1 virtual stage for schedule ", name,
           " (only interleaved runs several model chunks per rank), got ", spec.virtual_stages);
  TS_CHECK(spec.micro_batches % micro_batch_multiple(spec.kind, spec.stages) == 0, "schedule",
           "expected the micro-batches (M = ", spec.micro_batches,
           ") to be a multiple of the pipeline stages (P = ", spec.stages,
           ") for the interleaved schedule, as Megatron's requires");
}

std::vector<Action> schedule_actions(const ScheduleSpec& spec, int rank) {
  check_schedule(spec);
  TS_CHECK(rank >= 0 && rank < spec.stages, "schedule", "expected a pipeline rank in 0..",
           spec.stages - 1, ", got ", rank);
  const int P = spec.stages, M = spec.micro_batches;
  switch (spec.kind) {
    case ScheduleKind::gpipe:
      return with_transfers(spec, rank, gpipe_order(M));
    case ScheduleKind::one_f_one_b:
      return with_transfers(spec, rank, one_f_one_b_order(P, M, rank, ActionType::backward));
    case ScheduleKind::interleaved:
      return with_transfers(spec, rank, interleaved_order(P, spec.virtual_stages, M, rank));
    case ScheduleKind::zero_bubble:
      return with_transfers(spec, rank, zero_bubble_order(P, M, rank));
  }
  TS_FAIL("schedule", "expected a known schedule kind, got ", int(spec.kind));
}

SimulationResult simulate_lists(const ScheduleSpec& spec,
                                const std::vector<std::vector<Action>>& lists,
                                const SimulationCosts& costs) {
  check_schedule(spec);
  TS_CHECK(int(lists.size()) == spec.stages, "simulate",
           "expected one action list per pipeline rank (", spec.stages, "), got ", lists.size());
  TS_CHECK(costs.forward >= 0 && costs.backward >= 0 && costs.backward_input >= 0 &&
               costs.backward_weight >= 0,
           "simulate", "expected costs >= 0, got forward ", costs.forward, ", backward ",
           costs.backward, ", backward_input ", costs.backward_input, ", backward_weight ",
           costs.backward_weight);
  return Simulator(spec, lists, costs).run();
}

SimulationResult simulate(const ScheduleSpec& spec, const SimulationCosts& costs) {
  check_schedule(spec);
  std::vector<std::vector<Action>> lists;
  for (int r = 0; r < spec.stages; ++r) lists.push_back(schedule_actions(spec, r));
  return simulate_lists(spec, lists, costs);
}

double theoretical_bubble(const ScheduleSpec& spec) {
  check_schedule(spec);
  const double P = spec.stages, M = spec.micro_batches;
  switch (spec.kind) {
    case ScheduleKind::gpipe:
    case ScheduleKind::one_f_one_b:
      return (P - 1) / (M + P - 1);
    case ScheduleKind::interleaved:
      return (P - 1) / (M + P - 1) / spec.virtual_stages;
    case ScheduleKind::zero_bubble: {
      const SimulationResult r = simulate(spec);
      double sum = 0;
      for (double b : r.bubble_fraction) sum += b;
      return sum / P;
    }
  }
  TS_FAIL("schedule", "expected a known schedule kind, got ", int(spec.kind));
}

}  // namespace tessera::parallel::pipeline
