// read_idx_gz: the IDX header checked field by field, then exactly the payload it describes
// (idx.h has the format and the order of the checks).
#include "idx.h"

#include "gzip_reader.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace kiln::data {

namespace {

constexpr int64_t kReserveLimit = int64_t{256} << 20;  // bytes reserved before any data arrives

bool known_type(uint8_t code) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::UInt8:
    case IdxType::Int8:
    case IdxType::Int16:
    case IdxType::Int32:
    case IdxType::Float32:
    case IdxType::Float64: return true;
  }
  return false;
}

std::string describe_magic(uint32_t magic) {
  const auto code = static_cast<uint8_t>((magic >> 8) & 0xff);
  const int rank = static_cast<int>(magic & 0xff);
  if ((magic >> 16) != 0 || !known_type(code)) return fmt::format("0x{:08x}", magic);
  return fmt::format("0x{:08x} ({}, {} dim{})", magic, idx_type_name(static_cast<IdxType>(code)), rank,
                     rank == 1 ? "" : "s");
}

uint32_t big_endian_u32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// Reads exactly n bytes, or fails with a "cut short" message saying which part is missing.
void read_exactly(GzipReader& gz, uint8_t* dst, size_t n, const std::string& who, const std::string& what) {
  size_t got = gz.read(dst, n);
  KILN_CHECK(got == n, "{}: {} is cut short: reading {} needs {} bytes, the file holds {}", who, gz.path(), what, n, got);
}

// Big-endian elements of `size` bytes to host order, in place.
void to_host_order(std::vector<uint8_t>& data, size_t size) {
  if constexpr (std::endian::native == std::endian::big) return;
  if (size == 1) return;
  for (size_t i = 0; i + size <= data.size(); i += size) std::reverse(data.begin() + i, data.begin() + i + size);
}

}  // namespace

size_t idx_type_size(IdxType type) {
  switch (type) {
    case IdxType::UInt8:
    case IdxType::Int8: return 1;
    case IdxType::Int16: return 2;
    case IdxType::Int32:
    case IdxType::Float32: return 4;
    case IdxType::Float64: return 8;
  }
  KILN_FAIL("idx_type_size: unknown IDX type code 0x{:02x}", static_cast<unsigned>(type));
}

const char* idx_type_name(IdxType type) {
  switch (type) {
    case IdxType::UInt8: return "unsigned byte";
    case IdxType::Int8: return "signed byte";
    case IdxType::Int16: return "int16";
    case IdxType::Int32: return "int32";
    case IdxType::Float32: return "float32";
    case IdxType::Float64: return "float64";
  }
  return "unknown";
}

uint32_t idx_magic(IdxType type, int rank) {
  KILN_CHECK(rank >= 0 && rank <= 255, "idx_magic: rank must be in [0, 255], got {}", rank);
  return (uint32_t{static_cast<uint8_t>(type)} << 8) | static_cast<uint32_t>(rank);
}

int64_t IdxArray::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) KILN_CHECK(!mul_overflows(n, d, &n), "IdxArray::numel: dims {} overflow int64", dims);
  return n;
}

IdxArray read_idx_gz(const std::string& path, std::optional<uint32_t> expected_magic, const std::string& who) {
  GzipReader gz(path, who);
  uint8_t head[4];
  read_exactly(gz, head, 4, who, "the IDX magic number");
  const uint32_t magic = big_endian_u32(head);
  KILN_CHECK(head[0] == 0 && head[1] == 0 && known_type(head[2]),
             "{}: {} has a wrong magic number 0x{:08x}: an IDX file starts with 0x00 0x00, a type code "
             "(0x08, 0x09, 0x0b, 0x0c, 0x0d or 0x0e) and the number of dims",
             who, path, magic);
  if (expected_magic)
    KILN_CHECK(magic == *expected_magic, "{}: {} has a wrong magic number {}, expected {}", who, path,
               describe_magic(magic), describe_magic(*expected_magic));
  IdxArray array;
  array.type = static_cast<IdxType>(head[2]);
  const int rank = head[3];
  KILN_CHECK(rank >= 1, "{}: {} has a magic number with 0 dims (0x{:08x})", who, path, magic);

  std::vector<uint8_t> sizes(static_cast<size_t>(rank) * 4);
  read_exactly(gz, sizes.data(), sizes.size(), who, fmt::format("the header's {} dim sizes", rank));
  const auto element = static_cast<int64_t>(idx_type_size(array.type));
  for (int d = 0; d < rank; ++d) array.dims.push_back(big_endian_u32(sizes.data() + 4 * d));
  int64_t bytes = element;
  for (int64_t d : array.dims)
    KILN_CHECK(!mul_overflows(bytes, d, &bytes), "{}: {} has dims [{}] of {} whose byte size overflows int64", who,
               path, fmt::join(array.dims, ", "), idx_type_name(array.type));

  // Exactly `bytes` of payload: reserve a plausible amount, grow as the data arrives.
  array.data.reserve(static_cast<size_t>(std::min(bytes, kReserveLimit)));
  int64_t got = 0;
  while (got < bytes) {
    const int64_t want = std::min<int64_t>(bytes - got, int64_t{16} << 20);
    array.data.resize(static_cast<size_t>(got + want));
    const auto n = static_cast<int64_t>(gz.read(array.data.data() + got, static_cast<size_t>(want)));
    got += n;
    KILN_CHECK(n == want, "{}: {} is cut short: its dims [{}] of {} need {} bytes of data, the file holds {}", who,
               path, fmt::join(array.dims, ", "), idx_type_name(array.type), bytes, got);
  }
  uint8_t extra;
  KILN_CHECK(gz.read(&extra, 1) == 0,
             "{}: {} holds more data than its dims [{}] of {} describe ({} bytes): dims and file size disagree", who,
             path, fmt::join(array.dims, ", "), idx_type_name(array.type), bytes);
  to_host_order(array.data, static_cast<size_t>(element));
  return array;
}

}  // namespace kiln::data
