// Group membership for every tensor mode, checked two ways: literal expectations at world size 8,
// and, at 8 and 16, against an independent transcription of Colossal-AI's initialiser loops.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.h"
#include "parallel/mesh/group_layout.h"

using namespace tessera;
using namespace tessera::parallel;

using Groups = std::vector<std::vector<int>>;

namespace {

// Colossal-AI's loops on tensor-local ranks (t = i + q * (j + q * k) for 2.5D and 3D, with i the
// innermost index; 2D t = row * q + col).
GroupLayout reference_tensor_groups(TensorMode mode, int size, int depth) {
  GroupLayout out;
  Groups all(1);
  for (int t = 0; t < size; ++t) all[0].push_back(t);
  out["tensor"] = all;
  if (mode == TensorMode::two_d) {
    int q = 1;
    while (q * q < size) ++q;
    for (int j = 0; j < q; ++j) {
      std::vector<int> row, col;
      for (int k = 0; k < q; ++k) {
        row.push_back(j * q + k);
        col.push_back(j + k * q);
      }
      out["2d_row"].push_back(row);
      out["2d_col"].push_back(col);
    }
  } else if (mode == TensorMode::two_point_five_d) {
    int q = 1;
    while (q * q * depth < size) ++q;
    auto at = [&](int i, int j, int k) { return i + q * (j + q * k); };
    for (int j = 0; j < q; ++j)
      for (int k = 0; k < depth; ++k) {
        std::vector<int> g;
        for (int i = 0; i < q; ++i) g.push_back(at(i, j, k));
        out["2.5d_row"].push_back(g);
      }
    for (int i = 0; i < q; ++i)
      for (int k = 0; k < depth; ++k) {
        std::vector<int> g;
        for (int j = 0; j < q; ++j) g.push_back(at(i, j, k));
        out["2.5d_col"].push_back(g);
      }
    for (int i = 0; i < q; ++i)
      for (int j = 0; j < q; ++j) {
        std::vector<int> g;
        for (int k = 0; k < depth; ++k) g.push_back(at(i, j, k));
        out["2.5d_dep"].push_back(g);
      }
    for (int i = 0; i < q; ++i) {
      std::vector<int> g;
      for (int k = 0; k < depth; ++k)
        for (int j = 0; j < q; ++j) g.push_back(at(i, j, k));
      out["2.5d_xz"].push_back(g);
    }
  } else if (mode == TensorMode::three_d) {
    int d = 1;
    while (d * d * d < size) ++d;
    auto at = [&](int i, int j, int k) { return i + d * (j + d * k); };
    for (int a = 0; a < d; ++a)
      for (int b = 0; b < d; ++b) {
        std::vector<int> input, weight, output, input_x_weight, output_x_weight;
        for (int c = 0; c < d; ++c) {
          input.push_back(at(a, c, b));   // j varies
          weight.push_back(at(c, a, b));  // i varies
          output.push_back(at(a, b, c));  // k varies
        }
        out["3d_input"].push_back(input);
        out["3d_weight"].push_back(weight);
        out["3d_output"].push_back(output);
      }
    for (int fixed = 0; fixed < d; ++fixed) {
      std::vector<int> ixw, oxw;
      for (int x = 0; x < d; ++x)
        for (int i = 0; i < d; ++i) {
          ixw.push_back(at(i, x, fixed));  // same k, j and i vary
          oxw.push_back(at(i, fixed, x));  // same j, k and i vary
        }
      out["3d_input_x_weight"].push_back(ixw);
      out["3d_output_x_weight"].push_back(oxw);
    }
  }
  return out;
}

// The reference for a whole config: mesh (pipeline, data, sequence, tensor), tensor innermost.
GroupLayout reference_layout(const ParallelConfig& c) {
  const int P = c.pipeline, D = c.data, S = c.sequence, T = c.tensor.size;
  auto rank = [&](int p, int d, int s, int t) { return ((p * D + d) * S + s) * T + t; };
  GroupLayout out;
  for (int p = 0; p < P; ++p)
    for (int d = 0; d < D; ++d)
      for (int s = 0; s < S; ++s)
        for (int t = 0; t < T; ++t) {
          std::vector<int> data, pipe, seq;
          if (d == 0) {
            for (int x = 0; x < D; ++x) data.push_back(rank(p, x, s, t));
            out["data"].push_back(data);
          }
          if (p == 0) {
            for (int x = 0; x < P; ++x) pipe.push_back(rank(x, d, s, t));
            out["pipeline"].push_back(pipe);
          }
          if (s == 0) {
            for (int x = 0; x < S; ++x) seq.push_back(rank(p, d, x, t));
            out["sequence"].push_back(seq);
          }
          if (d == 0 && s == 0) {
            std::vector<int> data_seq;
            for (int x = 0; x < D; ++x)
              for (int y = 0; y < S; ++y) data_seq.push_back(rank(p, x, y, t));
            std::sort(data_seq.begin(), data_seq.end());
            out["data_sequence"].push_back(data_seq);
          }
        }
  GroupLayout local = reference_tensor_groups(c.tensor.mode, T, c.tensor.depth);
  for (int p = 0; p < P; ++p)
    for (int d = 0; d < D; ++d)
      for (int s = 0; s < S; ++s)
        for (const auto& [name, groups] : local)
          for (const auto& g : groups) {
            std::vector<int> global;
            for (int t : g) global.push_back(rank(p, d, s, t));
            out[name].push_back(global);
          }
  for (auto& [name, groups] : out) std::sort(groups.begin(), groups.end());
  return out;
}

ParallelConfig make(int pipeline, int data, int sequence, int tensor, const char* mode, int depth = 1) {
  ParallelConfig c;
  c.pipeline = pipeline;
  c.data = data;
  c.sequence = sequence;
  c.tensor = {tensor, tensor_mode_from_name(mode), depth};
  return c;
}

}  // namespace

