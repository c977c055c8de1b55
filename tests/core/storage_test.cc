// Storage's materializer: a released storage gives its bytes back to the allocator and is refilled
// on the next data(), through any view, with its version untouched; adopt() moves a donor's bytes.
#include <catch2/catch.hpp>

#include "core/allocator.h"
#include "core/factory.h"
#include "core/tensor.h"

using namespace tessera;

namespace {
int64_t held() { return memory_stats(kCPU).current_bytes; }
}  // namespace

TEST_CASE("a released storage refills through its materializer on the next read", "[core]") {
  Tensor t = arange(0, 8, 1, {.dtype = DType::f32});
  const Tensor view = t.view({2, 4}).transpose(0, 1);  // shares the Storage
  Storage& s = *t.storage();
  int refills = 0;
  s.set_materializer([&](Storage& self) {
    ++refills;
    self.allocate();
    auto* p = static_cast<float*>(self.data());
    for (int i = 0; i < 8; ++i) p[i] = float(i);
  });
  const uint64_t version = t.version();
  const int64_t before = held();
  s.release();
  CHECK(s.released());
  CHECK(held() == before - 32);
  s.release();  // already released: nothing more
  CHECK(held() == before - 32);
  CHECK(refills == 0);
  CHECK(view.select(0, 3).select(0, 1).item() == 7.0);  // the view's read refills it
  CHECK(refills == 1);
  CHECK_FALSE(s.released());
  CHECK(held() == before);
  CHECK(t.select(0, 5).item() == 5.0);  // no second refill while it holds data
  CHECK(refills == 1);
  CHECK(t.version() == version);
}

TEST_CASE("adopt moves a donor's bytes into a released storage", "[core]") {
  Tensor t = zeros({4});
  Storage& s = *t.storage();
  s.set_materializer([](Storage& self) {
    Tensor donor = full({4}, 2.5);
    self.adopt(*donor.storage());
    CHECK(donor.storage()->released());  // its destructor frees nothing
  });
  s.release();
  const int64_t before = held();
  CHECK(t.select(0, 2).item() == 2.5);
  CHECK(held() == before + 16);  // the donor's bytes, now the storage's
}

TEST_CASE("release and adopt refuse what they cannot refill", "[core]") {
  Tensor t = zeros({4});
  CHECK_THROWS_WITH(t.storage()->release(), Catch::Contains("needs a materializer"));
  t.storage()->set_materializer([](Storage&) {});
  t.storage()->release();
  CHECK_THROWS_WITH(t.data_ptr(), Catch::Contains("left the storage without data"));
  Tensor small = zeros({2});
  CHECK_THROWS_WITH(t.storage()->adopt(*small.storage()), Catch::Contains("donor of 8 bytes"));
  float outside[2] = {0, 0};
  Storage wrapped(outside, sizeof outside, kCPU, [](void*) {});
  CHECK_THROWS_WITH(wrapped.set_materializer([](Storage&) {}),
                    Catch::Contains("allocator-owned storage"));
}
