// Compile-check stand-in; see tools/checks/hip_stubs/README.md. torch's
// c10::complex converts from and to thrust::complex (rocThrust on ROCm) in
// HIP code; std::complex stands in for it.
#pragma once
#include <complex>

namespace thrust {

template <typename T>
struct complex : std::complex<T> {
  using std::complex<T>::complex;
  complex(const std::complex<T>& c) : std::complex<T>(c) {}
};

using std::abs;
using std::acos;
using std::acosh;
using std::arg;
using std::asin;
using std::asinh;
using std::atan;
using std::atanh;
using std::conj;
using std::cos;
using std::cosh;
using std::exp;
using std::log;
using std::log10;
using std::norm;
using std::polar;
using std::pow;
using std::proj;
using std::sin;
using std::sinh;
using std::sqrt;
using std::tan;
using std::tanh;

}  // namespace thrust