TEST_CASE("tensor groups at world size 8, written out") {
  GroupLayout l1 = tensor_group_layout(TensorMode::one_d, 8);
  CHECK(l1.size() == 1);
  CHECK(l1["tensor"] == Groups{{0, 1, 2, 3, 4, 5, 6, 7}});

  GroupLayout g2 = group_layout(make(1, 2, 1, 4, "2d"));
  CHECK(g2["tensor"] == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(g2["2d_row"] == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(g2["2d_col"] == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(g2["data"] == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(g2["pipeline"] == Groups{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});

  GroupLayout l25 = tensor_group_layout(TensorMode::two_point_five_d, 8, 2);
  CHECK(l25["2.5d_row"] == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(l25["2.5d_col"] == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(l25["2.5d_dep"] == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(l25["2.5d_xz"] == Groups{{0, 2, 4, 6}, {1, 3, 5, 7}});
  CHECK(l25.size() == 5);

  GroupLayout l3 = tensor_group_layout(TensorMode::three_d, 8);
  CHECK(l3["3d_input"] == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}});
  CHECK(l3["3d_weight"] == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  CHECK(l3["3d_output"] == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}});
  CHECK(l3["3d_input_x_weight"] == Groups{{0, 1, 2, 3}, {4, 5, 6, 7}});
  CHECK(l3["3d_output_x_weight"] == Groups{{0, 1, 4, 5}, {2, 3, 6, 7}});
}

TEST_CASE("every mode's groups match Colossal-AI's definitions at world sizes 8 and 16") {
  std::vector<ParallelConfig> configs = {
      make(1, 1, 1, 8, "1d"),   make(2, 2, 2, 1, "1d"),   make(2, 2, 1, 2, "1d"),
      make(1, 2, 1, 4, "2d"),   make(2, 1, 1, 4, "2d"),   make(1, 1, 1, 8, "2.5d", 2),
      make(1, 1, 1, 8, "3d"),   make(1, 1, 2, 4, "1d"),   make(1, 1, 1, 16, "2d"),
      make(2, 2, 1, 4, "2d"),   make(1, 1, 1, 16, "2.5d", 4), make(1, 2, 1, 8, "2.5d", 2),
      make(1, 2, 1, 8, "3d"),   make(2, 1, 1, 8, "3d"),   make(1, 1, 1, 16, "1d"),
      make(2, 2, 2, 2, "1d"),   make(1, 1, 4, 4, "2d"),
  };
  for (const ParallelConfig& c : configs) {
    INFO(c.to_json().dump());
    GroupLayout got = group_layout(c);
    GroupLayout want = reference_layout(c);
    REQUIRE(got.size() == want.size());
    for (const auto& [name, groups] : want) {
      INFO(name);
      REQUIRE(got.count(name) == 1);
      CHECK(got.at(name) == groups);
      // Every group kind partitions the world, each group the same size.
      std::vector<int> seen(size_t(c.world_size()), 0);
      for (const auto& g : got.at(name)) {
        CHECK(g.size() == got.at(name)[0].size());
        for (int r : g) ++seen[size_t(r)];
      }
      CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
    }
  }
}

TEST_CASE("the mesh axes factor the tensor axis by mode") {
  DeviceMesh m = build_mesh(make(2, 1, 1, 8, "2.5d", 2));
  CHECK(m.str() == "(pipeline=2, data=1, sequence=1, tp_dep=2, tp_row=2, tp_col=2)");
  CHECK(build_mesh(make(1, 1, 1, 27, "3d")).str() ==
        "(pipeline=1, data=1, sequence=1, tp_k=3, tp_j=3, tp_i=3)");
  CHECK(build_mesh(make(1, 1, 1, 9, "2d")).str() ==
        "(pipeline=1, data=1, sequence=1, tp_row=3, tp_col=3)");
  CHECK_THROWS_WITH(tensor_group_layout(TensorMode::three_d, 9), Catch::Contains("to be a cube"));
}

TEST_CASE("the embedding group joins the first and last stage of each pipeline group") {
  ParallelConfig c;
  c.pipeline = 4;
  c.data = 2;
  // Mesh (pipeline, data): rank = stage * 2 + data.
  CHECK(embedding_groups(c) == Groups{{0, 6}, {1, 7}});
  c.pipeline = 2;
  c.data = 1;
  CHECK(embedding_groups(c) == Groups{{0, 1}});
  c.pipeline = 1;
  c.data = 4;
  CHECK(embedding_groups(c).empty());
}
