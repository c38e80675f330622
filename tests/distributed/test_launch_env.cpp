// read_launch_env() and timeout_from_env() against the variables torchrun, mpirun and srun
// set. Each test clears every launcher variable first and puts the originals back after.
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "distributed/collective_checks.h"
#include "testing.h"

using namespace kiln;
namespace dist = kiln::distributed;

namespace {

const std::vector<const char*> kVariables = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_STEP_NODELIST",
    "SLURM_JOB_NODELIST", "KILN_DIST_TIMEOUT", "KILN_DIST_DEBUG"};

// Clears the launcher variables for the scope and restores them after.
class CleanEnv {
 public:
  CleanEnv() {
    for (const char* name : kVariables) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v != nullptr ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(name);
    }
  }
  ~CleanEnv() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name, value->c_str(), 1);
      else
        ::unsetenv(name);
    }
  }
  CleanEnv(const CleanEnv&) = delete;
  CleanEnv& operator=(const CleanEnv&) = delete;
  void set(const char* name, const char* value) { ::setenv(name, value, 1); }

 private:
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

// Every field of `got` equals `want`'s.
void check_env(const dist::LaunchEnv& got, const dist::LaunchEnv& want) {
  CHECK(got.source == want.source);
  CHECK(got.rank == want.rank);
  CHECK(got.world_size == want.world_size);
  CHECK(got.local_rank == want.local_rank);
  CHECK(got.master_addr == want.master_addr);
  CHECK(got.master_port == want.master_port);
}

}  // namespace

TEST_CASE("read_launch_env: no launcher means one process") {
  CleanEnv env;
  check_env(dist::read_launch_env(), {0, 1, 0, "127.0.0.1", 29500, "none"});
}

TEST_CASE("read_launch_env: torchrun") {
  CleanEnv env;
  env.set("RANK", "5");
  env.set("WORLD_SIZE", "8");
  env.set("LOCAL_RANK", "1");
  env.set("MASTER_ADDR", "node07");
  env.set("MASTER_PORT", "29511");
  check_env(dist::read_launch_env(), {5, 8, 1, "node07", 29511, "torchrun"});
}

TEST_CASE("read_launch_env: torchrun's variables win over Open MPI's and SLURM's") {
  CleanEnv env;
  env.set("RANK", "1");
  env.set("WORLD_SIZE", "2");
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "9");
  const dist::LaunchEnv e = dist::read_launch_env();
  CHECK(e.source == "torchrun");
  CHECK(e.rank == 1);
  CHECK(e.local_rank == 1);  // no LOCAL_RANK: one node assumed
}

TEST_CASE("read_launch_env: mpirun (Open MPI)") {
  CleanEnv env;
  env.set("OMPI_COMM_WORLD_RANK", "3");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  env.set("OMPI_COMM_WORLD_LOCAL_RANK", "1");
  env.set("SLURM_PROCID", "0");
  env.set("SLURM_NTASKS", "9");
  check_env(dist::read_launch_env(), {3, 4, 1, "127.0.0.1", 29500, "mpirun"});
  env.set("MASTER_ADDR", "10.0.0.2");
  env.set("MASTER_PORT", "1234");
  check_env(dist::read_launch_env(), {3, 4, 1, "10.0.0.2", 1234, "mpirun"});
}

TEST_CASE("read_launch_env: srun (SLURM), master from the node list") {
  CleanEnv env;
  env.set("SLURM_PROCID", "6");
  env.set("SLURM_NTASKS", "16");
  env.set("SLURM_LOCALID", "2");
  env.set("SLURM_STEP_NODELIST", "gpu[003-005,007],cpu01");
  check_env(dist::read_launch_env(), {6, 16, 2, "gpu003", 29500, "srun"});
  env.set("SLURM_STEP_NODELIST", "alpha,beta");
  CHECK(dist::read_launch_env().master_addr == "alpha");
  ::unsetenv("SLURM_STEP_NODELIST");
  env.set("SLURM_JOB_NODELIST", "n[12-13]");
  CHECK(dist::read_launch_env().master_addr == "n12");
  env.set("MASTER_ADDR", "head");
  CHECK(dist::read_launch_env().master_addr == "head");
}

