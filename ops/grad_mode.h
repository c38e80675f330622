// Grad mode: whether ops record autograd history, per thread (PyTorch's GradMode). It lives
// in ops/ because the op scope reads it on every op that has an input requiring grad;
// autograd/ builds the graph. NoGradGuard on one thread never switches recording off on another.
#pragma once

namespace kiln {

// The flag itself is a thread_local in op_scope.cpp, read and written only there: a
// thread_local shared across translation units goes through a TLS wrapper function, which
// UBSan flags as a store through a null pointer (GCC 13, tests linking the static library).

/// True when ops on this thread record autograd history (the default).
bool is_grad_enabled();
/// Turns recording on or off for this thread.
void set_grad_enabled(bool enabled);

/// Switches recording to `enabled` on this thread for the guard's lifetime.
class AutoGradMode {
 public:
  /// Sets the mode, remembering the previous one.
  explicit AutoGradMode(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~AutoGradMode() { set_grad_enabled(previous_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool previous_;
};

/// No autograd recording on this thread while it lives (torch::NoGradGuard).
class NoGradGuard : public AutoGradMode {
 public:
  NoGradGuard() : AutoGradMode(false) {}
};

/// Recording on for this thread while it lives (inside a NoGradGuard).
class EnableGradGuard : public AutoGradMode {
 public:
  EnableGradGuard() : AutoGradMode(true) {}
};

}  // namespace kiln
