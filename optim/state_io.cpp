// StateReader and scalar_state (see state_io.h for the key scheme).
#include "state_io.h"

#include <cmath>

#include "../ops/factory.h"
#include "../tensor/shape.h"

namespace kiln::optim {

Tensor scalar_state(double value) { return full({}, value, TensorOptions(kFloat64)); }

const Tensor& StateReader::tensor(const std::string& key) {
  const Tensor* t = dict_.find(key);
  KILN_CHECK(t != nullptr, "{}.load_state_dict: missing key '{}'", owner_, key);
  KILN_CHECK(t->defined(), "{}.load_state_dict: key '{}' holds an undefined tensor", owner_, key);
  used_.insert(key);
  return *t;
}

double StateReader::number(const std::string& key) {
  const Tensor& t = tensor(key);
  KILN_CHECK(t.numel() == 1, "{}.load_state_dict: key '{}' must hold one number, got a tensor of shape {}", owner_, key,
             shape_str(t.sizes()));
  return t.item<double>();
}

bool StateReader::flag(const std::string& key) {
  const double v = number(key);
  KILN_CHECK(v == 0.0 || v == 1.0, "{}.load_state_dict: key '{}' must be 0 or 1 (a boolean), got {}", owner_, key, v);
  return v == 1.0;
}

int64_t StateReader::integer(const std::string& key) {
  const double v = number(key);
  KILN_CHECK(std::isfinite(v) && v == std::floor(v) && std::abs(v) < 9.0e15,
             "{}.load_state_dict: key '{}' must be an integer, got {}", owner_, key, v);
  return static_cast<int64_t>(v);
}

void StateReader::check_all_used() const {
  for (const auto& [key, value] : dict_)
    KILN_CHECK(used_.count(key) != 0, "{}.load_state_dict: unexpected key '{}'", owner_, key);
}

void StateReader::check_writer(const std::string& metadata_key, const std::string& expected) const {
  auto it = dict_.metadata().find(metadata_key);
  if (it == dict_.metadata().end()) return;
  KILN_CHECK(it->second == expected, "{}.load_state_dict: the state dict was written by {} (metadata '{}')", owner_,
             it->second, metadata_key);
}

}  // namespace kiln::optim
