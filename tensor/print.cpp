// Tensor printing in PyTorch's style, so a printout reads the same as in Python:
// "tensor([[ 0.1234, -1.5000]])", integers as "1.", scientific notation when magnitudes
// span more than 1000x, "..." summaries above 1000 elements (3 edge items per dim),
// 80-column line wrapping, and dtype/device suffixes when they differ from the defaults.
#include <cmath>
#include <string>
#include <vector>

#include "shape.h"
#include "tensor.h"

namespace kiln {

namespace {

constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

// The values of a CPU tensor, as doubles (floating dtypes) or int64 (integral and bool),
// in row-major order, plus the shape they came from.
struct Values {
  Shape sizes;
  std::vector<double> f;
  std::vector<int64_t> i;
  bool floating = false;
  bool boolean = false;
};

// Decides one number format for the whole tensor, as PyTorch's _Formatter does.
class Formatter {
 public:
  Formatter(const std::vector<double>& floats, const std::vector<int64_t>& ints, bool floating, bool boolean)
      : floating_(floating), boolean_(boolean) {
    if (!floating_) {
      for (int64_t v : ints) width_ = std::max(width_, static_cast<int>(int_text(v).size()));
      return;
    }
    std::vector<double> finite;
    for (double v : floats)
      if (std::isfinite(v) && v != 0.0) finite.push_back(v);
    if (finite.empty()) return;
    double lo = std::abs(finite[0]), hi = lo;
    for (double v : finite) {
      lo = std::min(lo, std::abs(v));
      hi = std::max(hi, std::abs(v));
      if (v != std::ceil(v)) int_mode_ = false;
    }
    if (int_mode_) {
      if (hi / lo > 1000.0 || hi > 1.0e8) {
        sci_mode_ = true;
        for (double v : finite) width_ = std::max(width_, static_cast<int>(fmt::format("{:.{}e}", v, kPrecision).size()));
      } else {
        for (double v : finite) width_ = std::max(width_, static_cast<int>(fmt::format("{:.0f}", v).size()) + 1);
      }
    } else if (hi / lo > 1000.0 || hi > 1.0e8 || lo < 1.0e-4) {
      sci_mode_ = true;
      for (double v : finite) width_ = std::max(width_, static_cast<int>(fmt::format("{:.{}e}", v, kPrecision).size()));
    } else {
      for (double v : finite) width_ = std::max(width_, static_cast<int>(fmt::format("{:.{}f}", v, kPrecision).size()));
    }
  }

  int width() const { return width_; }

  std::string format_float(double v) const {
    std::string s;
    if (std::isnan(v)) {
      s = "nan";  // fmt writes "-nan" for a NaN with its sign bit set (sqrt(-1)); Python never does
    } else if (sci_mode_) {
      s = fmt::format("{:.{}e}", v, kPrecision);
    } else if (int_mode_) {
      s = fmt::format("{:.0f}", v);
      if (std::isfinite(v)) s += ".";
    } else {
      s = fmt::format("{:.{}f}", v, kPrecision);
    }
    return pad(s);
  }
  std::string format_int(int64_t v) const { return pad(int_text(v)); }

 private:
  std::string int_text(int64_t v) const { return boolean_ ? (v ? "True" : "False") : fmt::format("{}", v); }
  std::string pad(const std::string& s) const {
    return static_cast<int>(s.size()) < width_ ? std::string(width_ - s.size(), ' ') + s : s;
  }

  bool floating_;
  bool boolean_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int width_ = 1;
};

// Indices to show along a dim of `size`: all, or (summarising) the first and last
// kEdgeItems with -1 marking the "..." gap.
std::vector<int64_t> shown_indices(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  if (summarize && size > 2 * kEdgeItems) {
    for (int64_t k = 0; k < kEdgeItems; ++k) idx.push_back(k);
    idx.push_back(-1);
    for (int64_t k = size - kEdgeItems; k < size; ++k) idx.push_back(k);
  } else {
    for (int64_t k = 0; k < size; ++k) idx.push_back(k);
  }
  return idx;
}

// Row-major flat index helpers over Values.
struct Printer {
  const Values& v;
  const Formatter& fmt_;
  bool summarize;

  std::string element(int64_t flat) const {
    return v.floating ? fmt_.format_float(v.f[flat]) : fmt_.format_int(v.i[flat]);
  }

  std::vector<int64_t> shown(int64_t size) const { return shown_indices(size, summarize); }

