// Grad mode: whether ops record autograd history, per thread (PyTorch's GradMode). It lives
// in ops/ because the op scope reads it on every op that has an input requiring grad;
// autograd/ builds the graph. NoGradGuard on one thread never switches recording off on another.
#pragma once

namespace kiln {

namespace detail {
extern thread_local bool t_grad_enabled;
}

/// True when ops on this thread record autograd history (the default).
inline bool is_grad_enabled() { return detail::t_grad_enabled; }
/// Turns recording on or off for this thread.
inline void set_grad_enabled(bool enabled) { detail::t_grad_enabled = enabled; }

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
