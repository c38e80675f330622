// The safetensors header: parsing with every check the format asks for, and writing.
//
// Checks run in the order a reader needs them: JSON syntax (with duplicate keys caught while
// parsing, since a JSON object keeps only one of them), then each entry on its own (fields,
// dtype, shape, offsets, byte count), then the entries together (sorted by offset, they must
// tile the data section exactly). Sizes are checked for overflow before they are multiplied.
#include "safetensors_header.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "../tensor/shape.h"

namespace kiln::safetensors {

namespace {

using nlohmann::json;

struct CodeAndType {
  std::string_view code;
  DType dtype;
};
constexpr CodeAndType kCodes[] = {
    {"F64", DType::Float64}, {"F32", DType::Float32}, {"F16", DType::Float16}, {"BF16", DType::BFloat16},
    {"I64", DType::Int64},   {"I32", DType::Int32},   {"BOOL", DType::Bool},
};
// Codes of the format that name no Kiln dtype: refused with "not supported", not "unknown".
constexpr std::string_view kForeignCodes[] = {"U8",  "I8",      "U16",    "I16",      "U32",      "U64",
                                              "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",
                                              "C64", "C128"};

// Error context: which file, and which tensor (when there is one).
struct Context {
  std::string_view source;
  [[noreturn]] void fail(const std::string& message) const {
    KILN_FAIL("load: \"{}\": {}", source, message);
  }
  [[noreturn]] void fail(const std::string& tensor, const std::string& message) const {
    KILN_FAIL("load: \"{}\": tensor \"{}\": {}", source, tensor, message);
  }
};

// A short description of a JSON value for error messages: its type, and the value itself
// when short.
std::string short_dump(const json& j) {
  std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}
std::string describe(const json& j) { return j.is_null() ? "null" : fmt::format("{} {}", j.type_name(), short_dump(j)); }

// Parses the header text, refusing a key that appears twice in one object (nlohmann's DOM
// would keep only the last one silently; the format forbids duplicates).
json parse_json(std::string_view text, const Context& ctx) {
  struct Frame {
    std::string owner;  // the key whose value this object is ("" for the header itself)
    std::set<std::string> keys;
  };
  std::vector<Frame> frames;
  std::string last_key;
  auto callback = [&](int, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames.push_back({frames.empty() ? std::string() : last_key, {}});
        break;
      case json::parse_event_t::object_end:
        if (!frames.empty()) frames.pop_back();
        break;
      case json::parse_event_t::key: {
        last_key = parsed.get<std::string>();
        if (frames.empty()) break;
        if (!frames.back().keys.insert(last_key).second) {
          if (frames.size() == 1) ctx.fail(fmt::format("duplicate key \"{}\" in the header", last_key));
          ctx.fail(frames.back().owner, fmt::format("duplicate key \"{}\" in its entry", last_key));
        }
        break;
      }
      default: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception& e) {
    ctx.fail(fmt::format("the header is not valid JSON ({})", e.what()));
  }
}

// A non-negative JSON integer that fits int64, or nullopt.
std::optional<int64_t> as_size(const json& j) {
  if (!j.is_number_unsigned()) return std::nullopt;
  const uint64_t v = j.get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string shape_text(const Shape& shape) { return shape_str(shape); }

TensorRecord parse_entry(const std::string& name, const json& entry, uint64_t data_bytes, const Context& ctx) {
  if (!entry.is_object())
    ctx.fail(name, fmt::format("its entry must be an object with dtype, shape and data_offsets, got {}",
                               describe(entry)));
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field)) ctx.fail(name, fmt::format("its entry has no \"{}\"", field));
  // Other fields are ignored, as the reference reader ignores them.
  TensorRecord r;
  r.name = name;

  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) ctx.fail(name, fmt::format("dtype must be a string, got {}", describe(dtype)));
  const std::string code = dtype.get<std::string>();
  const std::optional<DType> dt = dtype_from_code(code);
  if (!dt) {
    const bool foreign = std::find(std::begin(kForeignCodes), std::end(kForeignCodes), code) != std::end(kForeignCodes);
    ctx.fail(name, fmt::format("{} dtype \"{}\" (Kiln reads F64, F32, F16, BF16, I64, I32 and BOOL)",
                               foreign ? "unsupported" : "unknown", code));
  }
  r.dtype = *dt;

  const json& shape = entry["shape"];
  if (!shape.is_array()) ctx.fail(name, fmt::format("shape must be a list of sizes, got {}", describe(shape)));
  // The product of the sizes (zeros counted as one, as row-major strides count them) times
  // the element size must fit int64: then numel, nbytes and every stride do.
  int64_t extent = static_cast<int64_t>(element_size(r.dtype));
  bool overflow = false;
  for (const json& d : shape) {
    const std::optional<int64_t> size = as_size(d);
    if (!size)
      ctx.fail(name, fmt::format("shape {} must hold non-negative integers below 2^63, got {}", short_dump(shape),
                                 describe(d)));
    r.shape.push_back(*size);
    overflow = overflow || mul_overflows(extent, std::max<int64_t>(*size, 1), &extent);
  }
  if (overflow)
    ctx.fail(name, fmt::format("shape {} of {} is too large (its byte size overflows int64)", shape_text(r.shape),
                               code));
  const int64_t nbytes = shape_numel(r.shape) * static_cast<int64_t>(element_size(r.dtype));

