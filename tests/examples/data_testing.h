// Helpers for the examples/data tests: a scratch directory that removes itself, IDX bytes
// built by hand (big-endian header and elements), and gzip files written two ways: through
// zlib's deflate, and by hand as one stored (uncompressed) deflate block, so the reader is
// checked on a file zlib's compressor did not make.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace kiln::testing {

using Bytes = std::vector<uint8_t>;

/// A fresh directory under the system's temp folder, removed with everything in it at scope end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("kiln_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  /// The directory.
  std::string str() const { return path_.string(); }
  /// A file name inside it.
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Appends `v` as 4 big-endian bytes.
inline void put_u32_be(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

/// An IDX file's bytes: the magic (0, 0, type, rank), big-endian dims, then `payload` as is.
inline Bytes idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes out = {0, 0, type, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_u32_be(out, d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

/// `data` compressed into one gzip member by zlib's deflate (level 6, 10-byte header).
inline Bytes gzip(const Bytes& data) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&zs, static_cast<uLong>(data.size())) + 32);
  zs.next_in = const_cast<Bytef*>(data.data());
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

/// `data` (< 64 KiB) as a gzip member built by hand: the 10-byte header, one final stored
/// deflate block (0x01, LEN, ~LEN little-endian, the bytes), CRC-32 and length little-endian.
inline Bytes gzip_stored(const Bytes& data) {
  REQUIRE(data.size() < 65536);
  Bytes out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0x01};
  const auto len = static_cast<uint16_t>(data.size());
  const auto nlen = static_cast<uint16_t>(~len);
  for (uint16_t v : {len, nlen}) {
    out.push_back(static_cast<uint8_t>(v));
    out.push_back(static_cast<uint8_t>(v >> 8));
  }
  out.insert(out.end(), data.begin(), data.end());
  const auto crc = static_cast<uint32_t>(crc32(0, data.data(), static_cast<uInt>(data.size())));
  for (uint32_t v : {crc, static_cast<uint32_t>(data.size())})
    for (int shift = 0; shift < 32; shift += 8) out.push_back(static_cast<uint8_t>(v >> shift));
  return out;
}

/// Writes `bytes` to `path`.
inline void write_file(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  REQUIRE(f.good());
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(f.good());
}

}  // namespace kiln::testing
