// safetensors files: the byte layout around the header (nn/safetensors_header.cpp), file and
// memory I/O, and the save-to-temporary-then-rename that keeps a failed save from clobbering
// a checkpoint.
//
// Reading and writing go through a small source/sink interface so that load() and
// load_bytes() (and save()/save_bytes()) run the same code: the fuzz target drives the
// in-memory one by the thousand, the tests drive both. Tensor data is read straight into each
// tensor's memory, one tensor at a time, so a load needs no second copy of the file, and
// nothing is allocated before the header has been checked against the file's size.
#include "safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <system_error>

#include "../tensor/make.h"
#include "safetensors_header.h"

namespace kiln {

// Tensor bytes are written and read as they sit in memory; the format is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

// ---- sources and sinks ---------------------------------------------------------------------

class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  /// Reads bytes [offset, offset + n) into dst; throws naming the file when they are not there.
  virtual void read(uint64_t offset, void* dst, size_t n) const = 0;
};

class MemorySource final : public Source {
 public:
  explicit MemorySource(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  void read(uint64_t offset, void* dst, size_t n) const override {
    KILN_INTERNAL_ASSERT(offset <= bytes_.size() && n <= bytes_.size() - offset, "read past the buffer");
    if (n > 0) std::memcpy(dst, bytes_.data() + offset, n);
  }

 private:
  std::span<const uint8_t> bytes_;
};

class FileSource final : public Source {
 public:
  explicit FileSource(const std::filesystem::path& path) : name_(path.string()) {
    do {
      fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    KILN_CHECK(fd_ >= 0, "load: cannot open \"{}\": {}", name_, errno_text(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      KILN_FAIL("load: cannot read \"{}\": {}", name_, errno_text(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd_);
      KILN_FAIL("load: \"{}\" is not a regular file", name_);
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileSource() override { ::close(fd_); }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, size_t n) const override {
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, out, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      KILN_CHECK(got >= 0, "load: cannot read \"{}\": {}", name_, errno_text(errno));
      KILN_CHECK(got > 0, "load: \"{}\" ended at byte {} while being read (was it changed meanwhile?)", name_, offset);
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
  }

 private:
  std::string name_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

class VectorSink final : public Sink {
 public:
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
  std::vector<uint8_t> bytes;
};

// A file written under a temporary name beside `target` and renamed over it by commit();
// destroyed uncommitted (an error part-way), it removes the temporary file.
class AtomicFile final : public Sink {
 public:
  explicit AtomicFile(const std::filesystem::path& target) : target_(target) {
    static std::atomic<uint64_t> counter{0};
    // O_EXCL: never write into a file someone else has open; retry with the next name.
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
      temp_ = target;
      temp_ += fmt::format(".tmp-{}-{}", ::getpid(), counter.fetch_add(1));
      fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ < 0 && errno != EEXIST && errno != EINTR) break;
    }
    KILN_CHECK(fd_ >= 0, "save: cannot write \"{}\": creating the temporary file \"{}\" failed: {}", target_.string(),
               temp_.string(), errno_text(errno));
  }
  ~AtomicFile() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t put = ::write(fd_, p, n);
      if (put < 0 && errno == EINTR) continue;
      KILN_CHECK(put > 0, "save: cannot write \"{}\": {}", target_.string(), errno_text(errno));
      p += put;
      n -= static_cast<size_t>(put);
    }
  }

  /// Flushes the data to disk, then renames the temporary file to the target.
  void commit() {
    KILN_CHECK(::fsync(fd_) == 0, "save: cannot write \"{}\": {}", target_.string(), errno_text(errno));
    const int rc = ::close(fd_);
    fd_ = -1;
    KILN_CHECK(rc == 0, "save: cannot write \"{}\": {}", target_.string(), errno_text(errno));
    KILN_CHECK(::rename(temp_.c_str(), target_.c_str()) == 0, "save: cannot rename \"{}\" to \"{}\": {}",
               temp_.string(), target_.string(), errno_text(errno));
    committed_ = true;
    // Make the rename itself durable; a directory that cannot be synced is not an error.
    std::filesystem::path dir = target_.parent_path();
    if (dir.empty()) dir = ".";
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// ---- save -----------------------------------------------------------------------------------

void serialize(const StateDict& state_dict, Sink& sink) {
  std::vector<safetensors::TensorRecord> records;
  records.reserve(state_dict.size());
  uint64_t offset = 0;
  for (const auto& [name, t] : state_dict) {
    KILN_CHECK(name != "__metadata__", "save: \"__metadata__\" is reserved for the metadata and cannot name a tensor");
    KILN_CHECK(t.defined(), "save: tensor \"{}\" is undefined", name);
    safetensors::TensorRecord r;
    r.name = name;
    r.dtype = t.dtype();
    r.shape = t.sizes();
    r.begin = offset;
    KILN_CHECK(!__builtin_add_overflow(offset, static_cast<uint64_t>(t.nbytes()), &offset),
               "save: the tensors' total size overflows 64 bits");
    r.end = offset;
    records.push_back(std::move(r));
  }
  const std::string header = safetensors::make_header(records, state_dict.metadata());
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  sink.write(length, sizeof length);
  sink.write(header.data(), header.size());
  // One tensor at a time: a CUDA model needs host memory for its largest tensor only.
  for (const auto& [name, t] : state_dict) {
    if (t.numel() == 0) continue;
    const Tensor host = t.to(Device::cpu()).contiguous();
    sink.write(host.data_ptr(), host.nbytes());
  }
}

// ---- load -----------------------------------------------------------------------------------

StateDict deserialize(const Source& source, const std::string& name, Device device) {
  const uint64_t size = source.size();
  KILN_CHECK(size >= 8, "load: \"{}\" is not a safetensors file: it has {} bytes, fewer than the 8 of the header length",
             name, size);
  uint8_t length_bytes[8];
  source.read(0, length_bytes, 8);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(length_bytes[i]) << (8 * i);
  KILN_CHECK(header_len <= safetensors::kMaxHeaderBytes,
             "load: \"{}\": header length {} is larger than the {} bytes the format allows (is this a safetensors "
             "file?)",
             name, header_len, safetensors::kMaxHeaderBytes);
  KILN_CHECK(header_len <= size - 8,
             "load: \"{}\": header length {} runs past the end of the file ({} bytes; is it truncated?)", name,
             header_len, size);
  KILN_CHECK(header_len > 0, "load: \"{}\": the header is empty (its length is 0)", name);
  std::string text(header_len, '\0');
  source.read(8, text.data(), header_len);
  const uint64_t data_start = 8 + header_len;
  const safetensors::Header header = safetensors::parse_header(text, size - data_start, name);

  StateDict out;
  for (const safetensors::TensorRecord& r : header.tensors) {
    Tensor t = new_contiguous(r.shape, r.dtype, Device::cpu(), "load");
    const size_t nbytes = static_cast<size_t>(r.end - r.begin);
    if (nbytes > 0) source.read(data_start + r.begin, t.data_ptr(), nbytes);
    if (r.dtype == DType::Bool) {
      // Only 0 and 1 are bools; any other byte would be undefined behaviour when read as one.
      const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < nbytes; ++i)
        KILN_CHECK(bytes[i] <= 1, "load: \"{}\": tensor \"{}\": BOOL element {} is {}, not 0 or 1", name, r.name, i,
                   bytes[i]);
    }
    out.insert(r.name, device.is_cpu() ? t : t.to(device));
  }
  out.metadata() = header.metadata;
  return out;
}

}  // namespace

void save(const StateDict& state_dict, const std::filesystem::path& path) {
  KILN_CHECK(!path.empty(), "save: the path is empty");
  AtomicFile file(path);
  serialize(state_dict, file);
  file.commit();
}

StateDict load(const std::filesystem::path& path, Device device) {
  FileSource source(path);
  return deserialize(source, path.string(), device);
}

std::vector<uint8_t> save_bytes(const StateDict& state_dict) {
  VectorSink sink;
  serialize(state_dict, sink);
  return std::move(sink.bytes);
}

StateDict load_bytes(std::span<const uint8_t> bytes, Device device, const std::string& name) {
  MemorySource source(bytes);
  return deserialize(source, name, device);
}

}  // namespace kiln
