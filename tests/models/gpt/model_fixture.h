// Loads the model reference fixtures written by gen_gpt_fixture.py, ../bert/gen_bert_fixture.py and
// ../vit/gen_vit_fixture.py (format in model_fixture_lib.py) and compares a model's gradients with
// the reference's, parameter by parameter.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/nn/module.h"

namespace tessera::testing {

struct AdamWReference {
  double lr = 0, beta1 = 0, beta2 = 0, eps = 0, weight_decay = 0;
  std::vector<double> losses;  // the loss before each step
};

struct ModelFixture {
  std::string model;
  nlohmann::json config;
  nn::NamedTensors hf_params;  // Hugging Face names and layouts
  std::map<std::string, Tensor> inputs, outputs;
  std::map<std::string, double> losses;
  double loss = 0;            // the scalar whose gradients hf_grads holds
  nn::NamedTensors hf_grads;  // Hugging Face names and layouts
  AdamWReference adamw;
};

// `relative` to the workspace root (found under the Bazel runfiles, see fixtures.h).
ModelFixture load_model_fixture(const std::string& relative);

// |a - e| <= rtol * |e| + atol, with a message naming both values.
void require_scalar_close(double actual, double expected, double rtol, double atol,
                          const std::string& what);

// Every parameter of `model` has a gradient close to the entry of the same name in `expected`
// (our names; extra entries, e.g. a tied weight's second name, are ignored). Returns how many
// parameters were compared.
size_t require_grads_close(const nn::Module& model, const nn::NamedTensors& expected, double rtol,
                           double atol);

// A path for a scratch file inside the test's temporary directory.
std::string scratch_path(const std::string& file);

}  // namespace tessera::testing
