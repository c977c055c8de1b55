// Finite-difference gradient checking (see gradcheck.h).
#include "tests/testing/gradcheck.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "core/factory.h"
#include "tests/testing/compare.h"

namespace tessera::testing {
namespace {

// sum(out * w) in double on the host.
double weighted_sum(const Tensor& out, const std::vector<double>& w) {
  std::vector<double> v = to_doubles(out);
  double s = 0.0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * w[i];
  return s;
}

// Address of flat (row-major) element i of a CPU f32 tensor of any strides.
float* element_ptr(const Tensor& t, int64_t flat) {
  int64_t off = t.offset();
  for (int64_t d = t.dim(); d-- > 0;) {
    int64_t n = t.shape()[size_t(d)];
    off += (flat % n) * t.strides()[size_t(d)];
    flat /= n;
  }
  return static_cast<float*>(t.storage()->data()) + off;
}

void check_input(const Tensor& t, size_t k) {
  TS_CHECK(t.dtype() == DType::f32 && t.device().is_cpu(), "gradcheck", "expected input ", k,
           " to be f32 on cpu, got ", t.describe());
  TS_CHECK(t.is_leaf(), "gradcheck", "expected input ", k, " to be a leaf, got one with grad_fn");
  for (int64_t d = 0; d < t.dim(); ++d)
    TS_CHECK(t.shape()[size_t(d)] == 1 || t.strides()[size_t(d)] != 0, "gradcheck", "expected input ", k,
             " without stride-0 (expanded) dims, got strides ", shape_str(t.strides()));
}

}  // namespace

GradcheckResult check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  std::vector<Tensor> diff;
  std::vector<size_t> diff_index;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].defined() || !inputs[k].requires_grad()) continue;
    check_input(inputs[k], k);
    diff.push_back(inputs[k]);
    diff_index.push_back(k);
  }
  TS_CHECK(!diff.empty(), "gradcheck", "expected at least one input that requires grad");

  // Analytic: the vector-Jacobian product with fixed random weights.
  Tensor out = fn(inputs);
  TS_CHECK(out.defined() && is_floating(out.dtype()), "gradcheck",
           "expected fn to return a floating tensor, got ", out.describe());
  TS_CHECK(out.requires_grad(), "gradcheck", "expected the output to require grad (no history was recorded)");
  Generator gen(opts.seed);
  Tensor w = randn(out.shape(), {.dtype = out.dtype()}, &gen);
  std::vector<double> wv = to_doubles(w);
  std::vector<Tensor> analytic = autograd::grad({out}, diff, {w});

  // Perturbed evaluations keep grad mode as it is, so fn may itself call autograd::grad
  // (checking second derivatives); the raw writes below do not bump versions.
  std::ostringstream report;
  bool ok = true;
  int64_t checked = 0;
  for (size_t j = 0; j < diff.size(); ++j) {
    const Tensor& x = diff[j];
    std::vector<double> a = analytic[j].defined() ? to_doubles(analytic[j]) : std::vector<double>(size_t(x.numel()), 0.0);
    if (analytic[j].defined() && analytic[j].shape() != x.shape()) {
      report << "input " << diff_index[j] << ": analytic gradient has shape " << shape_str(analytic[j].shape())
             << ", expected " << shape_str(x.shape()) << "\n";
      ok = false;
      continue;
    }
    int64_t worst = -1, bad = 0;
    double worst_excess = 0.0, worst_num = 0.0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      float* p = element_ptr(x, i);
      const float orig = *p;
      const float xp = orig + float(opts.eps), xm = orig - float(opts.eps);
      *p = xp;
      double fp = weighted_sum(fn(inputs), wv);
      *p = xm;
      double fm = weighted_sum(fn(inputs), wv);
      *p = orig;
      // Divide by the step actually taken in f32, not the requested one.
      double num = (fp - fm) / (double(xp) - double(xm));
      double tol = opts.atol + opts.rtol * std::fabs(num);
      double excess = std::fabs(a[size_t(i)] - num) / tol;
      ++checked;
      if (!(excess <= 1.0)) {
        ++bad;
        if (!(excess <= worst_excess)) {
          worst_excess = excess;
          worst = i;
          worst_num = num;
        }
      }
    }
    if (bad > 0) {
      ok = false;
      report << "input " << diff_index[j] << " " << x.describe() << ": " << bad << " of " << x.numel()
             << " elements out of tolerance (atol " << opts.atol << ", rtol " << opts.rtol << "); worst at "
             << index_str(worst, x.shape()) << ": analytic " << a[size_t(worst)] << ", numeric " << worst_num
             << "\n";
    }
  }
  GradcheckResult result;
  result.ok = ok;
  result.message = ok ? "gradcheck passed: " + std::to_string(checked) + " elements over " +
                            std::to_string(diff.size()) + " inputs"
                      : "gradcheck failed:\n" + report.str();
  return result;
}

bool gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
               const GradcheckOptions& opts) {
  GradcheckResult r = check_gradients(fn, inputs, opts);
  if (!r.ok) UNSCOPED_INFO(r.message);
  return r.ok;
}

}  // namespace tessera::testing
