// read_idx_gz and GzipReader (examples/data): IDX files of every element type written here
// byte by byte, compressed by zlib or stored by hand, read back and compared element by
// element; then every way a file can be wrong, each a kiln::Error that names the path.
#include "data_testing.h"

#include <examples/data/gzip_reader.h>
#include <examples/data/idx.h>
#include <kiln/kiln.h>

#include <cstring>
#include <random>

using namespace kiln;
using namespace kiln::data;
using namespace kiln::testing;

namespace {

Bytes random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Bytes out(n);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng() >> 56);
  return out;
}

// A valid 3-D unsigned-byte IDX file [n, 4, 5] with random pixels, gzip'd.
std::string write_images(const TempDir& dir, uint32_t n, Bytes* pixels = nullptr) {
  Bytes data = random_bytes(n * 20, 7);
  if (pixels) *pixels = data;
  std::string path = dir.file("images.gz");
  write_file(path, gzip(idx_bytes(0x08, {n, 4, 5}, data)));
  return path;
}

// The message of the kiln::Error that f throws ("" if none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void check_error(const std::string& path, std::optional<uint32_t> magic, std::initializer_list<const char*> parts) {
  const std::string msg = error_of([&] { read_idx_gz(path, magic); });
  CHECK_MESSAGE(msg.rfind("read_idx_gz: ", 0) == 0, "message: " << msg);
  CHECK_MESSAGE(msg.find(path) != std::string::npos, "message lacks the path: " << msg);
  for (const char* p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "message: " << msg << " lacks " << p);
}

}  // namespace

TEST_CASE("read_idx_gz reads unsigned bytes: dims, and every element") {
  TempDir dir;
  Bytes pixels;
  const std::string path = write_images(dir, 6, &pixels);
  IdxArray a = read_idx_gz(path, idx_magic(IdxType::UInt8, 3));
  CHECK(a.type == IdxType::UInt8);
  CHECK(a.dims == std::vector<int64_t>{6, 4, 5});
  CHECK(a.numel() == 120);
  CHECK(a.data == pixels);
  // Without an expected magic any valid file reads.
  CHECK(read_idx_gz(path).data == pixels);
}

TEST_CASE("read_idx_gz turns big-endian elements of every type into host values") {
  TempDir dir;
  const std::string path = dir.file("typed.gz");
  SUBCASE("signed byte") {
    write_file(path, gzip(idx_bytes(0x09, {3}, {0x80, 0xff, 0x7f})));
    IdxArray a = read_idx_gz(path, idx_magic(IdxType::Int8, 1));
    CHECK(a.data == Bytes{0x80, 0xff, 0x7f});
  }
  SUBCASE("int16") {
    write_file(path, gzip(idx_bytes(0x0B, {2}, {0x12, 0x34, 0xff, 0xfe})));
    IdxArray a = read_idx_gz(path);
    REQUIRE(a.data.size() == 4);
    int16_t v[2];
    std::memcpy(v, a.data.data(), 4);
    CHECK(v[0] == 0x1234);
    CHECK(v[1] == -2);
  }
  SUBCASE("int32, 2-D") {
    write_file(path, gzip(idx_bytes(0x0C, {1, 2}, {0x01, 0x02, 0x03, 0x04, 0x80, 0, 0, 0})));
    IdxArray a = read_idx_gz(path, idx_magic(IdxType::Int32, 2));
    CHECK(a.dims == std::vector<int64_t>{1, 2});
    int32_t v[2];
    std::memcpy(v, a.data.data(), 8);
    CHECK(v[0] == 0x01020304);
    CHECK(v[1] == INT32_MIN);
  }
  SUBCASE("float32") {
    // 1.5f = 0x3fc00000, -0.15625f = 0xbe200000
    write_file(path, gzip(idx_bytes(0x0D, {2}, {0x3f, 0xc0, 0, 0, 0xbe, 0x20, 0, 0})));
    IdxArray a = read_idx_gz(path);
    float v[2];
    std::memcpy(v, a.data.data(), 8);
    CHECK(v[0] == 1.5f);
    CHECK(v[1] == -0.15625f);
  }
  SUBCASE("float64") {
    // -2.75 = 0xc006000000000000
    write_file(path, gzip(idx_bytes(0x0E, {1}, {0xc0, 0x06, 0, 0, 0, 0, 0, 0})));
    IdxArray a = read_idx_gz(path, idx_magic(IdxType::Float64, 1));
    double v;
    std::memcpy(&v, a.data.data(), 8);
    CHECK(v == -2.75);
  }
}

