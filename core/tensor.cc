#include "core/tensor.h"

#include <algorithm>
#include <numeric>

#include "core/copy.h"

namespace tessera {

bool compute_contiguous(const Shape& shape, const Strides& strides) {
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

AutogradMeta& TensorImpl::autograd_meta() {
  if (!autograd) autograd = std::make_unique<AutogradMeta>();
  return *autograd;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Strides strides, int64_t offset,
               DType dtype)
    : impl_(std::make_shared<TensorImpl>()) {
  impl_->contiguous = compute_contiguous(shape, strides);
  impl_->storage = std::move(storage);
  impl_->shape = std::move(shape);
  impl_->strides = std::move(strides);
  impl_->offset = offset;
  impl_->dtype = dtype;
}

void Tensor::throw_undefined(const char* op) {
  TS_FAIL(op, "expected a defined tensor, got an undefined one");
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
Device Tensor::device() const {
  check_defined("device");
  return impl_->storage->device();
}
bool Tensor::is_sole_owner() const {
  return impl_ && impl_.use_count() == 1 && storage().use_count() == 1 && offset() == 0 &&
         is_contiguous() && storage()->nbytes() == size_t(numel()) * dtype_size(dtype());
}

void* Tensor::data_ptr() const {
  return static_cast<char*>(storage()->data()) + impl_->offset * int64_t(itemsize());
}

double Tensor::item() const {
  TS_CHECK(numel() == 1, "item", "expected a one-element tensor, got shape ", shape_str(shape()));
  Tensor c = to(kCPU);
  return dispatch_dtype(dtype(), [&]<typename T>() { return to_double(*c.data<T>()); });
}

Tensor Tensor::as_strided(Shape shape, Strides strides, int64_t offset) const {
  TS_CHECK(shape.size() == strides.size(), "as_strided", "expected as many strides as dims, got ",
           shape.size(), " and ", strides.size());
  int64_t max_off = offset;
  for (size_t i = 0; i < shape.size(); ++i) {
    TS_CHECK(shape[i] >= 0 && strides[i] >= 0, "as_strided", "expected non-negative sizes and strides, got ",
             shape_str(shape), " and ", shape_str(strides));
    if (shape[i] == 0) max_off = offset - 1;
    if (max_off >= offset) max_off += (shape[i] - 1) * strides[i];
  }
  TS_CHECK(offset >= 0 && (max_off < offset ||
                           (max_off + 1) * int64_t(itemsize()) <= int64_t(storage()->nbytes())),
           "as_strided", "view of shape ", shape_str(shape), " strides ", shape_str(strides), " offset ",
           offset, " exceeds the storage of ", storage()->nbytes(), " bytes");
  Tensor out(impl_->storage, std::move(shape), std::move(strides), offset, impl_->dtype);
  return out;
}

namespace {
// Resolves a single -1 in `shape` against numel.
Shape infer_shape(Shape shape, int64_t numel, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TS_CHECK(infer < 0, op, "expected at most one -1 in shape, got ", shape_str(shape));
      infer = int64_t(i);
    } else {
      TS_CHECK(shape[i] >= 0, op, "expected non-negative sizes, got ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TS_CHECK(known != 0 && numel % known == 0, op, "shape ", shape_str(shape),
             " is invalid for input of size ", numel);
    shape[infer] = numel / known;
  }
  TS_CHECK(shape_numel(shape) == numel, op, "shape ", shape_str(shape), " is invalid for input of size ",
           numel);
  return shape;
}

// Strides that view `old` geometry as `shape` without copying, or empty if impossible.
// Splits and merges dims within runs of memory-contiguous dims (as numpy/PyTorch do).
bool view_strides(const Shape& old_shape, const Strides& old_strides, const Shape& shape, Strides* out) {
  out->assign(shape.size(), 1);
  if (old_shape.empty()) return true;  // a scalar views as any all-ones shape
  if (shape_numel(shape) == 0) {
    *out = contiguous_strides(shape);
    return true;
  }
  int64_t view_d = int64_t(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = int64_t(old_shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        (*out)[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}
}  // namespace

Tensor Tensor::view(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), "view");
  Strides strides;
  TS_CHECK(view_strides(this->shape(), this->strides(), shape, &strides), "view",
           "cannot view a tensor of shape ", shape_str(this->shape()), " and strides ",
           shape_str(this->strides()), " as ", shape_str(shape), "; use reshape (it copies)");
  return Tensor(impl_->storage, std::move(shape), std::move(strides), offset(), dtype());
}

Tensor Tensor::reshape(Shape shape) const {
  shape = infer_shape(std::move(shape), numel(), "reshape");
  Strides strides;
  if (view_strides(this->shape(), this->strides(), shape, &strides))
    return Tensor(impl_->storage, std::move(shape), std::move(strides), offset(), dtype());
  return contiguous().view(std::move(shape));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  TS_CHECK(start <= end, "flatten", "expected start <= end, got ", start, " and ", end);
  Shape s(shape().begin(), shape().begin() + start);
  int64_t merged = 1;
  for (int64_t d = start; d <= end; ++d) merged *= shape()[d];
  s.push_back(merged);
  s.insert(s.end(), shape().begin() + end + 1, shape().end());
  return reshape(std::move(s));
}

Tensor Tensor::permute(const std::vector<int64_t>& dims) const {
  TS_CHECK(int64_t(dims.size()) == dim(), "permute", "expected ", dim(), " dims, got ", dims.size());
  Shape s(dims.size());
  Strides st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i], dim(), "permute");
    TS_CHECK(!seen[d], "permute", "dim ", d, " appears twice in ", shape_str(dims));
    seen[d] = true;
    s[i] = shape()[d];
    st[i] = strides()[d];
  }
  return Tensor(impl_->storage, std::move(s), std::move(st), offset(), dtype());
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  std::vector<int64_t> dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (dim() == 0) return *this;
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  TS_CHECK(step > 0, "slice", "expected a positive step, got ", step);
  int64_t n = shape()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape();
  Strides st = strides();
  s[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return Tensor(impl_->storage, std::move(s), std::move(st), offset() + start * strides()[d], dtype());
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  TS_CHECK(start >= 0 && length >= 0 && start + length <= shape()[d], "narrow", "expected start ", start,
           " + length ", length, " within size ", shape()[d], " of dim ", d);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  int64_t n = shape()[d];
  TS_CHECK(index >= -n && index < n, "select", "index ", index, " is out of range for dim ", d,
           " of size ", n);
  if (index < 0) index += n;
  Shape s = shape();
  Strides st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(impl_->storage, std::move(s), std::move(st), offset() + index * strides()[d], dtype());
}

Tensor Tensor::expand(Shape target) const {
  TS_CHECK(target.size() >= shape().size(), "expand", "cannot expand shape ", shape_str(shape()), " to ",
           shape_str(target));
  size_t lead = target.size() - shape().size();
  Strides st(target.size(), 0);
  for (size_t i = 0; i < target.size(); ++i) {
    if (i < lead) {
      TS_CHECK(target[i] >= 0, "expand", "expected non-negative sizes, got ", shape_str(target));
      continue;
    }
    int64_t have = shape()[i - lead];
    if (target[i] == -1) target[i] = have;
    TS_CHECK(have == target[i] || have == 1, "expand", "cannot expand shape ", shape_str(shape()), " to ",
             shape_str(target));
    st[i] = have == target[i] ? strides()[i - lead] : 0;
  }
  return Tensor(impl_->storage, std::move(target), std::move(st), offset(), dtype());
}

Tensor Tensor::squeeze() const {
  Shape s;
  Strides st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (shape()[i] == 1) continue;
    s.push_back(shape()[i]);
    st.push_back(strides()[i]);
  }
  return Tensor(impl_->storage, std::move(s), std::move(st), offset(), dtype());
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape s = shape();
  Strides st = strides();
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(impl_->storage, std::move(s), std::move(st), offset(), dtype());
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  Strides st = strides();
  int64_t stride = d < dim() ? strides()[d] * shape()[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return Tensor(impl_->storage, std::move(s), std::move(st), offset(), dtype());
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  Tensor out(std::make_shared<Storage>(size_t(numel()) * itemsize(), device()), shape(),
             contiguous_strides(shape()), 0, dtype());
  copy_tensor(*this, out);
  return out;
}

const Tensor& Tensor::copy_(const Tensor& src) const {
  copy_tensor(src.shape() == shape() ? src : src.expand(shape()), *this);
  bump_version();
  return *this;
}

const Tensor& Tensor::fill_(double value) const {
  fill_tensor(*this, value);
  bump_version();
  return *this;
}

Tensor Tensor::to(DType t) const {
  if (t == dtype()) return *this;
  Tensor out(std::make_shared<Storage>(size_t(numel()) * dtype_size(t), device()), shape(),
             contiguous_strides(shape()), 0, t);
  copy_tensor(*this, out);
  return out;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  Tensor out(std::make_shared<Storage>(size_t(numel()) * itemsize(), d), shape(),
             contiguous_strides(shape()), 0, dtype());
  copy_tensor(*this, out);
  return out;
}

Tensor Tensor::detach() const { return Tensor(impl_->storage, shape(), strides(), offset(), dtype()); }

bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }

