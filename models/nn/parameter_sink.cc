// The building thread's parameter sink (see parameter_sink.h).
#include "models/nn/parameter_sink.h"

namespace tessera::nn {
namespace {

thread_local ParameterSink* current_sink = nullptr;

}  // namespace

ScopedParameterSink::ScopedParameterSink(ParameterSink& sink) : previous_(current_sink) {
  current_sink = &sink;
}

ScopedParameterSink::~ScopedParameterSink() { current_sink = previous_; }

ParameterSink* current_parameter_sink() { return current_sink; }

void replace_data(const Tensor& t, const Tensor& src) {
  TensorImpl* impl = t.impl();
  impl->storage = src.storage();
  impl->shape = src.shape();
  impl->strides = src.strides();
  impl->offset = src.offset();
  impl->dtype = src.dtype();
  impl->contiguous = src.is_contiguous();
}

}  // namespace tessera::nn
