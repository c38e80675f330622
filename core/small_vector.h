// SmallVector: a vector that keeps up to N elements inline and only touches the heap
// beyond that. The CPU loops describe every operand's dims with a few of these per kernel
// call; with std::vector those allocations cost more than the work on a small tensor.
// Only what the loops need: trivially copyable elements, push_back, indexing, back().
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

namespace kiln {

/// A vector of trivially copyable T with N elements of inline capacity.
template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable elements only");

 public:
  SmallVector() = default;
  /// `count` copies of `value`.
  SmallVector(size_t count, const T& value) {
    for (size_t i = 0; i < count; ++i) push_back(value);
  }

  void push_back(const T& v) {
    if (size_ < N) {
      inline_[size_] = v;
    } else {
      if (size_ == N) heap_.assign(inline_, inline_ + N);  // first spill: move everything
      heap_.push_back(v);
    }
    ++size_;
  }
  /// Removes every element (keeps any heap capacity).
  void clear() {
    size_ = 0;
    heap_.clear();
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return size_ > N ? heap_.data() : inline_; }
  const T* data() const { return size_ > N ? heap_.data() : inline_; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }

 private:
  T inline_[N] = {};
  size_t size_ = 0;
  std::vector<T> heap_;
};

}  // namespace kiln
