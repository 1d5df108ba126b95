// Element types that cross the network, as traits. The primary templates are declared but not
// defined, so a collective on an unsupported type fails to compile instead of sending garbage.
#pragma once

#include <mpi.h>

#include <cstdint>

namespace gridlm::parallel {

enum class DType { f32, f64, i32, u32, i64, u64, u8 };

template <class T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::f32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::f64;
};
template <>
struct DTypeOf<std::int32_t> {
  static constexpr DType value = DType::i32;
};
template <>
struct DTypeOf<std::uint32_t> {
  static constexpr DType value = DType::u32;
};
template <>
struct DTypeOf<std::int64_t> {
  static constexpr DType value = DType::i64;
};
template <>
struct DTypeOf<std::uint64_t> {
  static constexpr DType value = DType::u64;
};
template <>
struct DTypeOf<std::uint8_t> {
  static constexpr DType value = DType::u8;
};

// MPI datatype of a C++ type, for code that calls MPI directly.
template <class T>
struct MpiDatatype;
template <>
struct MpiDatatype<float> {
  static MPI_Datatype get() { return MPI_FLOAT; }
};
template <>
struct MpiDatatype<double> {
  static MPI_Datatype get() { return MPI_DOUBLE; }
};
template <>
struct MpiDatatype<std::int32_t> {
  static MPI_Datatype get() { return MPI_INT32_T; }
};
template <>
struct MpiDatatype<std::uint32_t> {
  static MPI_Datatype get() { return MPI_UINT32_T; }
};
template <>
struct MpiDatatype<std::int64_t> {
  static MPI_Datatype get() { return MPI_INT64_T; }
};
template <>
struct MpiDatatype<std::uint64_t> {
  static MPI_Datatype get() { return MPI_UINT64_T; }
};
template <>
struct MpiDatatype<std::uint8_t> {
  static MPI_Datatype get() { return MPI_UINT8_T; }
};
template <>
struct MpiDatatype<char> {
  static MPI_Datatype get() { return MPI_CHAR; }
};

// MPI datatype of a DType, for the MPI backend.
MPI_Datatype mpi_datatype(DType t);
// Bytes per element.
std::size_t dtype_size(DType t);
const char* dtype_name(DType t);

} // namespace gridlm::parallel