TEST_CASE("read_launch_env: malformed values name the variable") {
  CleanEnv env;
  env.set("RANK", "one");
  env.set("WORLD_SIZE", "2");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: RANK must be an integer, got \"one\"", Error);
  env.set("RANK", "1x");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: RANK must be an integer, got \"1x\"", Error);
  env.set("RANK", "2");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: rank 2 is outside [0, 2) (torchrun launch)", Error);
  env.set("RANK", "0");
  env.set("WORLD_SIZE", "0");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: the world size must be at least 1, got 0 (torchrun launch)",
                       Error);
  env.set("WORLD_SIZE", "2");
  env.set("LOCAL_RANK", "-1");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: the local rank must be >= 0, got -1 (torchrun launch)",
                       Error);
  ::unsetenv("LOCAL_RANK");
  env.set("MASTER_PORT", "65535");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: MASTER_PORT must be in [1, 65534], got 65535", Error);
  env.set("MASTER_PORT", "http");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: MASTER_PORT must be an integer, got \"http\"", Error);
  ::unsetenv("MASTER_PORT");
  ::unsetenv("WORLD_SIZE");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: RANK is set but WORLD_SIZE is not (torchrun launch)", Error);
  ::unsetenv("RANK");
  env.set("OMPI_COMM_WORLD_SIZE", "4");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(),
                       "read_launch_env: OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not (mpirun launch)", Error);
  ::unsetenv("OMPI_COMM_WORLD_SIZE");
  env.set("SLURM_PROCID", "3");
  env.set("SLURM_NTASKS", "2");
  CHECK_THROWS_WITH_AS(dist::read_launch_env(), "read_launch_env: rank 3 is outside [0, 2) (srun launch)", Error);
}

TEST_CASE("timeout_from_env: KILN_DIST_TIMEOUT in seconds, 300 s by default") {
  CleanEnv env;
  CHECK(dist::timeout_from_env() == std::chrono::milliseconds(300'000));
  env.set("KILN_DIST_TIMEOUT", "30");
  CHECK(dist::timeout_from_env() == std::chrono::milliseconds(30'000));
  env.set("KILN_DIST_TIMEOUT", "0.25");
  CHECK(dist::timeout_from_env() == std::chrono::milliseconds(250));
  for (const char* bad : {"0", "-3", "ten", "5s", "nan", "inf", "1e10"}) {
    env.set("KILN_DIST_TIMEOUT", bad);
    CHECK_THROWS_WITH_AS(dist::timeout_from_env(),
                         fmt::format("KILN_DIST_TIMEOUT: expected a positive number of seconds (at most 1e9), got \"{}\"", bad)
                             .c_str(),
                         Error);
  }
  // run_local reads it when no timeout is given.
  env.set("KILN_DIST_TIMEOUT", "12");
  std::chrono::milliseconds seen{0};
  dist::run_local(1, DeviceType::CPU, [&](int) { seen = dist::default_group().timeout(); });
  CHECK(seen == std::chrono::milliseconds(12'000));
  env.set("KILN_DIST_TIMEOUT", "soon");
  CHECK_THROWS_WITH_AS(dist::run_local(1, DeviceType::CPU, [](int) {}), doctest::Contains("KILN_DIST_TIMEOUT: expected"),
                       Error);
}

TEST_CASE("KILN_DIST_DEBUG: 1 turns the NCCL backend's cross-rank call check on, 0 or unset off") {
  CleanEnv env;
  using kiln::distributed::detail::cross_rank_checks_from_env;
  CHECK_FALSE(cross_rank_checks_from_env());
  env.set("KILN_DIST_DEBUG", "0");
  CHECK_FALSE(cross_rank_checks_from_env());
  env.set("KILN_DIST_DEBUG", "1");
  CHECK(cross_rank_checks_from_env());
  env.set("KILN_DIST_DEBUG", "yes");
  CHECK_THROWS_WITH_AS(cross_rank_checks_from_env(), "KILN_DIST_DEBUG: expected 0 or 1, got \"yes\"", Error);
}
