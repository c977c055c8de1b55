// ClusterProfile <-> JSON. Strict: every key is known, every value has its type and range, each
// error naming the key by its full path ("intra_node.bandwidth"), through the training config's
// section reader.
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "models/plan/cluster.h"
#include "models/train/config_reader.h"

namespace tessera::plan {
namespace {

using nlohmann::json;
using train::SectionReader;

constexpr DType kComputeDTypes[] = {DType::f32, DType::bf16, DType::f16};

void require(const SectionReader& r, const json& j, const char* key) {
  TS_CHECK(r.has(key), "config", "expected key '", r.key_path(key),
           "', got none (keys: ", j.dump().substr(0, 200), ")");
}

// A number > 0 (SectionReader's ranges are closed).
double positive(SectionReader& r, const char* key, double fallback, double max = 1e300) {
  const double x = r.number(key, fallback, 0, max);
  TS_CHECK(x > 0, "config", r.key_path(key), ": expected a number > 0, got ", x);
  return x;
}

LinkCost read_link(const json& j, const std::string& path) {
  TS_CHECK(j.is_object(), "config", path, ": expected an object {latency_s, bandwidth}, got ",
           j.dump());
  SectionReader r(j, path);
  require(r, j, "latency_s");
  require(r, j, "bandwidth");
  LinkCost l{r.number("latency_s", 0, 0), r.number("bandwidth", 0, 0)};
  r.done();
  return l;
}

json link_json(const LinkCost& l) {
  return {{"latency_s", l.latency_s}, {"bandwidth", l.bandwidth}};
}

std::map<DType, double> read_peaks(const json& j) {
  SectionReader r(j, "peak_flops");
  std::map<DType, double> peaks;
  for (DType d : kComputeDTypes) {
    if (r.has(dtype_name(d)))
      peaks[d] = positive(r, dtype_name(d), 0);
    else
      r.number(dtype_name(d), 0);  // records the key as known for done()
  }
  r.done();
  TS_CHECK(!peaks.empty(), "config", "peak_flops: expected f32, bf16 or f16, got ", j.dump());
  return peaks;
}

std::vector<std::pair<double, double>> read_curve(const json& j) {
  TS_CHECK(j.is_array() && !j.empty(), "config",
           "gemm_efficiency: expected a non-empty array of [flops, efficiency], got ", j.dump());
  std::vector<std::pair<double, double>> curve;
  for (size_t i = 0; i < j.size(); ++i) {
    const json& point = j[i];
    const bool pair =
        point.is_array() && point.size() == 2 && point[0].is_number() && point[1].is_number();
    TS_CHECK(pair, "config", "gemm_efficiency[", i, "]: expected a pair [flops, efficiency], got ",
             point.dump());
    const double flops = point[0].get<double>(), eff = point[1].get<double>();
    TS_CHECK(std::isfinite(flops) && flops > 0, "config", "gemm_efficiency[", i,
             "][0]: expected FLOPs > 0, got ", point[0].dump());
    TS_CHECK(eff > 0 && eff <= 1, "config", "gemm_efficiency[", i,
             "][1]: expected an efficiency in (0, 1], got ", point[1].dump());
    TS_CHECK(curve.empty() || flops > curve.back().first, "config", "gemm_efficiency[", i,
             "]: expected more FLOPs than the point before (", curve.back().first, "), got ",
             point[0].dump());
    curve.emplace_back(flops, eff);
  }
  return curve;
}

std::map<Collective, std::map<int, LinkCost>> read_measured(const json& j) {
  TS_CHECK(j.is_object(), "config", "measured: expected an object, got ", j.dump());
  std::map<Collective, std::map<int, LinkCost>> out;
  for (const auto& [name, sizes] : j.items()) {
    const std::string path = "measured." + name;
    Collective c{};
    bool known = false;
    std::string names;
    for (Collective k : kCollectives) {
      if (name == collective_name(k)) c = k, known = true;
      names += str_cat(names.empty() ? "" : ", ", collective_name(k));
    }
    TS_CHECK(known, "config", "unknown key '", path, "' (measured takes: ", names, ")");
    TS_CHECK(sizes.is_object(), "config", path,
             ": expected an object of group size -> {latency_s, bandwidth}, got ", sizes.dump());
    for (const auto& [size, link] : sizes.items()) {
      char* end = nullptr;
      const long p = std::strtol(size.c_str(), &end, 10);
      TS_CHECK(!size.empty() && *end == '\0' && p >= 2 && p <= (1 << 20), "config", "key '", path,
               ".", size, "': expected a group size >= 2 as the key");
      const LinkCost l = read_link(link, path + "." + size);
      TS_CHECK(l.bandwidth > 0, "config", path, ".", size, ".bandwidth: expected > 0, got ",
               l.bandwidth);
      out[c][int(p)] = l;
    }
  }
  return out;
}

std::map<int, double> read_loaded_wait(const json& j) {
  TS_CHECK(j.is_object(), "config", "loaded_wait_s: expected an object of ranks -> seconds, got ",
           j.dump());
  std::map<int, double> out;
  for (const auto& [size, seconds] : j.items()) {
    char* end = nullptr;
    const long p = std::strtol(size.c_str(), &end, 10);
    TS_CHECK(!size.empty() && *end == '\0' && p >= 2 && p <= (1 << 20), "config",
             "key 'loaded_wait_s.", size, "': expected a number of ranks >= 2 as the key");
    TS_CHECK(seconds.is_number() && seconds.get<double>() >= 0, "config", "loaded_wait_s.", size,
             ": expected seconds >= 0, got ", seconds.dump());
    out[int(p)] = seconds.get<double>();
  }
  return out;
}

json read_sources(const json& j) {
  TS_CHECK(j.is_object(), "config", "sources: expected an object of field -> source, got ",
           j.dump());
  for (const auto& [key, text] : j.items()) {
    TS_CHECK(text.is_string(), "config", "sources.", key,
             ": expected a string (where the number comes from), got ", text.dump());
  }
  return j;
}

}  // namespace

ClusterProfile ClusterProfile::from_json(const json& j) {
  TS_CHECK(j.is_object(), "config", "expected a cluster profile (a JSON object), got ",
           j.dump().substr(0, 200));
  SectionReader r(j, "");
  for (const char* key : {"name", "devices_per_node", "device_memory", "peak_flops",
                          "memory_bandwidth", "gemm_efficiency", "intra_node"}) {
    require(r, j, key);
  }
  ClusterProfile p;
  p.name = r.string("name", "");
  TS_CHECK(!p.name.empty(), "config", "name: expected a non-empty string, got \"\"");
  p.description = r.string("description", "");
  p.devices_per_node = int(r.integer("devices_per_node", 1, 1, 1 << 20));
  p.nodes = int(r.integer("nodes", 1, 1, 1 << 20));
  p.device_memory = r.integer("device_memory", 0, 1);
  p.peak_flops = read_peaks(r.object("peak_flops"));
  p.memory_bandwidth = positive(r, "memory_bandwidth", 0);
  p.gemm_efficiency = read_curve(*r.any("gemm_efficiency"));
  p.attention_efficiency = positive(r, "attention_efficiency", p.attention_efficiency, 1);
  p.elementwise_efficiency = positive(r, "elementwise_efficiency", p.elementwise_efficiency, 1);
  p.launch_overhead_s = r.number("launch_overhead_s", 0, 0);
  p.block_overhead_s = r.number("block_overhead_s", 0, 0);
  p.micro_batch_overhead_s = r.number("micro_batch_overhead_s", 0, 0);
  p.intra_node = read_link(*r.any("intra_node"), "intra_node");
  TS_CHECK(p.intra_node.bandwidth > 0, "config", "intra_node.bandwidth: expected > 0, got ",
           p.intra_node.bandwidth);
  if (const json* v = r.any("inter_node")) p.inter_node = read_link(*v, "inter_node");
  if (const json* v = r.any("host_link")) p.host_link = read_link(*v, "host_link");
  p.host_adam_params_per_s = r.number("host_adam_params_per_s", 0, 0);
  if (const json* v = r.any("measured")) p.measured = read_measured(*v);
  if (const json* v = r.any("loaded_wait_s")) p.loaded_wait_s = read_loaded_wait(*v);
  p.cores = int(r.integer("cores", 0, 0, 1 << 20));
  if (const json* v = r.any("sources")) p.sources = read_sources(*v);
  r.done();
  return p;
}

json ClusterProfile::to_json() const {
  json peaks = json::object();
  for (const auto& [d, flops] : peak_flops) peaks[dtype_name(d)] = flops;
  json curve = json::array();
  for (const auto& [flops, eff] : gemm_efficiency) curve.push_back({flops, eff});
  json meas = json::object();
  for (const auto& [c, sizes] : measured) {
    json by_size = json::object();
    for (const auto& [p, link] : sizes) by_size[std::to_string(p)] = link_json(link);
    meas[collective_name(c)] = by_size;
  }
  json waits = json::object();
  for (const auto& [ranks, seconds] : loaded_wait_s) waits[std::to_string(ranks)] = seconds;
  return {{"name", name},
          {"description", description},
          {"devices_per_node", devices_per_node},
          {"nodes", nodes},
          {"device_memory", device_memory},
          {"peak_flops", peaks},
          {"memory_bandwidth", memory_bandwidth},
          {"gemm_efficiency", curve},
          {"attention_efficiency", attention_efficiency},
          {"elementwise_efficiency", elementwise_efficiency},
          {"launch_overhead_s", launch_overhead_s},
          {"block_overhead_s", block_overhead_s},
          {"micro_batch_overhead_s", micro_batch_overhead_s},
          {"intra_node", link_json(intra_node)},
          {"inter_node", link_json(inter_node)},
          {"host_link", link_json(host_link)},
          {"host_adam_params_per_s", host_adam_params_per_s},
          {"measured", meas},
          {"loaded_wait_s", waits},
          {"cores", cores},
          {"sources", sources.is_object() ? sources : json::object()}};
}

}  // namespace tessera::plan
