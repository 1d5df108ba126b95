// Span<T>: a pointer and an element count travelling together, so that collectives take typed
// buffers and a wrong byte count cannot be written. (std::span is C++20; gridlm is C++17.)
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>
#include <vector>

namespace gridlm {

template <class T>
class Span {
public:
  using element_type = T;

  constexpr Span() = default;
  constexpr Span(T* data, std::size_t size) : data_(data), size_(size) {}
  template <class U, class A, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  Span(std::vector<U, A>& v) : data_(v.data()), size_(v.size()) {}
  template <class U, class A,
            class = std::enable_if_t<std::is_convertible_v<const U (*)[], T (*)[]>>>
  Span(const std::vector<U, A>& v) : data_(v.data()), size_(v.size()) {}
  template <class U, std::size_t N,
            class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr Span(std::array<U, N>& a) : data_(a.data()), size_(N) {}
  // Span<T> converts to Span<const T>.
  template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr Span(Span<U> other) : data_(other.data()), size_(other.size()) {}

  constexpr T* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr std::size_t size_bytes() const { return size_ * sizeof(T); }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T& operator[](std::size_t i) const { return data_[i]; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }
  constexpr Span subspan(std::size_t offset, std::size_t count) const {
    return Span(data_ + offset, count);
  }

private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace gridlm
