// Runtime mapping of DType to MPI datatypes, sizes and names.
#include "parallel/dtype.hpp"

namespace gridlm::parallel {

MPI_Datatype mpi_datatype(DType t) {
  switch (t) {
  case DType::f32: return MPI_FLOAT;
  case DType::f64: return MPI_DOUBLE;
  case DType::i32: return MPI_INT32_T;
  case DType::u32: return MPI_UINT32_T;
  case DType::i64: return MPI_INT64_T;
  case DType::u64: return MPI_UINT64_T;
  case DType::u8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

std::size_t dtype_size(DType t) {
  switch (t) {
  case DType::f32:
  case DType::i32:
  case DType::u32: return 4;
  case DType::f64:
  case DType::i64:
  case DType::u64: return 8;
  case DType::u8: return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  case DType::i32: return "i32";
  case DType::u32: return "u32";
  case DType::i64: return "i64";
  case DType::u64: return "u64";
  case DType::u8: return "u8";
  }
  return "?";
}

} // namespace gridlm::parallel