TEST_CASE("read_idx_gz reads gzip it did not write: a stored block, several members, zero padding") {
  TempDir dir;
  const std::string path = dir.file("f.gz");
  const Bytes data = random_bytes(300, 11);
  const Bytes idx = idx_bytes(0x08, {3, 100}, data);
  SUBCASE("one stored block built by hand") { write_file(path, gzip_stored(idx)); }
  SUBCASE("split over three members, the middle one stored, zero padding between and after") {
    Bytes file = gzip(Bytes(idx.begin(), idx.begin() + 7));  // the member boundary cuts the header
    file.insert(file.end(), 5, 0);
    Bytes mid = gzip_stored(Bytes(idx.begin() + 7, idx.begin() + 150));
    file.insert(file.end(), mid.begin(), mid.end());
    Bytes last = gzip(Bytes(idx.begin() + 150, idx.end()));
    file.insert(file.end(), last.begin(), last.end());
    file.insert(file.end(), 3, 0);
    write_file(path, file);
  }
  IdxArray a = read_idx_gz(path);
  CHECK(a.dims == std::vector<int64_t>{3, 100});
  CHECK(a.data == data);
}

TEST_CASE("read_idx_gz reads a payload larger than one 16 MiB read") {
  TempDir dir;
  const uint32_t rows = 17 * 1024, cols = 1024 + 3;  // 17.4 MiB, not a multiple of the chunk
  Bytes data(size_t{rows} * cols);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const std::string path = dir.file("big.gz");
  write_file(path, gzip(idx_bytes(0x08, {rows, cols}, data)));
  IdxArray a = read_idx_gz(path);
  CHECK(a.numel() == int64_t{rows} * cols);
  CHECK(a.data == data);
}

TEST_CASE("read_idx_gz: missing, unreadable and non-gzip files") {
  TempDir dir;
  SUBCASE("missing") { check_error(dir.file("nope.gz"), std::nullopt, {"cannot open", "No such file"}); }
  SUBCASE("a directory") { check_error(dir.str(), std::nullopt, {"cannot read", "Is a directory"}); }
  SUBCASE("empty") {
    write_file(dir.file("e.gz"), {});
    check_error(dir.file("e.gz"), std::nullopt, {"is empty, not a gzip file"});
  }
  SUBCASE("one byte") {
    write_file(dir.file("o.gz"), {0x1f});
    check_error(dir.file("o.gz"), std::nullopt, {"is not a gzip file", "0x1f (1 byte long)"});
  }
  SUBCASE("an uncompressed IDX file") {
    write_file(dir.file("plain.gz"), idx_bytes(0x08, {2}, {1, 2}));
    check_error(dir.file("plain.gz"), std::nullopt, {"is not a gzip file: it starts with 0x00 0x00"});
  }
}

TEST_CASE("read_idx_gz: corrupt and cut-off gzip data") {
  TempDir dir;
  const std::string path = dir.file("c.gz");
  const Bytes good = gzip(idx_bytes(0x08, {50, 40}, random_bytes(2000, 3)));
  SUBCASE("an invalid deflate block type") {
    Bytes bad = good;
    bad[10] = 0x07;  // the first deflate byte: BFINAL 1, BTYPE 11 (reserved)
    write_file(path, bad);
    check_error(path, std::nullopt, {"is corrupt gzip data", "invalid block type"});
  }
  SUBCASE("a wrong CRC-32") {
    Bytes bad = good;
    bad[bad.size() - 8] ^= 0x01;
    write_file(path, bad);
    check_error(path, std::nullopt, {"is corrupt gzip data after 2012 decompressed bytes", "incorrect data check"});
  }
  SUBCASE("a wrong length") {
    Bytes bad = good;
    bad[bad.size() - 4] ^= 0x01;
    write_file(path, bad);
    check_error(path, std::nullopt, {"is corrupt gzip data", "incorrect length check"});
  }
  SUBCASE("a bad gzip header (compression method 7)") {
    Bytes bad = good;
    bad[2] = 7;
    write_file(path, bad);
    check_error(path, std::nullopt, {"is corrupt gzip data", "unknown compression method"});
  }
  SUBCASE("cut short: in the header, in the data, in the checksum") {
    for (size_t keep : {size_t{5}, good.size() / 2, good.size() - 1}) {
      CAPTURE(keep);
      write_file(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(keep)));
      check_error(path, std::nullopt, {"is cut short: its gzip stream stops after", "before the end marker"});
    }
  }
  SUBCASE("trailing bytes that are not another member") {
    Bytes bad = good;
    bad.push_back(0);
    bad.push_back(0x42);
    write_file(path, bad);
    check_error(path, std::nullopt, {"has trailing bytes after its gzip data (byte 0x42 after 2012"});
  }
  SUBCASE("a second member that breaks off after its header") {
    Bytes bad = good;
    bad.insert(bad.end(), good.begin(), good.begin() + 10);
    write_file(path, bad);
    check_error(path, std::nullopt, {"is cut short: its gzip stream stops after 2012 decompressed bytes"});
  }
  SUBCASE("a whole second member: more data than the dims describe") {
    Bytes bad = good;
    bad.insert(bad.end(), good.begin(), good.end());
    write_file(path, bad);
    check_error(path, std::nullopt, {"holds more data than its dims [50, 40] of unsigned byte describe (2000 bytes)"});
  }
}