  std::string vector_str(int64_t base, int64_t stride, int64_t size, int indent) const {
    const int element_length = fmt_.width() + 2;
    const int per_line = std::max(1, (kLineWidth - indent) / element_length);
    std::vector<std::string> items;
    for (int64_t k : shown(size)) items.push_back(k < 0 ? " ..." : element(base + k * stride));
    std::string out = "[";
    for (size_t k = 0; k < items.size(); ++k) {
      if (k > 0 && k % per_line == 0) {
        out += ",\n";
        out.append(static_cast<size_t>(indent + 1), ' ');
      } else if (k > 0) {
        out += ", ";
      }
      out += items[k];
    }
    return out + "]";
  }

  // Prints the sub-tensor starting at flat offset `base` covering dims [d, ndim).
  std::string tensor_str(size_t d, int64_t base, int indent) const {
    const Shape& sizes = v.sizes;
    const int64_t stride = shape_numel(Shape(sizes.begin() + d + 1, sizes.end()));
    if (d + 1 == sizes.size()) return vector_str(base, 1, sizes[d], indent);
    const size_t remaining = sizes.size() - d;
    std::string sep(1, ',');
    sep.append(remaining - 1, '\n');
    sep.append(static_cast<size_t>(indent + 1), ' ');
    std::string out = "[";
    bool first = true;
    for (int64_t k : shown(sizes[d])) {
      if (!first) out += sep;
      first = false;
      out += k < 0 ? "..." : tensor_str(d + 1, base + k * stride, indent + 1);
    }
    return out + "]";
  }
};

bool is_default_dtype(DType t) { return t == DType::Float32 || t == DType::Int64 || t == DType::Bool; }

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  if (!device().is_cpu()) suffixes.push_back(fmt::format("device='{}'", device().str()));

  std::string body;
  if (numel() == 0) {
    if (dim() != 1) {
      std::string dims;
      for (size_t k = 0; k < sizes().size(); ++k) dims += (k ? ", " : "") + std::to_string(sizes()[k]);
      if (sizes().size() == 1) dims += ",";
      suffixes.push_back("size=(" + dims + ")");
    }
    body = "[]";
  } else {
    Values vals;
    vals.sizes = sizes();
    vals.floating = is_floating_point();
    vals.boolean = dtype() == DType::Bool;
    const bool summarize = numel() > kThreshold;
    if (vals.floating) vals.f = to_vector<double>();
    else vals.i = to_vector<int64_t>();

    // The format is chosen from the values that will be shown, as PyTorch does.
    std::vector<double> shown_f;
    std::vector<int64_t> shown_i;
    if (summarize) {
      const Shape strides = contiguous_strides(vals.sizes);
      auto gather = [&](auto&& self, size_t d, int64_t base) -> void {
        if (d == vals.sizes.size()) {
          if (vals.floating) shown_f.push_back(vals.f[base]);
          else shown_i.push_back(vals.i[base]);
          return;
        }
        for (int64_t k : shown_indices(vals.sizes[d], true))
          if (k >= 0) self(self, d + 1, base + k * strides[d]);
      };
      gather(gather, 0, 0);
    }
    Formatter formatter(summarize ? shown_f : vals.f, summarize ? shown_i : vals.i, vals.floating, vals.boolean);
    if (dim() == 0) {
      body = vals.floating ? formatter.format_float(vals.f[0]) : formatter.format_int(vals.i[0]);
    } else {
      body = Printer{vals, formatter, summarize}.tensor_str(0, 0, indent);
    }
  }
  // An empty tensor has no values to show that it holds integers or bools, so PyTorch names
  // every dtype but the default float32 there.
  const bool show_dtype = numel() == 0 ? dtype() != DType::Float32 : !is_default_dtype(dtype());
  if (show_dtype) suffixes.push_back(fmt::format("dtype={}", dtype_name(dtype())));
  if (requires_grad()) suffixes.push_back("requires_grad=True");

  // Suffixes go on the last line unless they would pass the line width.
  std::string out = prefix + body;
  const size_t last_newline = body.rfind('\n');
  int last_line_len = last_newline == std::string::npos ? static_cast<int>(out.size()) + 2
                                                        : static_cast<int>(body.size() - last_newline) + 1;
  for (const std::string& s : suffixes) {
    const int len = static_cast<int>(s.size());
    if (last_line_len + len + 2 > kLineWidth) {
      out += ",\n" + std::string(indent, ' ') + s;
      last_line_len = indent + len;
    } else {
      out += ", " + s;
      last_line_len += len + 2;
    }
  }
  return out + ")";
}

}  // namespace kiln
