// The safetensors header: the JSON text between the 8-byte length and the data, turned into
// a validated list of tensor records (and back). Internal to nn/safetensors.cpp and its tests;
// not part of the public surface (nn.h does not include it).
//
// Everything a malformed file can get wrong in its header is caught here, before a byte of
// tensor data is read or a tensor is allocated: so the loader allocates at most as many bytes
// as the file holds, and an error names the file and the tensor. The format is
// https://github.com/huggingface/safetensors (its README's "Format" section): each entry is
// {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, offsets relative to the
// first data byte, the entries tiling the data exactly (no overlaps, no holes, nothing after
// the last one), and an optional "__metadata__" object of string -> string.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../tensor/tensor.h"

namespace kiln::safetensors {

/// The largest header the format allows (the reference implementation's MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

/// One tensor's entry: its name, dtype, shape and byte range within the data section.
struct TensorRecord {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  uint64_t begin = 0;  ///< first byte, relative to the start of the data section
  uint64_t end = 0;    ///< one past the last byte
};

/// A parsed header: the records sorted by their place in the data section, and the metadata.
struct Header {
  std::vector<TensorRecord> tensors;
  std::map<std::string, std::string> metadata;
};

/// The format's name for `dtype`: "F32", "F64", "F16", "BF16", "I64", "I32", "BOOL".
std::string_view dtype_code(DType dtype);

/// The Kiln dtype of a format code, or nullopt for codes Kiln has no dtype for.
std::optional<DType> dtype_from_code(std::string_view code);

/// Parses and validates `json` (the header bytes) for a file whose data section holds
/// `data_bytes` bytes; `source` names the file in errors ("load: \"<source>\": ...").
Header parse_header(std::string_view json, uint64_t data_bytes, std::string_view source);

/// The header text for `tensors` (in that order, offsets as given) and `metadata` (left out
/// when empty), padded with spaces so that 8 + its length is a multiple of 8, as the
/// reference writer does (the data then starts 8-byte aligned). Throws when a name or a
/// metadata string is not valid UTF-8 (JSON cannot carry it).
std::string make_header(const std::vector<TensorRecord>& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace kiln::safetensors