  const json& offsets = entry["data_offsets"];
  const std::optional<int64_t> begin = offsets.is_array() && offsets.size() == 2 ? as_size(offsets[0]) : std::nullopt;
  const std::optional<int64_t> end = offsets.is_array() && offsets.size() == 2 ? as_size(offsets[1]) : std::nullopt;
  if (!begin || !end || *begin > *end)
    ctx.fail(name, fmt::format("data_offsets must be two non-negative integers [begin, end] with begin <= end, "
                               "got {}",
                               describe(offsets)));
  r.begin = static_cast<uint64_t>(*begin);
  r.end = static_cast<uint64_t>(*end);
  if (r.end > data_bytes)
    ctx.fail(name, fmt::format("data_offsets [{}, {}] run past the end of the data ({} bytes)", r.begin, r.end,
                               data_bytes));
  if (r.end - r.begin != static_cast<uint64_t>(nbytes))
    ctx.fail(name, fmt::format("data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", r.begin, r.end,
                               r.end - r.begin, shape_text(r.shape), code, nbytes));
  return r;
}

std::map<std::string, std::string> parse_metadata(const json& meta, const Context& ctx) {
  if (!meta.is_object())
    ctx.fail(fmt::format("\"__metadata__\" must be an object of strings, got {}", describe(meta)));
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string())
      ctx.fail(fmt::format("\"__metadata__\" value of \"{}\" must be a string, got {}", key, describe(value)));
    out.emplace(key, value.get<std::string>());
  }
  return out;
}

// Sorted by offset, the tensors must cover [0, data_bytes) exactly: each begins where the
// previous one ended (empty tensors sit between them), so no byte is read twice or left over.
void check_tiling(const std::vector<TensorRecord>& tensors, uint64_t data_bytes, const Context& ctx) {
  uint64_t at = 0;
  const TensorRecord* previous = nullptr;
  for (const TensorRecord& r : tensors) {
    if (r.begin < at)
      ctx.fail(r.name, fmt::format("data_offsets [{}, {}] overlap tensor \"{}\" at [{}, {}]", r.begin, r.end,
                                   previous->name, previous->begin, previous->end));
    if (r.begin > at)
      ctx.fail(r.name, fmt::format("data_offsets [{}, {}] leave bytes [{}, {}) before them that belong to no tensor",
                                   r.begin, r.end, at, r.begin));
    at = r.end;
    previous = &r;
  }
  if (at != data_bytes)
    ctx.fail(fmt::format("the data section has {} bytes, but its tensors end at byte {} (bytes [{}, {}) belong to "
                         "no tensor)",
                         data_bytes, at, at, data_bytes));
}

}  // namespace

std::string_view dtype_code(DType dtype) {
  for (const auto& c : kCodes)
    if (c.dtype == dtype) return c.code;
  KILN_FAIL("save: dtype {} has no safetensors code", dtype);
}

std::optional<DType> dtype_from_code(std::string_view code) {
  for (const auto& c : kCodes)
    if (c.code == code) return c.dtype;
  return std::nullopt;
}

Header parse_header(std::string_view text, uint64_t data_bytes, std::string_view source) {
  const Context ctx{source};
  const json root = parse_json(text, ctx);
  if (!root.is_object()) ctx.fail(fmt::format("the header must be a JSON object, got {}", describe(root)));
  // The format asks for '{' first (padding may only follow the object).
  if (text.empty() || text.front() != '{') ctx.fail("the header must begin with '{' (it begins with whitespace)");

  Header header;
  for (const auto& [key, value] : root.items()) {
    if (key == "__metadata__") {
      header.metadata = parse_metadata(value, ctx);
      continue;
    }
    header.tensors.push_back(parse_entry(key, value, data_bytes, ctx));
  }
  // Empty tensors sort before a tensor that begins where they do; ties keep the JSON order.
  std::stable_sort(header.tensors.begin(), header.tensors.end(), [](const TensorRecord& a, const TensorRecord& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  check_tiling(header.tensors, data_bytes, ctx);
  return header;
}

std::string make_header(const std::vector<TensorRecord>& tensors, const std::map<std::string, std::string>& metadata) {
  // ordered_json: the file lists the metadata first, then the tensors in their data order.
  nlohmann::ordered_json root = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    root["__metadata__"] = std::move(meta);
  }
  for (const TensorRecord& r : tensors) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = dtype_code(r.dtype);
    entry["shape"] = std::vector<int64_t>(r.shape.begin(), r.shape.end());
    entry["data_offsets"] = {r.begin, r.end};
    root[r.name] = std::move(entry);
  }
  std::string text;
  try {
    text = root.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    KILN_FAIL("save: tensor names and metadata must be valid UTF-8 ({})", e.what());
  }
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

}  // namespace kiln::safetensors
