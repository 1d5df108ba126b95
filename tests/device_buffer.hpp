// Test data in the execution space's memory, as the model's own buffers are: kernels get device
// pointers, and a test reads or changes the values only through its host copy and an explicit
// copy across. On a CPU build both sides are host memory and the copies are cheap; on a GPU
// build a test that handed a host pointer to a kernel would read garbage or fault, so every
// layer test goes through these to run unchanged on a GPU (bench/gpu_check.sh).
#pragma once

#include <Kokkos_Core.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace gridlm::test {

template <class T>
class DeviceBuffer {
public:
  // n zeros.
  explicit DeviceBuffer(std::size_t n, const std::string& label = "test")
      : DeviceBuffer(std::vector<T>(n), label) {}
  // The values of `values`, uploaded.
  explicit DeviceBuffer(std::vector<T> values, const std::string& label = "test")
      : host(std::move(values)), device_(label, host.size()) {
    upload();
  }

  // One device buffer per object: a copy would share the view but not the host values.
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // The device memory, for kernels.
  T* data() const { return device_.data(); }
  std::size_t size() const { return host.size(); }
  const Kokkos::View<T*>& view() const { return device_; }

  // host -> device, after the test changed `host`.
  void upload() const { Kokkos::deep_copy(device_, HostView<const T>(host.data(), host.size())); }
  // device -> host; returns the refreshed host copy.
  const std::vector<T>& download() {
    Kokkos::deep_copy(HostView<T>(host.data(), host.size()), device_);
    return host;
  }

  std::vector<T> host; // the values as the test last set or downloaded them

private:
  template <class U>
  using HostView = Kokkos::View<U*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
  Kokkos::View<T*> device_;
};

// n values of device memory at `device` (a model's output, an input gradient), copied to the host.
template <class T>
std::vector<T> to_host(const T* device, std::size_t n) {
  std::vector<T> out(n);
  Kokkos::deep_copy(
      Kokkos::View<T*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(out.data(), n),
      Kokkos::View<const T*, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(device, n));
  return out;
}

template <class T>
std::vector<T> to_host(const Kokkos::View<T*>& device) {
  return to_host<T>(device.data(), device.size());
}

} // namespace gridlm::test
