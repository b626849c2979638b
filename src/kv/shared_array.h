// SharedArray<T>: a reference-counted view of a contiguous array.
//
// Slices share the owner of the whole array, so a batch can be cut per server
// and handed to the transport without copying; the memory lives until the last
// view (or the transport's last reference) is gone. Copying a SharedArray copies
// the view, not the elements. Not synchronized: concurrent writers to the same
// elements must coordinate themselves.
#ifndef KEEL_KV_SHARED_ARRAY_H_
#define KEEL_KV_SHARED_ARRAY_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "base/error.h"

namespace keel {

template <typename T>
class SharedArray {
  static_assert(std::is_trivially_copyable<T>::value, "SharedArray holds plain data");

 public:
  SharedArray() = default;

  // Takes ownership of `values`.
  explicit SharedArray(std::vector<std::remove_const_t<T>> values) {
    auto owned = std::make_shared<std::vector<std::remove_const_t<T>>>(std::move(values));
    data_ = owned->data();
    size_ = owned->size();
    owner_ = std::move(owned);
  }

  // A view of `size` elements at `data`, kept alive by `owner`.
  SharedArray(std::shared_ptr<const void> owner, T* data, size_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}

  // A read-only view of a writable array.
  template <typename U, typename = std::enable_if_t<std::is_same<const U, T>::value &&
                                                    !std::is_same<U, T>::value>>
  SharedArray(const SharedArray<U>& other)  // NOLINT(runtime/explicit): adds const only
      : owner_(other.owner()), data_(other.data()), size_(other.size()) {}

  // `size` elements, not initialized.
  static SharedArray Allocate(size_t size) {
    using Mutable = std::remove_const_t<T>;
    std::shared_ptr<Mutable[]> owned(new Mutable[size]);
    Mutable* data = owned.get();
    return SharedArray(std::move(owned), data, size);
  }

  T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t bytes() const { return size_ * sizeof(T); }
  T& operator[](size_t i) const { return data_[i]; }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Elements [begin, end) of this view, sharing its owner.
  SharedArray Slice(size_t begin, size_t end) const {
    return SharedArray(owner_, data_ + begin, end - begin);
  }

  // The same bytes as an array of U. Throws Error if the byte count is not a
  // multiple of sizeof(U). Memory that is not aligned for U is copied.
  template <typename U>
  SharedArray<U> As() const {
    if (bytes() % sizeof(U) != 0) {
      throw MakeError("a frame of ", bytes(), " bytes is not a whole number of ", sizeof(U),
                      "-byte elements");
    }
    size_t count = bytes() / sizeof(U);
    if (reinterpret_cast<uintptr_t>(data_) % alignof(U) != 0) {
      auto copy = SharedArray<std::remove_const_t<U>>::Allocate(count);
      if (count > 0) std::memcpy(copy.data(), data_, bytes());
      return SharedArray<U>(copy.owner(), copy.data(), count);
    }
    return SharedArray<U>(owner_, reinterpret_cast<U*>(const_cast<std::remove_const_t<T>*>(data_)),
                          count);
  }

 private:
  std::shared_ptr<const void> owner_;
  T* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace keel

#endif  // KEEL_KV_SHARED_ARRAY_H_
