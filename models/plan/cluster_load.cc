// Finding a profile: the bundled ones (compiled in), a profile file, or the host's (calibrated
// file, else bundled defaults completed by a quick probe); then its node count for the world.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "models/plan/bundled_profiles.h"
#include "models/plan/cluster.h"
#include "models/plan/host_probe.h"

namespace tessera::plan {
namespace {

std::string names_list() {
  std::string out;
  for (const std::string& n : bundled_cluster_names()) out += str_cat(out.empty() ? "" : ", ", n);
  return out;
}

ClusterProfile parse_profile(const std::string& text, const std::string& origin) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    TS_FAIL("cluster", "expected a JSON profile in ", origin, ", got a parse error: ", e.what());
  }
  try {
    return ClusterProfile::from_json(j);
  } catch (const ValueError& e) {
    TS_FAIL("cluster", origin, ": ", e.what());
  }
}

ClusterProfile read_profile_file(const std::string& path) {
  std::ifstream in(path);
  TS_CHECK(in.good(), "cluster", "expected a readable profile file at '", path, "', got none");
  std::stringstream text;
  text << in.rdbuf();
  return parse_profile(text.str(), "'" + path + "'");
}

// Spreads `world` ranks over the profile's nodes: a host profile (cores > 0) holds every rank on
// one machine unless told otherwise; a GPU cluster fills nodes of devices_per_node devices.
void place_world(ClusterProfile& p, int world, int nodes) {
  TS_CHECK(world >= 1, "cluster", "expected a world of at least 1 rank, got ", world);
  TS_CHECK(nodes >= 0, "cluster", "expected --nodes >= 0 (0: as many as the world needs), got ",
           nodes);
  if (p.cores > 0) {
    p.nodes = std::max(1, nodes);
    p.devices_per_node = (world + p.nodes - 1) / p.nodes;
    return;
  }
  const int needed = (world + p.devices_per_node - 1) / p.devices_per_node;
  p.nodes = nodes == 0 ? needed : nodes;
  TS_CHECK(int64_t(p.nodes) * p.devices_per_node >= world, "cluster", "expected ", p.nodes,
           " node(s) of ", p.devices_per_node, " devices (cluster '", p.name, "') to hold ", world,
           " ranks, got room for ", int64_t(p.nodes) * p.devices_per_node, "; use --nodes ", needed,
           " or more");
}

}  // namespace

std::vector<std::string> bundled_cluster_names() {
  std::vector<std::string> names;
  for (const BundledProfile& b : bundled_profiles()) names.push_back(b.name);
  // The host first: it is the default and the only one measured here.
  std::stable_partition(names.begin(), names.end(),
                        [](const std::string& n) { return n == "host"; });
  return names;
}

const std::string& bundled_cluster_text(const std::string& name) {
  static const std::vector<std::pair<std::string, std::string>> texts = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const BundledProfile& b : bundled_profiles()) out.emplace_back(b.name, b.text);
    return out;
  }();
  for (const auto& [n, text] : texts) {
    if (n == name) return text;
  }
  TS_FAIL("cluster", "expected a bundled cluster (", names_list(), "), got '", name, "'");
}

ClusterProfile bundled_cluster(const std::string& name) {
  return parse_profile(bundled_cluster_text(name), "the bundled profile '" + name + "'");
}

std::string host_profile_path() {
  if (const char* env = std::getenv("TESSERA_HOST_PROFILE"); env != nullptr && *env != '\0') {
    return env;
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr && *home != '\0' ? home : ".") +
         "/.cache/tessera/host-profile.json";
}

ClusterProfile load_cluster(const std::string& name_or_path, int world, int nodes) {
  ClusterProfile p;
  const std::vector<std::string> names = bundled_cluster_names();
  std::error_code ec;
  if (name_or_path == "host") {
    const std::string path = host_profile_path();
    p = std::filesystem::exists(path, ec)
            ? read_profile_file(path)
            : probed_host_profile(bundled_cluster("host"), quick_host_probe());
  } else if (std::find(names.begin(), names.end(), name_or_path) != names.end()) {
    p = bundled_cluster(name_or_path);
  } else if (std::filesystem::is_regular_file(name_or_path, ec)) {
    p = read_profile_file(name_or_path);
  } else {
    TS_FAIL("cluster", "expected a cluster (", names_list(), ") or a profile file, got '",
            name_or_path, "' (no such file)");
  }
  place_world(p, world, nodes);
  return p;
}

}  // namespace tessera::plan
