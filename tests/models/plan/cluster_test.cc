// Cluster profiles: the JSON round trip, strict errors that name the key, the bundled profiles
// (each number with its source), ring collective costs against hand-computed values, measured
// overrides interpolated over group sizes, core sharing, and where load_cluster finds a profile.
#include "models/plan/cluster.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "core/error.h"
#include "models/plan/host_probe.h"
#include "tests/testing/temp_dir.h"

using namespace tessera;
using namespace tessera::plan;
using Catch::Matchers::Contains;
using nlohmann::json;

namespace {

// A small, complete profile whose numbers make hand computation easy.
ClusterProfile toy() {
  ClusterProfile p;
  p.name = "toy";
  p.description = "hand-made";
  p.devices_per_node = 4;
  p.device_memory = int64_t(1) << 30;
  p.peak_flops = {{DType::f32, 1e12}, {DType::bf16, 4e12}};
  p.memory_bandwidth = 1e11;
  p.gemm_efficiency = {{1e6, 0.2}, {1e8, 0.6}, {1e10, 0.8}};
  p.attention_efficiency = 0.4;
  p.elementwise_efficiency = 0.9;
  p.launch_overhead_s = 3e-6;
  p.intra_node = {1e-6, 1e9};
  p.inter_node = {5e-6, 1e8};
  p.host_link = {1e-5, 2e10};
  p.host_adam_params_per_s = 1e9;
  p.sources = {{"peak_flops", "made up"}};
  return p;
}

json toy_json() { return toy().to_json(); }

std::string error_of(const json& j) {
  try {
    ClusterProfile::from_json(j);
  } catch (const ValueError& e) {
    return e.what();
  }
  return "no error";
}

// Every path in `j` that holds a number: "peak_flops.f32", "gemm_efficiency[3][1]", ...
void numeric_paths(const json& j, const std::string& path, std::vector<std::string>& out) {
  if (j.is_number()) out.push_back(path);
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (path.empty() && key == "sources") continue;
      numeric_paths(value, path.empty() ? key : path + "." + key, out);
    }
  }
  if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) numeric_paths(j[i], str_cat(path, "[", i, "]"), out);
  }
}

