// Reading the allocation traces of bench/traces/ (format in scripts/make_alloc_traces.py).
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::bench {

/// One trace event: allocate `size` bytes as block `id`, or free block `id`.
struct TraceEvent {
  bool alloc;
  int64_t id;
  int64_t size;
};

/// The events of a trace file, in order.
inline std::vector<TraceEvent> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open trace " + path);
  std::vector<TraceEvent> events;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    char kind = 0;
    TraceEvent e{false, 0, 0};
    ss >> kind >> e.id;
    e.alloc = kind == 'a';
    if (e.alloc) ss >> e.size;
    if (!ss || (kind != 'a' && kind != 'f')) throw std::runtime_error("bad trace line: " + line);
    events.push_back(e);
  }
  return events;
}

}  // namespace kiln::bench
