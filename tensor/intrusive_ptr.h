// A reference-counted handle whose count lives in the object (one allocation, 8-byte handle),
// used for tensors and storages so that copying a Tensor costs one atomic increment.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace ember {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) : refs_(0) {}
  RefCounted& operator=(const RefCounted&) { return *this; }
  int64_t use_count() const { return refs_.load(std::memory_order_acquire); }

 protected:
  ~RefCounted() = default;

 private:
  template <class T> friend class IntrusivePtr;
  mutable std::atomic<int64_t> refs_{0};
};

template <class T>
class IntrusivePtr {
 public:
  IntrusivePtr() = default;
  explicit IntrusivePtr(T* p) : p_(p) { retain(); }
  IntrusivePtr(const IntrusivePtr& o) : p_(o.p_) { retain(); }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  IntrusivePtr& operator=(IntrusivePtr o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~IntrusivePtr() { release(); }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  friend bool operator==(const IntrusivePtr& a, const IntrusivePtr& b) { return a.p_ == b.p_; }

 private:
  void retain() {
    if (p_) p_->refs_.fetch_add(1, std::memory_order_relaxed);
  }
  void release() {
    if (p_ && p_->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete p_;
  }
  T* p_ = nullptr;
};

template <class T, class... Args>
IntrusivePtr<T> make_intrusive(Args&&... args) {
  return IntrusivePtr<T>(new T(std::forward<Args>(args)...));
}

}  // namespace ember