// The source covering `path`: its own entry or one of an enclosing field ("intra_node" covers
// "intra_node.bandwidth", "gemm_efficiency" covers "gemm_efficiency[2][0]").
const json* source_of(const json& sources, std::string path) {
  for (;;) {
    if (sources.contains(path)) return &sources.at(path);
    const size_t cut = path.find_last_of(".[");
    if (cut == std::string::npos) return nullptr;
    path = path.substr(0, cut);
  }
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

TEST_CASE("a profile survives to_json and from_json unchanged", "[plan][cluster]") {
  ClusterProfile p = toy();
  p.cores = 6;
  p.nodes = 3;
  p.measured[Collective::all_reduce][2] = {2e-6, 3e9};
  p.measured[Collective::all_gather][4] = {4e-6, 1.5e9};
  const ClusterProfile back = ClusterProfile::from_json(json::parse(p.to_json().dump()));
  CHECK(back == p);
  CHECK(back.to_json() == p.to_json());
  CHECK(back.measured.at(Collective::all_gather).at(4).bandwidth == 1.5e9);

  for (const std::string& name : bundled_cluster_names()) {
    INFO(name);
    const ClusterProfile b = bundled_cluster(name);
    CHECK(ClusterProfile::from_json(json::parse(b.to_json().dump())) == b);
  }
}

TEST_CASE("profile errors name the key", "[plan][cluster]") {
  json j = toy_json();
  REQUIRE(error_of(j) == "no error");

  j = toy_json();
  j["peak_flop"] = 1;
  CHECK_THAT(error_of(j), Contains("unknown key 'peak_flop'"));

  j = toy_json();
  j["intra_node"]["bandwith"] = 1e9;
  CHECK_THAT(error_of(j), Contains("unknown key 'intra_node.bandwith'"));

  j = toy_json();
  j["memory_bandwidth"] = "fast";
  CHECK_THAT(error_of(j), Contains("memory_bandwidth") && Contains("expected a number"));

  j = toy_json();
  j["devices_per_node"] = 2.5;
  CHECK_THAT(error_of(j), Contains("devices_per_node") && Contains("integer"));

  j = toy_json();
  j["peak_flops"]["f64"] = 1e12;
  CHECK_THAT(error_of(j), Contains("unknown key 'peak_flops.f64'"));

  j = toy_json();
  j["peak_flops"]["bf16"] = 0;
  CHECK_THAT(error_of(j), Contains("peak_flops.bf16") && Contains("> 0"));

  j = toy_json();
  j.erase("intra_node");
  CHECK_THAT(error_of(j), Contains("expected key 'intra_node'"));

  j = toy_json();
  j["gemm_efficiency"] = json::parse("[[1e8, 0.5], [1e6, 0.2]]");
  CHECK_THAT(error_of(j), Contains("gemm_efficiency[1]") && Contains("more FLOPs"));

  j = toy_json();
  j["gemm_efficiency"] = json::parse("[[1e8, 1.5]]");
  CHECK_THAT(error_of(j), Contains("gemm_efficiency[0][1]"));

  j = toy_json();
  j["attention_efficiency"] = 2;
  CHECK_THAT(error_of(j), Contains("attention_efficiency"));

  j = toy_json();
  j["measured"] = json::parse(R"({"allreduce": {"2": {"latency_s": 0, "bandwidth": 1}}})");
  CHECK_THAT(error_of(j), Contains("unknown key 'measured.allreduce'") && Contains("all_reduce"));

  j = toy_json();
  j["measured"] = json::parse(R"({"all_reduce": {"one": {"latency_s": 0, "bandwidth": 1}}})");
  CHECK_THAT(error_of(j), Contains("measured.all_reduce.one"));

  j = toy_json();
  j["measured"] = json::parse(R"({"all_reduce": {"2": {"latency_s": "slow", "bandwidth": 1}}})");
  CHECK_THAT(error_of(j), Contains("measured.all_reduce.2.latency_s"));

  j = toy_json();
  j["sources"]["peak_flops"] = 3;
  CHECK_THAT(error_of(j), Contains("sources.peak_flops"));

  CHECK_THAT(error_of(json::array()), Contains("expected a cluster profile"));
}

TEST_CASE("every bundled profile loads and names a source for every number", "[plan][cluster]") {
  CHECK(bundled_cluster_names() ==
        std::vector<std::string>{"host", "dgx-a100-80g", "dgx-h100", "dgx-h200"});
  for (const std::string& name : bundled_cluster_names()) {
    INFO(name);
    const json j = json::parse(bundled_cluster_text(name));
    const ClusterProfile p = ClusterProfile::from_json(j);
    CHECK(p.name == name);
    CHECK(!p.description.empty());
    std::vector<std::string> paths;
    numeric_paths(j, "", paths);
    CHECK(paths.size() > 10);
    for (const std::string& path : paths) {
      INFO(path);
      const json* source = source_of(j.at("sources"), path);
      REQUIRE(source != nullptr);
      CHECK(source->get<std::string>().size() > 20);
    }
    // No stale sources: each names a field the profile holds.
    for (const auto& [field, text] : j.at("sources").items()) {
      INFO(field);
      bool found = false;
      for (const std::string& path : paths) {
        found = found || path == field || path.rfind(field + ".", 0) == 0 ||
                path.rfind(field + "[", 0) == 0;
      }
      CHECK(found);
    }
  }
  // The GPU profiles hold one rank per GPU; the host's are the machine's cores.
  for (const char* name : {"dgx-a100-80g", "dgx-h100", "dgx-h200"}) {
    const ClusterProfile p = bundled_cluster(name);
    CHECK(p.cores == 0);
    CHECK(p.devices_per_node == 8);
    CHECK(p.peak(DType::bf16) > 10 * p.peak(DType::f32));
    CHECK(p.inter_node.bandwidth < p.intra_node.bandwidth);
  }
  CHECK(bundled_cluster("host").cores > 0);
}

TEST_CASE("ring collectives cost latency per step plus volume over bandwidth", "[plan][cluster]") {
  const ClusterProfile p = toy();  // intra 1 us, 1 GB/s; inter 5 us, 0.1 GB/s per NIC
  const int64_t mb = 1000000;
  // all_reduce on 4: 6 steps, 2 * 3/4 of the payload.
  CHECK(p.collective_seconds(Collective::all_reduce, mb, 4, false) ==
        Approx(6e-6 + 1.5e-3).epsilon(1e-12));
  for (Collective c :
       {Collective::reduce_scatter, Collective::all_gather, Collective::all_to_all}) {
    CHECK(p.collective_seconds(c, mb, 4, false) == Approx(3e-6 + 0.75e-3).epsilon(1e-12));
  }
  // broadcast / reduce: ceil(log2 p) steps, the payload once.
  CHECK(p.collective_seconds(Collective::broadcast, mb, 2, false) == Approx(1e-6 + 1e-3));
  CHECK(p.collective_seconds(Collective::broadcast, mb, 5, false) == Approx(3e-6 + 1e-3));
  CHECK(p.collective_seconds(Collective::reduce, mb, 8, false) == Approx(3e-6 + 1e-3));
  CHECK(p.collective_seconds(Collective::reduce, mb, 9, false) == Approx(4e-6 + 1e-3));
  CHECK(p.collective_seconds(Collective::send_recv, mb, 2, false) == Approx(1e-6 + 1e-3));
  for (Collective c : kCollectives) CHECK(p.collective_seconds(c, mb, 1, false) == 0.0);
  CHECK(p.collective_seconds(Collective::all_reduce, 0, 4, false) == Approx(6e-6));

  // Across nodes: one NIC per rank of the group on a node, capped by the intra-node links.
  CHECK(p.collective_seconds(Collective::all_reduce, mb, 8, true) ==
        Approx(14 * 5e-6 + 1.75 * mb / 1e8));
  CHECK(p.collective_seconds(Collective::all_reduce, mb, 8, true, 4) ==
        Approx(14 * 5e-6 + 1.75 * mb / 4e8));
  CHECK(p.collective_seconds(Collective::all_reduce, mb, 8, true, 20) ==
        Approx(14 * 5e-6 + 1.75 * mb / 1e9));

  const RingShape s = ring_shape(Collective::all_reduce, 8);
  CHECK(s.steps == 14);
  CHECK(s.volume == Approx(1.75));
}

TEST_CASE("measured collectives override the link, interpolated over group sizes",
          "[plan][cluster]") {
  ClusterProfile p = toy();
  p.measured[Collective::all_reduce][2] = {1e-5, 2e9};
  p.measured[Collective::all_reduce][4] = {3e-5, 1e9};
  const double b = 4e6;
  // Exact sizes.
  CHECK(p.collective_seconds(Collective::all_reduce, int64_t(b), 2, false) ==
        Approx(2 * 1e-5 + 1.0 * b / 2e9));
  CHECK(p.collective_seconds(Collective::all_reduce, int64_t(b), 4, false) ==
        Approx(6 * 3e-5 + 1.5 * b / 1e9));
  // Between: linear in the group size (3 is halfway from 2 to 4).
  const LinkCost mid = p.intra_node_cost(Collective::all_reduce, 3);
  CHECK(mid.latency_s == Approx(2e-5));
  CHECK(mid.bandwidth == Approx(1.5e9));
  CHECK(p.collective_seconds(Collective::all_reduce, int64_t(b), 3, false) ==
        Approx(4 * 2e-5 + (4.0 / 3.0) * b / 1.5e9));
  // Outside: the nearest measured size.
  CHECK(p.intra_node_cost(Collective::all_reduce, 8) == LinkCost{3e-5, 1e9});
  p.measured[Collective::all_reduce].erase(2);
  CHECK(p.intra_node_cost(Collective::all_reduce, 2) == LinkCost{3e-5, 1e9});
  // Other collectives keep the link; groups across nodes ignore the host's measurements.
  CHECK(p.intra_node_cost(Collective::all_gather, 4) == p.intra_node);
  CHECK(p.collective_seconds(Collective::all_reduce, int64_t(b), 4, true) ==
        Approx(6 * 5e-6 + 1.5 * b / 1e8));
}

TEST_CASE("ranks beyond the cores share them", "[plan][cluster]") {
  ClusterProfile p = toy();
  CHECK(p.sharing_slowdown(100) == 1.0);  // no cores: one device per rank
  CHECK(p.compute_share(100) == 1.0);
  p.cores = 4;
  CHECK(p.sharing_slowdown(1) == 1.0);
  CHECK(p.sharing_slowdown(4) == 1.0);
  CHECK(p.sharing_slowdown(6) == Approx(1.5));
  CHECK(p.sharing_slowdown(8) == Approx(2.0));
  // threads = max(1, cores / ranks), as the trainer sets them.
  CHECK(p.compute_share(1) == 1.0);
  CHECK(p.compute_share(2) == Approx(0.5));
  CHECK(p.compute_share(3) == Approx(0.25));  // one thread each, a core idle
  CHECK(p.compute_share(8) == Approx(1.0 / 8));
}

TEST_CASE("a loaded collective's wait interpolates over the ranks computing", "[plan][cluster]") {
  ClusterProfile p = toy();
  CHECK(p.loaded_wait(8) == 0.0);  // none measured: one rank per device
  p.loaded_wait_s = {{2, 1e-6}, {4, 5e-6}, {8, 2e-5}};
  CHECK(p.loaded_wait(1) == 0.0);
  CHECK(p.loaded_wait(2) == Approx(1e-6));
  CHECK(p.loaded_wait(3) == Approx(3e-6));
  CHECK(p.loaded_wait(6) == Approx(1.25e-5));
  CHECK(p.loaded_wait(16) == Approx(2e-5));  // the largest measured beyond it
  const ClusterProfile back = ClusterProfile::from_json(json::parse(p.to_json().dump()));
  CHECK(back == p);
  json j = toy_json();
  j["loaded_wait_s"] = {{"one", 1e-6}};
  CHECK_THAT(error_of(j), Contains("loaded_wait_s.one"));
  j["loaded_wait_s"] = {{"2", -1}};
  CHECK_THAT(error_of(j), Contains("expected seconds >= 0"));
}

TEST_CASE("GEMM efficiency interpolates in log FLOPs", "[plan][cluster]") {
  const ClusterProfile p = toy();  // (1e6, 0.2), (1e8, 0.6), (1e10, 0.8)
  CHECK(p.gemm_efficiency_at(1e6) == Approx(0.2));
  CHECK(p.gemm_efficiency_at(5e5) == Approx(0.1));  // below: in proportion to the FLOPs
  CHECK(p.gemm_efficiency_at(0) == 0.0);
  CHECK(p.gemm_efficiency_at(1e7) == Approx(0.4));
  CHECK(p.gemm_efficiency_at(1e9) == Approx(0.7));
  CHECK(p.gemm_efficiency_at(1e10) == Approx(0.8));
  CHECK(p.gemm_efficiency_at(1e14) == Approx(0.8));
  CHECK(p.peak(DType::bf16) == 4e12);
  CHECK_THROWS_WITH(p.peak(DType::f16), Contains("f16") && Contains("f32, bf16"));
}

TEST_CASE("load_cluster finds bundled profiles, files and the host", "[plan][cluster]") {
  ClusterProfile a100 = load_cluster("dgx-a100-80g", 16);
  CHECK(a100.nodes == 2);
  CHECK(load_cluster("dgx-a100-80g", 3).nodes == 1);
  CHECK(load_cluster("dgx-h100", 16, 4).nodes == 4);
  CHECK_THROWS_WITH(load_cluster("dgx-h100", 16, 1), Contains("--nodes 2"));
  CHECK_THROWS_WITH(load_cluster("dgx-z9", 8),
                    Contains("dgx-z9") && Contains("host, dgx-a100-80g, dgx-h100, dgx-h200"));
  CHECK_THROWS_WITH(load_cluster("dgx-h100", 0), Contains("world"));

  tessera::testing::TempDir tmp("cluster");
  const std::string file = tmp.file("mine.json");
  ClusterProfile mine = toy();
  std::ofstream(file) << mine.to_json().dump(2);
  const ClusterProfile loaded = load_cluster(file, 6);
  CHECK(loaded.name == "toy");
  CHECK(loaded.nodes == 2);  // 4 devices per node

  const std::string bad = tmp.file("bad.json");
  json broken = toy_json();
  broken["inter_node"]["latency"] = 1;
  std::ofstream(bad) << broken.dump();
  CHECK_THROWS_WITH(load_cluster(bad, 2), Contains("bad.json") && Contains("inter_node.latency"));

  // A calibrated host file: every rank on this machine.
  const std::string calibrated = tmp.file("host-profile.json");
  ClusterProfile host = toy();
  host.name = "host";
  host.cores = 3;
  std::ofstream(calibrated) << host.to_json().dump();
  {
    ScopedEnv env("TESSERA_HOST_PROFILE", calibrated);
    CHECK(host_profile_path() == calibrated);
    const ClusterProfile h = load_cluster("host", 5);
    CHECK(h.cores == 3);
    CHECK(h.nodes == 1);
    CHECK(h.devices_per_node == 5);
    CHECK(h.peak(DType::bf16) == 4e12);
  }
  // No calibrated file: the bundled defaults completed by the quick probe.
  {
    ScopedEnv env("TESSERA_HOST_PROFILE", tmp.file("absent.json"));
    const ClusterProfile h = load_cluster("host", 2);
    CHECK(h.cores == int(std::max(1u, std::thread::hardware_concurrency())));
    CHECK(h.devices_per_node == 2);
    CHECK(h.peak(DType::f32) > 1e9 * h.cores);  // any x86-64 core with FMA does > 1 GFLOP/s
    CHECK(h.memory_bandwidth > 1e9);
    CHECK(h.device_memory > (int64_t(1) << 28));
    CHECK_THAT(h.sources.at("peak_flops").get<std::string>(), Contains("quick probe"));
    CHECK(!h.sources.contains("peak_flops.f32"));
  }
}

TEST_CASE("the quick probe scales the bundled host defaults", "[plan][cluster]") {
  ClusterProfile d = toy();
  d.cores = 1;
  HostProbe probe;
  probe.core_peak_flops = 5e10;
  probe.memory_bandwidth = 3e10;
  probe.gemm_flops = 1e8;
  probe.gemm_efficiency = 0.3;  // the toy curve says 0.6 at 1e8: every point halves
  const ClusterProfile p = probed_host_profile(d, probe);
  CHECK(p.cores == host_cores());
  CHECK(p.peak(DType::f32) == Approx(5e10 * host_cores()));
  CHECK(p.peak(DType::bf16) == Approx(4 * 5e10 * host_cores()));  // the toy's bf16 / f32 ratio
  CHECK(p.memory_bandwidth == 3e10);
  CHECK(p.gemm_efficiency_at(1e8) == Approx(0.3));
  CHECK(p.gemm_efficiency.back().second == Approx(0.4));
  CHECK(p.gemm_efficiency.front().second == Approx(0.1));
  probe.gemm_efficiency = 1.5;  // a turbo clock above the loop's: capped at 1
  CHECK(probed_host_profile(d, probe).gemm_efficiency.back().second == 1.0);
  probe.gemm_efficiency = 0;
  CHECK_THROWS_WITH(probed_host_profile(d, probe), Contains("GEMM efficiency"));
}

TEST_CASE("the probe's measurements are plausible", "[plan][cluster]") {
  const double peak = measure_core_peak_flops(0.001, 5);
  CHECK(peak > 1e9);
  CHECK(peak < 1e12);  // one core: 2 FMA ports x 16 lanes x 2 x 6 GHz would be 384 GFLOP/s
  const double bw = measure_memory_bandwidth(1, int64_t(8) << 20, 2);
  CHECK(bw > 1e8);
  const double gemm = measure_sgemm_flops(128, 128, 128, 1, 0.01);
  CHECK(gemm > 1e8);
  CHECK(gemm < 1.05 * peak * 2);  // a GEMM cannot beat the FMA peak (2x: turbo and noise)
}
