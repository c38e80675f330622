// Helpers for the state-dict and safetensors suites: a scratch directory a test owns, the raw
// bytes of tensors and files, and a safetensors file taken apart into its header JSON and data
// and put back together (how the malformed-file tests build their broken files from good ones).
#pragma once

#include <doctest/doctest.h>
#include <kiln/kiln.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::testing {

/// A fresh directory under the system's temporary directory, removed with everything in it
/// when the test ends.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("kiln_safetensors_test_{}_{}", ::getpid(), counter.fetch_add(1));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// The directory.
  const std::filesystem::path& path() const { return path_; }
  /// A path inside it.
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  /// The names of the files in it, sorted.
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::filesystem::path path_;
};

/// A tensor's elements as bytes, row-major (a contiguous host copy's memory).
inline std::vector<uint8_t> tensor_bytes(const Tensor& t) {
  const Tensor host = t.to(Device::cpu()).contiguous();
  const auto* p = static_cast<const uint8_t*>(host.data_ptr());
  return host.numel() == 0 ? std::vector<uint8_t>() : std::vector<uint8_t>(p, p + host.nbytes());
}

/// True when a and b have the same dtype, shape and bytes (NaNs and -0.0 compared bit for bit).
inline bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && tensor_bytes(a) == tensor_bytes(b);
}

/// Reads a whole file.
inline std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Writes a whole file.
inline void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

/// The 8-byte little-endian encoding of n.
inline std::vector<uint8_t> le64(uint64_t n) {
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  return out;
}

/// A file from its parts: the length of `header` as given (or `length` when set), the header
/// text, then the data.
inline std::vector<uint8_t> assemble(const std::string& header, const std::vector<uint8_t>& data,
                                     std::optional<uint64_t> length = std::nullopt) {
  // Element by element: GCC 12 warns falsely (-Warray-bounds) about range inserts here.
  std::vector<uint8_t> out;
  out.reserve(8 + header.size() + data.size());
  for (uint8_t b : le64(length.value_or(header.size()))) out.push_back(b);
  for (char c : header) out.push_back(static_cast<uint8_t>(c));
  for (uint8_t b : data) out.push_back(b);
  return out;
}

/// A well-formed file taken apart: its header as JSON and its data section.
struct FileParts {
  nlohmann::json header;
  std::vector<uint8_t> data;
  /// The file again, from the (possibly edited) header and data.
  std::vector<uint8_t> bytes() const { return assemble(header.dump(), data); }
};

/// Splits well-formed safetensors bytes into header and data.
inline FileParts split(const std::vector<uint8_t>& file) {
  REQUIRE(file.size() >= 8);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(file[i]) << (8 * i);
  REQUIRE(8 + n <= file.size());
  FileParts parts;
  parts.header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  parts.data.assign(file.begin() + 8 + static_cast<std::ptrdiff_t>(n), file.end());
  return parts;
}

}  // namespace kiln::testing
