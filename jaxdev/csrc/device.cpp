// The jax device in C++: its DeviceGuardImpl, its PrivateUse1 hooks with pinned host memory, and
// scaled_dot_product_attention's backend choice. See native.cpp.

#include "native.h"

#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/transformers/attention.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>
#include <optional>

namespace jaxdev_native {

struct JaxDeviceGuard final : public c10::impl::DeviceGuardImplInterface {
  static c10::Device device() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
  static c10::Stream stream() { return c10::Stream(c10::Stream::DEFAULT, device()); }
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device) const override { return device(); }
  c10::Device getDevice() const override { return device(); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override { return stream(); }
  c10::Stream getNewStream(c10::Device, int) const override { return stream(); }
  c10::Stream exchangeStream(c10::Stream) const noexcept override { return stream(); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
};

PyObject* install_device_guard(PyObject*, PyObject*) {
  static JaxDeviceGuard guard;
  c10::impl::DeviceGuardImplRegistrar(c10::DeviceType::PrivateUse1, &guard);
  Py_RETURN_NONE;
}

// --- pinned host memory: the jax device's hooks ---------------------------------------------------
//
// With jaxdev installed, jax is every process's current accelerator, and PyTorch asks its hooks for a
// pinned-memory allocator (pin_memory(), DataLoader(pin_memory=True), empty(pin_memory=True)) and
// whether a pointer is pinned (is_pinned()). The hooks torch/csrc/acc registers for a Python backend
// raise NotImplementedError for both, and hooks can be registered once per process: so these replace
// them, registered first. "Pinned" means allocated here: 64-byte aligned host memory, not page-locked
// (JAX's GPU client stages host buffers itself); what it buys is that jaxdev may hand the buffer to
// jax.device_put without copying it first, so on an accelerator `.to("jax", non_blocking=True)`
// returns while the transfer runs (jaxdev/capabilities/pinned.py). The allocator is also the device's host
// allocator: torch.accelerator.empty_host_cache() reads that registry and crashed (a null pointer)
// while it was empty.
std::mutex g_pinned_mutex;
std::map<uintptr_t, size_t> g_pinned;  // start -> size of each live pinned block

void free_pinned(void* data) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(reinterpret_cast<uintptr_t>(data));
  }
  c10::free_cpu(data);
}

// Any address inside a live block, as CUDA answers for its pinned blocks.
bool is_pinned_address(const void* data) {
  if (data == nullptr) return false;
  const auto address = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  auto block = g_pinned.upper_bound(address);
  if (block == g_pinned.begin()) return false;
  --block;
  return address < block->first + block->second;
}

struct JaxPinnedAllocator final : public at::HostAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &free_pinned, cpu};  // as CUDA's: nothing to pin
    void* data = c10::alloc_cpu(nbytes);
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned[reinterpret_cast<uintptr_t>(data)] = nbytes;
    }
    return {data, data, &free_pinned, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  // Nothing is cached (a block goes back to the system when its storage dies) and there are no
  // streams to wait for, so the caching allocator's questions have nothing to do.
  bool record_event(void* data, void*, c10::Stream) override { return is_pinned_address(data); }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

JaxPinnedAllocator& pinned_allocator() {
  static JaxPinnedAllocator allocator;
  return allocator;
}

// What torch/csrc/acc's PythonHooks answers (built, available, a primary context; the generator and
// pointer questions PyTorch's default raises for), plus the two pinned-memory answers.
// The device questions get the device guard's answers (one device, jax:0).
struct JaxHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  bool isPinnedPtr(const void* data) const override { return is_pinned_address(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator(); }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  void setCurrentDevice(c10::DeviceIndex device) const override { check_device(device); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override { return check_device(device); }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return check_device(device); }
  static c10::DeviceIndex check_device(c10::DeviceIndex device) {
    TORCH_CHECK(device == 0 || device == -1, "jax:", static_cast<int>(device),
                " is not a device jaxdev places tensors on: it uses jax:0 only");
    return 0;
  }
};

// True when installed; False when hooks were registered already (then PyTorch keeps those).
PyObject* install_hooks(PyObject*, PyObject*) {
  if (at::isPrivateUse1HooksRegistered()) Py_RETURN_FALSE;
  static JaxHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  at::setHostAllocator(c10::DeviceType::PrivateUse1, &pinned_allocator());
  // is_pinned() answers False for a device PyTorch has not initialised, and only pin_memory() does
  // that: torch.empty(n, pin_memory=True).is_pinned() would say False. Our init does nothing.
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  Py_RETURN_TRUE;
}

// --- scaled_dot_product_attention's backend ----------------------------------------------------
//
// sdp::SDPBackend's values (torch.nn.attention.SDPBackend): MATH is 0, OVERRIDEABLE 4.
constexpr int64_t kMathAttention = 0;
constexpr int64_t kOverrideableAttention = 4;

// The overrideable op's meta function (torch/_meta_registrations.py) takes 3- and 4-dim queries; its
// schema has no dropout mask to replay in the backward nor grouped-query heads: those, and batch or
// head dims that broadcast, stay on the math path, which handles (and checks) them all.
int64_t attention_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  if (!at::globalContext().userEnabledOverrideableSDP() || dropout_p != 0.0) return kMathAttention;
  // a mask with is_causal: CPU's flash path (4-dim inputs) applies both, its math path (3-dim inputs)
  // raises; so does jax's choice
  if (is_causal && attn_mask.has_value() && attn_mask->defined() && query.dim() == 3) return kMathAttention;
  if (query.is_nested() || key.is_nested() || value.is_nested()) return kMathAttention;
  const int64_t dims = query.dim();
  if ((dims != 3 && dims != 4) || key.dim() != dims || value.dim() != dims) return kMathAttention;
  for (int64_t d = 0; d < dims - 2; d++) {
    if (key.size(d) != query.size(d) || value.size(d) != query.size(d)) return kMathAttention;
  }
  if (key.size(-1) != query.size(-1) || value.size(-2) != key.size(-2)) return kMathAttention;
  const auto dtype = query.scalar_type();
  if (!at::isFloatingType(dtype) || key.scalar_type() != dtype || value.scalar_type() != dtype) return kMathAttention;
  if (attn_mask.has_value() && attn_mask->defined() && attn_mask->scalar_type() != at::kBool &&
      attn_mask->scalar_type() != dtype) {
    return kMathAttention;
  }
  return kOverrideableAttention;
}

PyObject* install_attention_choice(PyObject*, PyObject*) {
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&attention_choice);
  Py_RETURN_NONE;
}


}  // namespace jaxdev_native
