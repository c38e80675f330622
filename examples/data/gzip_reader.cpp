// GzipReader: zlib's inflate over a FILE*, one member after another (gzip_reader.h says why
// inflate rather than gzread).
#include "gzip_reader.h"

#include <kiln/kiln.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace kiln::data {

struct GzipReader::State {
  std::FILE* file = nullptr;
  z_stream zs{};
  bool zs_ready = false;
  std::vector<unsigned char> in = std::vector<unsigned char>(size_t{1} << 16);
  bool member_done = false;  // the current member's end marker and checksum were read
  bool finished = false;     // no member follows: read() returns 0 from now on
  uint64_t produced = 0;     // decompressed bytes handed out so far

  ~State() {
    if (zs_ready) inflateEnd(&zs);
    if (file != nullptr) std::fclose(file);
  }
};

GzipReader::GzipReader(std::string path, std::string who)
    : path_(std::move(path)), who_(std::move(who)), state_(std::make_unique<State>()) {
  State& s = *state_;
  s.file = std::fopen(path_.c_str(), "rb");
  KILN_CHECK(s.file != nullptr, "{}: cannot open {}: {}", who_, path_, std::strerror(errno));
  // 16 + MAX_WBITS: a gzip wrapper only (no zlib or raw deflate streams), any window size.
  KILN_CHECK(inflateInit2(&s.zs, 16 + MAX_WBITS) == Z_OK, "{}: zlib could not start inflating {}", who_, path_);
  s.zs_ready = true;
  KILN_CHECK(refill(), "{}: {} is empty, not a gzip file", who_, path_);
  const unsigned char* p = s.zs.next_in;
  if (s.zs.avail_in < 2 || p[0] != 0x1f || p[1] != 0x8b) {
    std::string start = s.zs.avail_in < 2 ? fmt::format("0x{:02x} (1 byte long)", p[0])
                                          : fmt::format("0x{:02x} 0x{:02x}", p[0], p[1]);
    KILN_FAIL("{}: {} is not a gzip file: it starts with {}, gzip files with 0x1f 0x8b", who_, path_, start);
  }
}

GzipReader::~GzipReader() = default;

// Loads the next slice of the file into the input buffer when it is empty; false at the
// end of the file.
bool GzipReader::refill() {
  State& s = *state_;
  if (s.zs.avail_in > 0) return true;
  size_t n = std::fread(s.in.data(), 1, s.in.size(), s.file);
  if (n == 0) {
    KILN_CHECK(!std::ferror(s.file), "{}: cannot read {}: {}", who_, path_, std::strerror(errno));
    return false;
  }
  s.zs.next_in = s.in.data();
  s.zs.avail_in = static_cast<uInt>(n);
  return true;
}

// After a member's end: skips zero padding and starts the next member; false when the file
// ends instead.
bool GzipReader::start_next_member() {
  State& s = *state_;
  for (;;) {
    if (!refill()) return false;
    while (s.zs.avail_in > 0 && *s.zs.next_in == 0) {
      ++s.zs.next_in;
      --s.zs.avail_in;
    }
    if (s.zs.avail_in > 0) break;
  }
  KILN_CHECK(*s.zs.next_in == 0x1f,
             "{}: {} has trailing bytes after its gzip data (byte 0x{:02x} after {} decompressed bytes), "
             "neither padding nor another gzip member",
             who_, path_, *s.zs.next_in, s.produced);
  KILN_CHECK(inflateReset(&s.zs) == Z_OK, "{}: zlib could not restart inflating {}", who_, path_);
  s.member_done = false;
  return true;
}

size_t GzipReader::read(void* dst, size_t n) {
  State& s = *state_;
  auto* out = static_cast<unsigned char*>(dst);
  size_t done = 0;
  while (done < n && !s.finished) {
    if (s.member_done && !start_next_member()) {
      s.finished = true;
      break;
    }
    KILN_CHECK(refill(), "{}: {} is cut short: its gzip stream stops after {} decompressed bytes, before the "
               "end marker and checksum", who_, path_, s.produced + done);
    // avail_out is 32-bit: hand inflate at most 1 GiB at a time.
    const uInt room = static_cast<uInt>(std::min<size_t>(n - done, size_t{1} << 30));
    s.zs.next_out = out + done;
    s.zs.avail_out = room;
    const int rc = inflate(&s.zs, Z_NO_FLUSH);
    done += room - s.zs.avail_out;
    switch (rc) {
      case Z_OK: break;
      case Z_STREAM_END: s.member_done = true; break;
      case Z_MEM_ERROR: KILN_FAIL("{}: out of memory while inflating {}", who_, path_);
      default:  // Z_DATA_ERROR (bad data, header or checksum), Z_NEED_DICT, Z_BUF_ERROR, Z_STREAM_ERROR
        KILN_FAIL("{}: {} is corrupt gzip data after {} decompressed bytes (zlib: {})", who_, path_,
                  s.produced + done, s.zs.msg != nullptr ? s.zs.msg : zError(rc));
    }
  }
  s.produced += done;
  return done;
}

}  // namespace kiln::data
