// Flat gradient buckets for data parallelism (STYLE.md item 14): parameters are grouped into
// contiguous buffers of one dtype up to a byte cap, so a bucket is reduced with one collective call
// and each parameter is an offset into its bucket.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"

namespace tessera::parallel {

// What the plan needs to know of a parameter.
struct BucketParam {
  int64_t numel = 0;
  DType dtype = DType::f32;
};

// One parameter's place in a bucket: elements [offset, offset + numel) of the flat buffer.
struct BucketSlot {
  size_t param = 0;  // index into the list given to plan_buckets
  int64_t offset = 0;
  int64_t numel = 0;
};

struct BucketPlan {
  DType dtype = DType::f32;
  int64_t numel = 0;
  std::vector<BucketSlot> slots;  // in the order the parameters were taken
};

// Groups params into buckets, taking them in `order` (indices into params; DataParallel passes the
// reverse registration order, the order gradients become ready in backward). A bucket is closed
// when the next parameter has another dtype or would take it past cap_bytes; a parameter larger
// than the cap gets a bucket of its own. Pure; every parameter lands in exactly one slot.
std::vector<BucketPlan> plan_buckets(const std::vector<BucketParam>& params,
                                     const std::vector<size_t>& order, int64_t cap_bytes);

// A bucket's flat buffer and the views of its slots.
class GradBucket {
 public:
  GradBucket(BucketPlan plan, Device device);

  const BucketPlan& plan() const { return plan_; }
  // (numel) contiguous, the bucket's dtype.
  const Tensor& buffer() const { return buffer_; }
  int64_t nbytes() const { return plan_.numel * int64_t(dtype_size(plan_.dtype)); }
  // Slot i's elements as a tensor of `shape` sharing the buffer.
  Tensor slot_view(size_t i, const Shape& shape) const;

  // Copies each parameter's value (params indexed as in the plan) into the buffer, or back out.
  void pack(const std::vector<Tensor>& params) const;
  void unpack(const std::vector<Tensor>& params) const;

 private:
  BucketPlan plan_;
  Tensor buffer_;
};

}  // namespace tessera::parallel
