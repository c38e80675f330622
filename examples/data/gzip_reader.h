// A gzip file read front to back as its decompressed bytes, through zlib's inflate.
//
// Why not gzopen/gzread: gzread passes a file that is not gzip through unchanged and reports
// a cut-off stream only as a generic error, while the data readers here must tell a missing
// file, a file that is not gzip, corrupt deflate data, a bad checksum and a file cut short
// apart, each in a kiln::Error naming the path. Reading through inflate also streams: the
// caller decides how many bytes it wants (an IDX header first, then exactly the payload its
// dims describe), so a file never costs more memory than the data it really holds.
//
// Concatenated gzip members are read as one stream and zero padding after a member is
// skipped, as gzip(1) and Python's gzip module do; other trailing bytes are an error.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace kiln::data {

/// A gzip file's decompressed bytes, read in order. Every failure throws kiln::Error
/// "<who>: <path> ..." (cannot open, not gzip, corrupt data or checksum, cut short).
class GzipReader {
 public:
  /// Opens `path` and checks that it starts with the gzip magic bytes; `who` starts every
  /// error message (the public function the caller is serving).
  explicit GzipReader(std::string path, std::string who = "read_gzip");
  ~GzipReader();
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;

  /// Decompresses up to `n` bytes into `dst` and returns how many it wrote: fewer than `n`
  /// only when the stream has ended, after every member's checksum and length were verified.
  size_t read(void* dst, size_t n);
  /// The file's path, as given.
  const std::string& path() const { return path_; }

 private:
  struct State;
  std::string path_;
  std::string who_;
  std::unique_ptr<State> state_;

  bool refill();
  bool start_next_member();
};

}  // namespace kiln::data
