// Out-of-line throwing helpers, so the check macros expand to one branch and one call.
#include "error.h"

#include <cstring>

namespace kiln {

namespace {
// Trims an absolute __FILE__ to the part inside the source tree ("ops/binary.cpp").
std::string short_location(const char* file, int line) {
  if (file == nullptr || *file == '\0') return {};
  std::string path(file);
  for (const char* root : {"/core/", "/allocator/", "/tensor/", "/ops/", "/autograd/", "/nn/",
                           "/profiler/", "/graph/"}) {
    auto pos = path.rfind(root);
    if (pos != std::string::npos) {
      path = path.substr(pos + 1);
      break;
    }
  }
  return fmt::format("{}:{}", path, line);
}
}  // namespace

Error::Error(std::string message, const char* file, int line)
    : std::runtime_error(std::move(message)), where_(short_location(file, line)) {}

namespace detail {

void throw_error(const char* file, int line, std::string message) {
  throw Error(std::move(message), file, line);
}

void throw_internal(const char* file, int line, const char* cond, std::string message) {
  std::string text = fmt::format("internal error: ({}) failed at {}:{}", cond, file, line);
  if (!message.empty()) text += ": " + message;
  text += ". This is a bug in Kiln; please report it.";
  throw InternalError(std::move(text), file, line);
}

}  // namespace detail
}  // namespace kiln
