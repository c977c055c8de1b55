// `tessera plan calibrate`: measures this host into a cluster profile (models/plan/cluster.h).
// Rank 0 times the compute with every core while the other ranks sleep; then groups of 2..N
// ranks time every collective; rank 0 fits, writes the profile atomically and prints a summary.
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>

#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "models/plan/calibration.h"
#include "models/plan/cluster.h"
#include "models/plan/host_probe.h"
#include "parallel/comm/agreed.h"
#include "parallel/comm/mpi_runtime.h"
#include "tools/bench/system_info.h"
#include "tools/bench/table.h"
#include "tools/cli/commands.h"
#include "tools/cli/plan_calibrate_comm.h"
#include "tools/cli/plan_calibrate_compute.h"

namespace tessera::cli {

const char* const kPlanCalibrateUsage =
    "usage: [mpirun -np N] tessera plan calibrate [--out FILE] [--quick] [--threads T]\n"
    "  Measures this machine into the cluster profile `tessera plan` reads as --cluster host:\n"
    "  one core's FMA peak, GEMMs over transformer layer shapes (f32; bf16 and f16 against f32),\n"
    "  fused attention, memory bandwidth, an element-wise op, one op's overhead and Adam's speed;\n"
    "  under mpirun -np N, every collective on groups of 2..N ranks (--bind-to none lets rank 0\n"
    "  use every core).\n"
    "  --out FILE   where to write (default $TESSERA_HOST_PROFILE, else\n"
    "               ~/.cache/tessera/host-profile.json)\n"
    "  --quick      tiny shapes and few repetitions (seconds; numbers are rough)\n"
    "  --threads T  threads for the compute measurements (default: the CPUs this process may use;\n"
    "               fewer than the cores measures efficiencies and bandwidth of T threads)\n";

namespace {

using plan::ClusterProfile;
using plan::Collective;

struct CalibrateArgs {
  std::string out;
  bool quick = false;
  int threads = 0;
  bool help = false;
};

CalibrateArgs parse(const std::vector<std::string>& args) {
  CalibrateArgs a;
  ArgReader r(args, "plan calibrate");
  while (r.next()) {
    if (r.help())
      a.help = true;
    else if (r.name() == "--out")
      a.out = r.value();
    else if (r.name() == "--quick")
      a.quick = true;
    else if (r.name() == "--threads") {
      const long long t = ArgReader::to_int("--threads", r.value());
      TS_CHECK(t >= 1 && t <= 4096, "plan calibrate", "expected --threads in [1, 4096], got ", t);
      a.threads = int(t);
    } else
      r.unknown();
  }
  return a;
}

// The CPUs this process may run on (mpirun binds ranks to cores unless --bind-to none).
int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return plan::host_cores();
  return std::max(1, CPU_COUNT(&set));
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d", std::localtime(&now));
  return text;
}

// The profile from the measurements. Fields nothing here measures (the links across machines)
// keep the bundled host defaults and their sources.
ClusterProfile assemble(const ComputeMeasurements& m,
                        const std::map<Collective, std::map<int, plan::LinkCost>>& fits, bool quick,
                        int world) {
  const ClusterProfile defaults = plan::bundled_cluster("host");
  ClusterProfile p = defaults;
  const std::string how = str_cat("tessera plan calibrate", quick ? " --quick" : "", " on ",
                                  today(), ", ", m.threads, " thread(s)");
  p.description = str_cat("this machine (", bench::cpu_model(), ", ", plan::host_cores(),
                          " logical CPUs, GEMM ISA ", kernels::cpu::sgemm_isa(), ") as ", how,
                          " and ", world, " rank(s) measured it");
  p.cores = plan::host_cores();
  p.devices_per_node = 1;
  p.nodes = 1;
  if (const int64_t ram = plan::host_ram_bytes(); ram > 0) p.device_memory = ram;
  const double f32 = m.core_peak_flops * p.cores;
  p.peak_flops = {
      {DType::f32, f32}, {DType::bf16, f32 * m.bf16_ratio}, {DType::f16, f32 * m.f16_ratio}};
  p.memory_bandwidth = m.memory_bandwidth;
  p.gemm_efficiency = plan::gemm_curve(m.gemm);
  p.attention_efficiency = std::min(1.0, m.attention_efficiency);
  p.elementwise_efficiency = std::min(1.0, m.elementwise_efficiency);
  p.launch_overhead_s = m.launch_overhead_s;
  p.block_overhead_s = m.block_overhead_s;
  p.micro_batch_overhead_s = m.micro_batch_overhead_s;
  p.host_link = {};
  p.host_adam_params_per_s = m.adam_params_per_s;
  p.measured = fits;
  const auto all_reduce = fits.find(Collective::all_reduce);
  const bool links = all_reduce != fits.end() && !all_reduce->second.empty();
  if (links) p.intra_node = all_reduce->second.rbegin()->second;

  nlohmann::json s = nlohmann::json::object();
  s["devices_per_node"] = "set by load_cluster: every rank of the world on this machine";
  s["nodes"] = "set by load_cluster (one machine unless --nodes says otherwise)";
  s["cores"] = "std::thread::hardware_concurrency() on this machine";
  s["device_memory"] = "this machine's RAM (sysconf _SC_PHYS_PAGES x _SC_PAGE_SIZE)";
  s["peak_flops.f32"] = str_cat(how, ": one core's f32 FMA loop in registers (",
                                kernels::cpu::sgemm_isa(), ") x ", p.cores, " cores");
  s["peak_flops.bf16"] = str_cat(how, ": the f32 peak x bf16 / f32 matmul speed (",
                                 bench::format_number(m.bf16_ratio, 3), ") on one layer shape");
  s["peak_flops.f16"] = str_cat(how, ": the f32 peak x f16 / f32 matmul speed (",
                                bench::format_number(m.f16_ratio, 3), ") on one layer shape");
  s["memory_bandwidth"] =
      str_cat(how,
              ": the best pass of a triad and of the f32 add kernel over three arrays beyond "
              "the caches (plan::measure_memory_bandwidth)");
  s["gemm_efficiency"] =
      str_cat(how, ": f32 kernels::matmul on (B*T, C) x (C, 3C), (C, 4C), (4C, C)",
              " and (C, V) products over the f32 peak of the threads used");
  s["attention_efficiency"] =
      str_cat(how,
              ": causal kernels::attention_forward + attention_backward, flash-attention's FLOP "
              "count (3.5 x 4 B H T^2 D / 2)");
  s["elementwise_efficiency"] =
      str_cat(how, ": an f32 kernels::binary add's bytes/s (fastest call) / memory_bandwidth");
  s["launch_overhead_s"] = str_cat(how, ": add() and its backward through the op API on 1-element tensors");
  s["block_overhead_s"] = str_cat(how, ": a GPT of width 8 forward + backward, the slope from 1 to 3 blocks");
  s["micro_batch_overhead_s"] = str_cat(how, ": the same GPT's time at 1 block less one block's");
  s["host_link"] = "unused on the host (no device to copy to): zero";
  s["host_adam_params_per_s"] = str_cat(how, ": f32 kernels::adam_update (AdamW) over the threads");
  s["intra_node"] =
      links ? str_cat(how, ": the all_reduce fit of the largest group measured (see measured)")
            : defaults.sources.value("intra_node", std::string("bundled host default"));
  s["measured"] = str_cat(how, ": each collective timed at ",
                          "several payloads per group size, "
                          "fitted to the ring model (plan::fit_link)");
  for (const auto& [key, text] : defaults.sources.items()) {
    if (key.rfind("inter_node", 0) == 0) s[key] = text;
    if (!links && key.rfind("intra_node", 0) == 0) s[key] = text;
  }
  p.sources = s;
  return p;
}

// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a
// profile.
void write_atomically(const std::string& path, const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  TS_CHECK(!ec, "plan calibrate", "expected to create the directory of '", path,
           "', got: ", ec.message());
  const std::string tmp = str_cat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp);
    out << text;
    out.close();
    TS_CHECK(out.good(), "plan calibrate", "expected to write '", tmp, "', got an error");
  }
  fs::rename(tmp, target, ec);
  if (ec) fs::remove(tmp);
  TS_CHECK(!ec, "plan calibrate", "expected to move the profile to '", path,
           "', got: ", ec.message());
}