TEST_CASE("read_idx_gz: wrong magic numbers and headers") {
  TempDir dir;
  const std::string path = dir.file("m.gz");
  SUBCASE("non-zero first bytes") {
    write_file(path, gzip({0x12, 0x34, 0x08, 0x01, 0, 0, 0, 1, 5}));
    check_error(path, std::nullopt, {"has a wrong magic number 0x12340801"});
  }
  SUBCASE("an unknown type code") {
    write_file(path, gzip({0, 0, 0x0A, 0x01, 0, 0, 0, 1, 5}));
    check_error(path, std::nullopt, {"has a wrong magic number 0x00000a01", "a type code"});
  }
  SUBCASE("a labels file where images are expected") {
    write_file(path, gzip(idx_bytes(0x08, {2}, {1, 2})));
    check_error(path, idx_magic(IdxType::UInt8, 3),
                {"wrong magic number 0x00000801 (unsigned byte, 1 dim), expected 0x00000803 (unsigned byte, 3 dims)"});
  }
  SUBCASE("the right rank, the wrong type") {
    write_file(path, gzip(idx_bytes(0x0D, {1}, {0, 0, 0, 0})));
    check_error(path, idx_magic(IdxType::UInt8, 1), {"0x00000d01 (float32, 1 dim), expected 0x00000801"});
  }
  SUBCASE("zero dims") {
    write_file(path, gzip({0, 0, 0x08, 0x00, 7}));
    check_error(path, std::nullopt, {"has a magic number with 0 dims"});
  }
  SUBCASE("shorter than a magic number") {
    write_file(path, gzip({0, 0, 8}));
    check_error(path, std::nullopt, {"is cut short: reading the IDX magic number needs 4 bytes, the file holds 3"});
  }
  SUBCASE("dims cut short") {
    write_file(path, gzip({0, 0, 8, 3, 0, 0, 0, 2, 0, 0}));
    check_error(path, std::nullopt, {"is cut short: reading the header's 3 dim sizes needs 12 bytes, the file holds 6"});
  }
}

TEST_CASE("read_idx_gz: dims that disagree with the data") {
  TempDir dir;
  const std::string path = dir.file("d.gz");
  SUBCASE("fewer bytes than the dims need") {
    write_file(path, gzip(idx_bytes(0x08, {3, 4, 5}, random_bytes(59, 1))));
    check_error(path, std::nullopt, {"is cut short: its dims [3, 4, 5] of unsigned byte need 60 bytes of data, "
                                     "the file holds 59"});
  }
  SUBCASE("multi-byte elements: the byte count is dims times the element size") {
    write_file(path, gzip(idx_bytes(0x0C, {3}, random_bytes(11, 1))));
    check_error(path, std::nullopt, {"its dims [3] of int32 need 12 bytes of data, the file holds 11"});
  }
  SUBCASE("more bytes than the dims describe") {
    write_file(path, gzip(idx_bytes(0x08, {3, 4, 5}, random_bytes(61, 1))));
    check_error(path, std::nullopt, {"holds more data than its dims [3, 4, 5] of unsigned byte describe (60 bytes)"});
  }
  SUBCASE("dims whose product overflows int64") {
    write_file(path, gzip(idx_bytes(0x0E, {0xffffffffu, 0xffffffffu, 0x10}, {})));
    check_error(path, std::nullopt, {"has dims [4294967295, 4294967295, 16] of float64 whose byte size overflows int64"});
  }
  SUBCASE("dims that claim terabytes over a few bytes fail as cut short, without allocating them") {
    write_file(path, gzip(idx_bytes(0x08, {0xffffffffu, 0xffff}, random_bytes(10, 1))));
    check_error(path, std::nullopt, {"need 281470681677825 bytes of data, the file holds 10"});
  }
}

TEST_CASE("GzipReader reads in any piece sizes and reports the end") {
  TempDir dir;
  const Bytes data = random_bytes(5000, 9);
  const std::string path = dir.file("g.gz");
  write_file(path, gzip(data));
  GzipReader gz(path);
  Bytes got;
  uint8_t buf[97];
  for (size_t piece = 1;; piece = piece % 84 + 13) {  // 1, 14, 27, ... up to 96: within buf
    size_t n = gz.read(buf, piece);
    got.insert(got.end(), buf, buf + n);
    if (n < piece) break;
  }
  CHECK(got == data);
  CHECK(gz.read(buf, 10) == 0);
  CHECK(gz.read(buf, 0) == 0);
  CHECK_THROWS_WITH_AS(GzipReader(dir.file("x.gz"), "my_loader"), doctest::Contains("my_loader: cannot open"), Error);
}

TEST_CASE("idx_magic and the type table") {
  CHECK(idx_magic(IdxType::UInt8, 3) == 0x00000803u);
  CHECK(idx_magic(IdxType::Float64, 1) == 0x00000E01u);
  CHECK(idx_type_size(IdxType::Int16) == 2);
  CHECK(idx_type_size(IdxType::Float32) == 4);
  CHECK(std::string(idx_type_name(IdxType::Int8)) == "signed byte");
  CHECK_THROWS_WITH_AS(idx_magic(IdxType::UInt8, 256), doctest::Contains("idx_magic: rank must be in [0, 255], got 256"),
                       Error);
}
