// The IDX format (the MNIST family's files), read from a gzip file.
//
// An IDX file is a 4-byte magic number, one big-endian uint32 size per dim, then the
// elements in row-major order, big-endian. The magic is 0x00 0x00, a type code (0x08
// unsigned byte, 0x09 signed byte, 0x0B int16, 0x0C int32, 0x0D float32, 0x0E float64) and
// the number of dims: 0x00000803 is a 3-D array of unsigned bytes.
//
// read_idx_gz() checks the header before it allocates anything: the magic (against the one
// the caller expects, when given), the dims, and their product times the element size for
// int64 overflow. It then inflates exactly that many bytes and requires the stream to end
// there: fewer is a file cut short, more a file whose dims disagree with its size. Memory is
// reserved up front only up to 256 MiB; past that the buffer grows as data arrives, so a
// header that claims terabytes fails as "cut short", not as an allocation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::data {

/// The element type codes of the IDX format (the magic number's third byte).
enum class IdxType : uint8_t { UInt8 = 0x08, Int8 = 0x09, Int16 = 0x0B, Int32 = 0x0C, Float32 = 0x0D, Float64 = 0x0E };

/// Bytes per element of `type`.
size_t idx_type_size(IdxType type);
/// "unsigned byte", "int32", ...: how a type appears in messages.
const char* idx_type_name(IdxType type);
/// The magic number of an IDX file of `type` with `rank` dims (0x00000803 for 3-D bytes).
uint32_t idx_magic(IdxType type, int rank);

/// An IDX array in memory: its element type, dims, and elements in host byte order.
struct IdxArray {
  IdxType type = IdxType::UInt8;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // numel() * idx_type_size(type) bytes, row-major, host byte order

  /// The product of the dims.
  int64_t numel() const;
};

/// Reads the gzip-compressed IDX file at `path`. With `expected_magic` the file must carry
/// that magic number (type and rank). Throws kiln::Error "<who>: <path> ..." when the file is
/// missing, not gzip or corrupt, its magic is wrong, its dims overflow, or its data is
/// shorter or longer than its dims say.
IdxArray read_idx_gz(const std::string& path, std::optional<uint32_t> expected_magic = std::nullopt,
                     const std::string& who = "read_idx_gz");

}  // namespace kiln::data