void print_summary(const ClusterProfile& p, const ComputeMeasurements& m, const std::string& path,
                   double seconds, const std::string& load) {
  using bench::format_number;
  bench::Table t({"quantity", "value"});
  t.align_right(1);
  t.add_row({"cores (threads used)", str_cat(p.cores, " (", m.threads, ")")});
  for (DType d : {DType::f32, DType::bf16, DType::f16}) {
    t.add_row({str_cat("peak ", dtype_name(d), " (GFLOP/s)"), format_number(p.peak(d) / 1e9, 1)});
  }
  t.add_row({"memory bandwidth (GB/s)", format_number(p.memory_bandwidth / 1e9, 1)});
  const auto& curve = p.gemm_efficiency;
  t.add_row(
      {"GEMM efficiency (smallest -> largest)",
       str_cat(format_number(curve.front().second, 2), " at ",
               format_number(curve.front().first / 1e6, 1), " MFLOP -> ",
               format_number(curve.back().second, 2), " at ",
               format_number(curve.back().first / 1e9, 2), " GFLOP (", curve.size(), " points)")});
  t.add_row({"attention efficiency (fwd + bwd)", format_number(p.attention_efficiency, 3)});
  t.add_row({"element-wise efficiency", format_number(p.elementwise_efficiency, 3)});
  t.add_row({"op overhead (us)", format_number(p.launch_overhead_s * 1e6, 2)});
  t.add_row({"block / micro-batch overhead (us)",
             str_cat(format_number(p.block_overhead_s * 1e6, 1), " / ",
                     format_number(p.micro_batch_overhead_s * 1e6, 1))});
  t.add_row({"Adam (M params/s)", format_number(p.host_adam_params_per_s / 1e6, 1)});
  std::printf("# tessera plan calibrate: %s\n\n%s\n", p.description.c_str(), t.render().c_str());
  // A loaded machine gives low efficiencies and slow collectives, and a bound rank 0 measures a
  // share of the cores: say so beside the numbers.
  if (!load.empty() && std::strtod(load.c_str(), nullptr) > p.cores) {
    std::printf(
        "warning: load average %s above the %d cores: other processes share the CPUs, so "
        "the numbers read low; rerun on an idle machine\n\n",
        load.c_str(), p.cores);
  }
  if (m.threads < p.cores) {
    std::printf(
        "note: the compute ran on %d of %d CPUs (mpirun binds ranks to cores unless "
        "--bind-to none; or --threads): its efficiencies are those of %d thread(s)\n\n",
        m.threads, p.cores, m.threads);
  }
  if (!p.measured.empty()) {
    bench::Table c({"collective", "ranks", "latency per step (us)", "bandwidth (GB/s)"});
    for (size_t i = 1; i < 4; ++i) c.align_right(i);
    for (const auto& [coll, sizes] : p.measured) {
      for (const auto& [ranks, link] : sizes) {
        c.add_row({plan::collective_name(coll), std::to_string(ranks),
                   format_number(link.latency_s * 1e6, 2), format_number(link.bandwidth / 1e9, 2)});
      }
    }
    std::printf("%s\n", c.render().c_str());
  } else {
    std::printf(
        "one rank: no collectives measured (run under mpirun -np N for groups up to N)\n\n");
  }
  if (!p.loaded_wait_s.empty()) {
    bench::Table w({"ranks computing", "a collective's wait beyond its cost (us)"});
    w.align_right(0), w.align_right(1);
    for (const auto& [ranks, wait] : p.loaded_wait_s)
      w.add_row({std::to_string(ranks), format_number(wait * 1e6, 1)});
    std::printf("%s\n", w.render().c_str());
  }
  std::printf("wrote %s (%.1f s)\n", path.c_str(), seconds);
}

}  // namespace