const Tensor& Tensor::set_requires_grad(bool on) const {
  check_defined("requires_grad");
  TS_CHECK(is_leaf(), "requires_grad",
           "can only change requires_grad of a leaf tensor; detach() a non-leaf first");
  TS_CHECK(!on || is_floating(dtype()), "requires_grad",
           "only floating tensors can require gradients, got ", dtype_name(dtype()));
  impl_->autograd_meta().requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !impl_->autograd || !impl_->autograd->grad_fn; }

Tensor Tensor::grad() const { return impl_->autograd ? impl_->autograd->grad : Tensor(); }

void Tensor::set_grad(const Tensor& grad) const {
  if (grad.defined())
    TS_CHECK(grad.shape() == shape(), "set_grad", "expected gradient of shape ", shape_str(shape()),
             ", got ", shape_str(grad.shape()));
  impl_->autograd_meta().grad = grad;
}

const std::shared_ptr<autograd::Node>& Tensor::grad_fn() const {
  static const std::shared_ptr<autograd::Node> none;
  return impl_->autograd ? impl_->autograd->grad_fn : none;
}

uint32_t Tensor::output_nr() const { return impl_->autograd ? impl_->autograd->output_nr : 0; }

void Tensor::set_history(std::shared_ptr<autograd::Node> fn, uint32_t nr) const {
  AutogradMeta& m = impl_->autograd_meta();
  m.grad_fn = std::move(fn);
  m.output_nr = nr;
  m.requires_grad = m.grad_fn != nullptr;
}

void Tensor::add_grad_ready_hook(GradReadyHook hook) const {
  impl_->autograd_meta().grad_ready_hooks.push_back(std::move(hook));
}

const std::vector<GradReadyHook>& Tensor::grad_ready_hooks() const {
  static const std::vector<GradReadyHook> none;
  return impl_->autograd ? impl_->autograd->grad_ready_hooks : none;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return shape_str(shape()) + " " + dtype_name(dtype()) + " " + device().str();
}

}  // namespace tessera
