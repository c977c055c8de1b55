// The backward engine: walks the graph from the roots in reverse topological order (dependency
// counts, ties broken by creation order), sums gradients per input, accumulates into leaves and
// fires their grad-ready hooks, then frees saved tensors unless retain_graph.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tessera::autograd {

struct BackwardOptions {
  bool retain_graph = false;
  bool create_graph = false;  // record the backward itself (higher-order gradients); implies retain_graph
};

// Gradients of `roots` (scalar roots may pass an undefined grad, meaning 1).
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads = {},
              const BackwardOptions& opts = {});

// d(sum roots * grads)/d(inputs) without touching .grad of leaves (torch.autograd.grad).
std::vector<Tensor> grad(const std::vector<Tensor>& roots, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grads = {}, const BackwardOptions& opts = {});

}  // namespace tessera::autograd