int run_plan_calibrate(int argc, char** argv, const std::vector<std::string>& args) {
  return parallel::run_distributed(
      argc, argv, [&](const std::shared_ptr<parallel::Communicator>& world) {
        const auto start = std::chrono::steady_clock::now();
        const std::string load = bench::load_average();  // before we add our own
        CalibrateArgs a;
        parallel::run_agreed(world.get(), [&] { a = parse(args); });
        const bool rank0 = world->rank() == 0;
        if (a.help) {
          if (rank0) std::cout << kPlanCalibrateUsage;
          return 0;
        }
        const std::string path = a.out.empty() ? plan::host_profile_path() : a.out;
        ComputeMeasurements compute;
        if (rank0) {
          compute = measure_compute(
              {.quick = a.quick, .threads = a.threads > 0 ? a.threads : usable_cpus()});
          std::vector<int> others(world->size() - 1);
          std::iota(others.begin(), others.end(), 1);
          release_waiting(*world, others);
        } else {
          wait_quietly(*world, 0);
        }
        CommOptions comm;
        comm.payloads = a.quick ? std::vector<int64_t>{1 << 10, 16 << 10, 128 << 10}
                                : std::vector<int64_t>{4 << 10, 256 << 10, 4 << 20};
        comm.rounds = a.quick ? 3 : 5;
        comm.batch_bytes = a.quick ? int64_t(1) << 20 : int64_t(16) << 20;
        const auto fits = measure_collectives(world, comm);
        const auto waits = measure_loaded_waits(world, a.quick);
        if (rank0) {
          ClusterProfile p = assemble(compute, fits, a.quick, world->size());
          p.loaded_wait_s = waits;
          if (!waits.empty())
            p.sources["loaded_wait_s"] =
                "tessera plan calibrate: a 4-byte all-reduce after a 0.1 ms compute burst on every "
                "active rank, less the burst and the call each alone (per number of ranks)";
          const std::string text = p.to_json().dump(2) + "\n";
          // What load_cluster will read back must be this profile, or the file is of no use.
          TS_ASSERT(ClusterProfile::from_json(nlohmann::json::parse(text)) == p);
          write_atomically(path, text);
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          print_summary(p, compute, path, seconds, load);
        }
        return 0;
      });
}

}  // namespace tessera::cli
