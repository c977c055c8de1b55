// Tensor: a cheap handle to a shared TensorImpl. Copying a Tensor shares everything; views
// (view, permute, slice, expand, ...) share the Storage with a shape, strides and offset of their
// own. The member functions here are raw: they never record autograd history. The differentiable
// op API (autograd/ops.h) builds on them.
#pragma once

#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"
#include "core/storage.h"

namespace tessera {

namespace autograd {
class Node;
}

struct TensorImpl;
class Tensor;

// Runs when a leaf's gradient has been fully accumulated in a backward pass.
using GradReadyHook = std::function<void(const Tensor& leaf)>;

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}
  // A tensor over `storage` with the given geometry.
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset, DType dtype);

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Strides& strides() const;
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t offset() const;
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  size_t itemsize() const { return dtype_size(dtype()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const;
  // Address of element (0, ..., 0).
  void* data_ptr() const;
  template <typename T>
  T* data() const {
    TS_CHECK(dtype() == dtype_of<T>, "data", "expected dtype ", dtype_name(dtype_of<T>), ", got ",
             dtype_name(dtype()));
    return static_cast<T*>(data_ptr());
  }
  // The single element of a one-element tensor (any dtype), converted to double.
  double item() const;

  // Views: share storage. view() needs compatible strides; reshape() copies when it must.
  Tensor view(Shape shape) const;
  Tensor reshape(Shape shape) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(Shape shape) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor as_strided(Shape shape, Strides strides, int64_t offset) const;

  // Copies.
  Tensor contiguous() const;
  Tensor clone() const;
  // Copies src (broadcast to this shape, converted to this dtype) into this tensor's elements.
  const Tensor& copy_(const Tensor& src) const;
  const Tensor& fill_(double value) const;
  const Tensor& zero_() const { return fill_(0.0); }
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  // A new handle on the same storage with no autograd history (shares the version counter).
  Tensor detach() const;

  // Autograd state (see autograd/).
  bool requires_grad() const;
  // Only leaves may change this; returns *this.
  const Tensor& set_requires_grad(bool on) const;
  bool is_leaf() const;
  Tensor grad() const;
  void set_grad(const Tensor& grad) const;
  const std::shared_ptr<autograd::Node>& grad_fn() const;
  uint32_t output_nr() const;
  void set_history(std::shared_ptr<autograd::Node> fn, uint32_t output_nr) const;
  void add_grad_ready_hook(GradReadyHook hook) const;
  const std::vector<GradReadyHook>& grad_ready_hooks() const;
  uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  // Same TensorImpl (identity, not value equality).
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  // True when this handle is the only one to its TensorImpl and that impl the only user of its
  // whole storage (no view, no other handle): its memory may be taken over instead of copied.
  bool is_sole_owner() const;
  TensorImpl* impl() const { return impl_.get(); }
  // "tensor([[1.0, 2.0], ...], shape=(2, 3), dtype=f32, device=cpu)"
  std::string to_string() const;
  // "(2, 3) f32 cpu", for error messages.
  std::string describe() const;

 private:
  // Inline with the throw out of line: every op reads a tensor's geometry several times.
  void check_defined(const char* op) const {
    if (impl_ == nullptr) [[unlikely]]
      throw_undefined(op);
  }
  [[noreturn]] static void throw_undefined(const char* op);
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;
  uint32_t output_nr = 0;
  std::vector<GradReadyHook> grad_ready_hooks;
  // A leaf's AccumulateGrad, shared by every op that uses the leaf while a graph holds it.
  std::weak_ptr<autograd::Node> grad_accumulator;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;
  bool contiguous = true;  // computed once, when the geometry is set
  std::unique_ptr<AutogradMeta> autograd;

  AutogradMeta& autograd_meta();
};

bool compute_contiguous(const Shape& shape, const Strides& strides);

inline const Shape& Tensor::shape() const {
  check_defined("shape");
  return impl_->shape;
}
inline const Strides& Tensor::strides() const {
  check_defined("strides");
  return impl_->strides;
}
inline int64_t Tensor::offset() const { return impl_->offset; }
inline int64_t Tensor::numel() const { return shape_numel(shape()); }
inline DType Tensor::dtype() const {
  check_defined("dtype");
  return impl_->dtype;
}
inline bool Tensor::is_contiguous() const { return impl_->contiguous; }
inline const std::shared_ptr<Storage>& Tensor::storage() const {
  check_defined("storage");
  return impl_->storage;
}

}  // namespace tessera
