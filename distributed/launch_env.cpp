// What the launcher told this process: torchrun's, Open MPI's and SLURM's variables, and
// KILN_DIST_TIMEOUT. Parsed strictly (a malformed value is an error naming the variable,
// never a silent default), because a wrong rank or world size would only show up later as
// a hang inside the communicator's bootstrap.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../core/error.h"
#include "process_group.h"

namespace kiln::distributed {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

int parse_int(const char* name, const char* value) {
  const std::string_view s(value);
  int n = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  KILN_CHECK(ec == std::errc() && end == s.data() + s.size(), "read_launch_env: {} must be an integer, got \"{}\"",
             name, s);
  return n;
}

// The first host of a SLURM node list: "gpu[003-005,007],cpu1" -> "gpu003", "n1,n2" -> "n1".
std::string first_slurm_host(std::string_view list) {
  const size_t comma = list.find(',');
  const size_t bracket = list.find('[');
  if (bracket == std::string_view::npos || (comma != std::string_view::npos && comma < bracket))
    return std::string(list.substr(0, comma));
  const std::string_view prefix = list.substr(0, bracket);
  const std::string_view inside = list.substr(bracket + 1);
  const size_t stop = inside.find_first_of("-,]");
  return std::string(prefix) + std::string(inside.substr(0, stop));
}

// MASTER_ADDR / MASTER_PORT where set (every launcher), else the launcher's own hint.
void read_master(LaunchEnv& e, const char* fallback_addr) {
  if (const char* a = env("MASTER_ADDR"))
    e.master_addr = a;
  else if (fallback_addr != nullptr)
    e.master_addr = fallback_addr;
  if (const char* p = env("MASTER_PORT")) e.master_port = parse_int("MASTER_PORT", p);
}

// One launcher's rank / size / local-rank variables, all required once the first is present.
bool read_triple(LaunchEnv& e, const char* rank, const char* size, const char* local, const char* source) {
  const char* r = env(rank);
  const char* n = env(size);
  if (r == nullptr && n == nullptr) return false;
  KILN_CHECK(r != nullptr && n != nullptr, "read_launch_env: {} is set but {} is not ({} launch)",
             r != nullptr ? rank : size, r != nullptr ? size : rank, source);
  e.rank = parse_int(rank, r);
  e.world_size = parse_int(size, n);
  const char* l = env(local);
  // Without a local rank (a hand-made torchrun environment) one node is assumed.
  e.local_rank = l != nullptr ? parse_int(local, l) : e.rank;
  e.source = source;
  return true;
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv e;
  if (read_triple(e, "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun")) {
    read_master(e, nullptr);
  } else if (read_triple(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "mpirun")) {
    read_master(e, nullptr);  // mpirun names no master: MASTER_ADDR, else this host (one node)
  } else if (read_triple(e, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "srun")) {
    const char* nodes = env("SLURM_STEP_NODELIST");
    if (nodes == nullptr) nodes = env("SLURM_JOB_NODELIST");
    const std::string first = nodes != nullptr ? first_slurm_host(nodes) : std::string();
    read_master(e, first.empty() ? nullptr : first.c_str());
  } else {
    read_master(e, nullptr);
  }
  KILN_CHECK(e.world_size >= 1, "read_launch_env: the world size must be at least 1, got {} ({} launch)", e.world_size,
             e.source);
  KILN_CHECK(e.rank >= 0 && e.rank < e.world_size, "read_launch_env: rank {} is outside [0, {}) ({} launch)", e.rank,
             e.world_size, e.source);
  KILN_CHECK(e.local_rank >= 0, "read_launch_env: the local rank must be >= 0, got {} ({} launch)", e.local_rank,
             e.source);
  // NCCL's bootstrap listens on master_port + 1 (init_process_group), so that must be a port too.
  KILN_CHECK(e.master_port >= 1 && e.master_port <= 65534, "read_launch_env: MASTER_PORT must be in [1, 65534], got {}",
             e.master_port);
  return e;
}

std::chrono::milliseconds timeout_from_env() {
  const char* v = env("KILN_DIST_TIMEOUT");
  if (v == nullptr) return std::chrono::milliseconds(300'000);
  const std::string_view s(v);
  double seconds = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), seconds);
  KILN_CHECK(ec == std::errc() && end == s.data() + s.size() && std::isfinite(seconds) && seconds > 0 &&
                 seconds <= 1e9,
             "KILN_DIST_TIMEOUT: expected a positive number of seconds (at most 1e9), got \"{}\"", s);
  return std::chrono::milliseconds(std::max<int64_t>(1, std::llround(seconds * 1000.0)));
}

}  // namespace kiln::distributed
