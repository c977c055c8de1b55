// Bucket planning (pure) and the flat buffers that hold a bucket's gradients or parameters.
#include "parallel/data/grad_bucket.h"

#include "core/error.h"
#include "core/factory.h"

namespace tessera::parallel {

std::vector<BucketPlan> plan_buckets(const std::vector<BucketParam>& params,
                                     const std::vector<size_t>& order, int64_t cap_bytes) {
  TS_CHECK(cap_bytes > 0, "plan_buckets", "expected a positive bucket cap, got ", cap_bytes,
           " bytes");
  TS_CHECK(order.size() == params.size(), "plan_buckets", "expected an order over all ",
           params.size(), " parameters, got ", order.size(), " indices");
  std::vector<bool> seen(params.size(), false);
  std::vector<BucketPlan> plans;
  int64_t open_bytes = 0;  // bytes in plans.back() while it is open
  for (size_t idx : order) {
    TS_CHECK(idx < params.size() && !seen[idx], "plan_buckets", "expected a permutation of [0, ",
             params.size(), "), got index ", idx, idx < params.size() ? " twice" : " out of range");
    seen[idx] = true;
    const BucketParam& p = params[idx];
    const int64_t bytes = p.numel * int64_t(dtype_size(p.dtype));
    const bool fits =
        !plans.empty() && plans.back().dtype == p.dtype && open_bytes + bytes <= cap_bytes;
    // A new bucket takes any parameter, even one over the cap.
    if (!fits) {
      plans.push_back(BucketPlan{p.dtype, 0, {}});
      open_bytes = 0;
    }
    BucketPlan& b = plans.back();
    b.slots.push_back(BucketSlot{idx, b.numel, p.numel});
    b.numel += p.numel;
    open_bytes += bytes;
  }
  return plans;
}

GradBucket::GradBucket(BucketPlan plan, Device device)
    : plan_(std::move(plan)),
      buffer_(zeros({plan_.numel}, {.dtype = plan_.dtype, .device = device})) {}

Tensor GradBucket::slot_view(size_t i, const Shape& shape) const {
  TS_ASSERT(i < plan_.slots.size());
  const BucketSlot& s = plan_.slots[i];
  return buffer_.narrow(0, s.offset, s.numel).view(shape);
}

void GradBucket::pack(const std::vector<Tensor>& params) const {
  for (size_t i = 0; i < plan_.slots.size(); ++i) {
    const Tensor& p = params.at(plan_.slots[i].param);
    slot_view(i, p.shape()).copy_(p);
  }
}

void GradBucket::unpack(const std::vector<Tensor>& params) const {
  for (size_t i = 0; i < plan_.slots.size(); ++i) {
    const Tensor& p = params.at(plan_.slots[i].param);
    p.copy_(slot_view(i, p.shape()));
  }
}

}  // namespace tessera::parallel
