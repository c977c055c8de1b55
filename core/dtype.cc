#include "core/dtype.h"

namespace tessera {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::b8: return "bool";
  }
  return "?";
}

bool is_floating(DType t) { return t == DType::f32 || t == DType::f16 || t == DType::bf16; }

namespace {
int rank_of(DType t) {
  switch (t) {
    case DType::b8: return 0;
    case DType::i32: return 1;
    case DType::i64: return 2;
    case DType::f16: case DType::bf16: return 3;
    case DType::f32: return 4;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16)) return DType::f32;
  return rank_of(a) >= rank_of(b) ? a : b;
}

}  // namespace tessera
