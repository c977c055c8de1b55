// Every collective on every dtype and several odd sizes, each rank comparing its result with a
// serial computation of what all ranks together should produce.
#include "tests/parallel/collective_checks.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "core/factory.h"
#include "tests/parallel/rank_check.h"

namespace tessera::parallel::testing {
namespace {

const DType kDTypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::b8};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::avg, ReduceOp::max, ReduceOp::min, ReduceOp::prod};

// The value rank r holds at flat index i; small and exact in every dtype so a serial reference
// computed in double is exact too (products use only +-1, 2 and 0.5).
double gen(DType dt, ReduceOp op, int r, int64_t i, int salt) {
  if (dt == DType::b8) return double((r + i + salt) % 3 == 0);
  if (op == ReduceOp::prod) {
    static const double kFloat[] = {1.0, 2.0, 0.5, -1.0};
    static const double kInt[] = {1.0, 2.0, -1.0, 1.0};
    int k = int((r * 5 + i * 3 + salt) % 4);
    return is_floating(dt) ? kFloat[k] : kInt[k];
  }
  double v = double((r * 7 + i * 3 + salt) % 13 - 6);
  if (is_floating(dt)) return v * 0.5;
  if (dt == DType::i64) return v + 1e12;  // exercises the upper 32 bits
  return v;
}

Tensor make(DType dt, int64_t n, const std::function<double(int64_t)>& fn) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = fn(i);
  return from_vector<double>(v, {n}, TensorOptions{.dtype = dt});
}

// The serial reduction of values already rounded to `dt`, rounded to `dt` again.
double reduce_serial(DType dt, ReduceOp op, const std::vector<double>& vals) {
  double acc = vals[0];
  for (size_t k = 1; k < vals.size(); ++k) {
    double v = vals[k];
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc = dt == DType::b8 ? double(acc != 0 || v != 0) : acc + v; break;
      case ReduceOp::max: acc = std::max(acc, v); break;
      case ReduceOp::min: acc = std::min(acc, v); break;
      case ReduceOp::prod: acc = dt == DType::b8 ? double(acc != 0 && v != 0) : acc * v; break;
    }
  }
  if (op == ReduceOp::avg) acc /= double(vals.size());
  return as_dtype(dt, acc);
}

// Reduction over ranks of gen(dt, op, r, i, salt).
double expected_reduce(DType dt, ReduceOp op, int p, int64_t i, int salt) {
  std::vector<double> vals;
  for (int r = 0; r < p; ++r) vals.push_back(as_dtype(dt, gen(dt, op, r, i, salt)));
  return reduce_serial(dt, op, vals);
}

bool op_allowed(DType dt, ReduceOp op) { return op != ReduceOp::avg || is_floating(dt); }

void check_all_reduce(Communicator& comm, DType dt, ReduceOp op, int64_t n) {
  const int p = comm.size(), me = comm.rank();
  Tensor t = make(dt, n, [&](int64_t i) { return gen(dt, op, me, i, 1); });
  comm.all_reduce(t, op)->wait();
  for (int64_t i = 0; i < n; ++i) {
    RANK_CHECK_CLOSE(dt, element(t, i), expected_reduce(dt, op, p, i, 1), "all_reduce ",
                     reduce_op_name(op), " n=", n, " i=", i);
  }
}

void check_reduce_scatter(Communicator& comm, DType dt, ReduceOp op, int64_t n) {
  const int p = comm.size(), me = comm.rank();
  Tensor in = make(dt, n * p, [&](int64_t i) { return gen(dt, op, me, i, 2); });
  Tensor out = empty({n}, {.dtype = dt});
  comm.reduce_scatter(in, out, op)->wait();
  for (int64_t k = 0; k < n; ++k) {
    RANK_CHECK_CLOSE(dt, element(out, k), expected_reduce(dt, op, p, me * n + k, 2),
                     "reduce_scatter ", reduce_op_name(op), " n=", n, " k=", k);
  }
}

void check_reduce(Communicator& comm, DType dt, ReduceOp op, int64_t n, int root) {
  const int p = comm.size(), me = comm.rank();
  Tensor t = make(dt, n, [&](int64_t i) { return gen(dt, op, me, i, 3); });
  comm.reduce(t, root, op)->wait();
  for (int64_t i = 0; i < n; ++i) {
    double want = me == root ? expected_reduce(dt, op, p, i, 3) : as_dtype(dt, gen(dt, op, me, i, 3));
    RANK_CHECK_CLOSE(dt, element(t, i), want, "reduce root=", root, " ", reduce_op_name(op), " i=", i);
  }
}

// Data movers: the value of element k of rank r's contribution, distinct per (r, k).
double tag_value(DType dt, int r, int64_t k) {
  if (dt == DType::b8) return double((r * 3 + k) % 2);
  return as_dtype(dt, double((r * 31 + k * 7) % 97 - 40));
}

void check_movers(Communicator& comm, DType dt, int64_t n) {
  const int p = comm.size(), me = comm.rank();
  // all_gather: out[q * n + k] = rank q's in[k].
  Tensor in = make(dt, n, [&](int64_t k) { return tag_value(dt, me, k); });
  Tensor out = empty({int64_t(p), n}, {.dtype = dt});
  comm.all_gather(in, out)->wait();
  for (int q = 0; q < p; ++q)
    for (int64_t k = 0; k < n; ++k)
      RANK_CHECK(element(out, q * n + k) == tag_value(dt, q, k), "all_gather n=", n, " q=", q);

  // broadcast from the last rank and from rank 0.
  for (int root : {p - 1, 0}) {
    Tensor b = make(dt, n, [&](int64_t k) { return tag_value(dt, me + 100, k); });
    comm.broadcast(b, root)->wait();
    for (int64_t k = 0; k < n; ++k)
      RANK_CHECK(element(b, k) == tag_value(dt, root + 100, k), "broadcast root=", root, " k=", k);
  }

  // all_to_all: chunk j of rank r's input is (r, j); rank me receives (i, me) in chunk i.
  Tensor a = make(dt, n * p, [&](int64_t x) { return tag_value(dt, me * p + int(x / n), x % n); });
  Tensor b = empty({n * p}, {.dtype = dt});
  comm.all_to_all(a, b)->wait();
  for (int i = 0; i < p; ++i)
    for (int64_t k = 0; k < n; ++k)
      RANK_CHECK(element(b, i * n + k) == tag_value(dt, i * p + me, k), "all_to_all from ", i, " k=", k);
}

}  // namespace

void run_collective_checks(Communicator& comm) {
  const int64_t sizes[] = {1, 7, 129, 1000};
  for (DType dt : kDTypes) {
    for (int64_t n : sizes) {
      for (ReduceOp op : kOps) {
        if (!op_allowed(dt, op)) continue;
        check_all_reduce(comm, dt, op, n);
        if (n <= 129) check_reduce_scatter(comm, dt, op, n);
      }
      check_reduce(comm, dt, ReduceOp::sum, n, comm.size() - 1);
      check_reduce(comm, dt, ReduceOp::max, n, 0);
      check_movers(comm, dt, n);
    }
  }
  // One large message, past the eager-protocol limits.
  check_all_reduce(comm, DType::f32, ReduceOp::sum, 300007);
  check_all_reduce(comm, DType::bf16, ReduceOp::avg, 100003);
}

}  // namespace tessera::parallel::testing
