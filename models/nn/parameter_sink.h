// A scoped observer of parameter registration. While a ScopedParameterSink lives on a thread,
// every Module::register_parameter on that thread hands the new parameter (after its checks) to
// the sink, in registration order; a tied parameter registered by two modules arrives twice.
//
// It exists for builds that must not hold the whole model: ZeRO stage 3's sharded build
// (models/train/zero_build.h) keeps each rank's pieces of a parameter the moment a layer has drawn
// it and releases the rest, as DeepSpeed's zero.Init partitions each module's parameters as it is
// constructed. Layers draw their weights in their constructors and do not see a build-wide object
// when they register them, so the hook is scoped to the building thread rather than passed in.
#pragma once

#include "core/tensor.h"

namespace tessera::nn {

class ParameterSink {
 public:
  virtual ~ParameterSink() = default;
  // `t` is registered: a floating leaf holding its initial values. The sink may replace its data
  // in place (replace_data) or release its storage; the layer keeps the same handle.
  virtual void on_parameter(const Tensor& t) = 0;
};

class ScopedParameterSink {
 public:
  explicit ScopedParameterSink(ParameterSink& sink);
  ~ScopedParameterSink();
  ScopedParameterSink(const ScopedParameterSink&) = delete;
  ScopedParameterSink& operator=(const ScopedParameterSink&) = delete;

 private:
  ParameterSink* previous_;
};

// The sink of the innermost live scope on this thread (null: none).
ParameterSink* current_parameter_sink();

// Points t's TensorImpl at src's data (same shape), so every handle on t sees the new storage,
// dtype or device while its autograd identity (requires_grad, grad, hooks) stays.
void replace_data(const Tensor& t, const Tensor& src);

}  // namespace tessera::nn
