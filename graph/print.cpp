// format_tabular() and to_dot(). Both read only the graph's public view, so they print a
// broken graph too (a missing shape shows as "?", an absent input as None): verify()'s
// messages point at rows of this table.
#include "print.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace kiln::graph {

namespace {

std::string meta_str(const Value* v) { return v != nullptr && v->has_meta() ? v->meta().str() : "?"; }

std::string value_ref(const Value* v) { return v == nullptr ? "None" : v->name(); }

// A Python tuple of already formatted items: (), (a,), (a, b).
std::string tuple(const std::vector<std::string>& items) {
  if (items.size() == 1) return fmt::format("({},)", items[0]);
  return fmt::format("({})", fmt::join(items, ", "));
}

std::string node_args(const Node& n) {
  std::vector<std::string> refs;
  for (const Value* v : n.inputs()) refs.push_back(value_ref(v));
  if (n.op().has(kOpVariadic)) return tuple({fmt::format("[{}]", fmt::join(refs, ", "))});
  return tuple(refs);
}

std::string node_kwargs(const Node& n) {
  std::vector<std::string> items;
  const auto specs = n.op().attrs;
  const auto attrs = n.attrs();
  for (size_t i = 0; i < attrs.size(); ++i)
    items.push_back(fmt::format("'{}': {}", i < specs.size() ? specs[i].name : "?", attr_str(attrs[i])));
  return fmt::format("{{{}}}", fmt::join(items, ", "));
}

std::string outputs_meta(const Node& n) {
  std::vector<std::string> metas;
  for (const Value* v : n.outputs()) metas.push_back(meta_str(v));
  return fmt::format("{}", fmt::join(metas, ", "));
}

// DOT's quoted string: backslashes and quotes escaped; "\n" stays a DOT line break.
std::string dot_quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string dot_label(const std::vector<std::string>& lines) {
  std::string joined;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) joined += '\n';
    joined += lines[i];
  }
  std::string quoted = dot_quote(joined);
  std::string out;
  for (char c : quoted) out += c == '\n' ? std::string("\\n") : std::string(1, c);
  return out;
}

// Where an edge into a node starts: the input or constant itself, or the producing node.
std::string dot_source(const Value* v) {
  if (v->producer() != nullptr) return fmt::format("n{}", v->producer()->id());
  return fmt::format("v{}", v->id());
}

}  // namespace

std::string format_tabular(const Graph& graph) {
  using Row = std::array<std::string, 6>;
  std::vector<Row> rows = {{"opcode", "name", "target", "args", "kwargs", "shape"}};
  for (const Value* v : graph.inputs()) rows.push_back({"placeholder", v->name(), v->name(), "()", "{}", meta_str(v)});
  for (const Value* v : graph.constants()) rows.push_back({"get_attr", v->name(), v->name(), "()", "{}", meta_str(v)});
  for (const Node* n : graph.nodes())
    rows.push_back({"call_function", n->name(), n->op().name, node_args(*n), node_kwargs(*n), outputs_meta(*n)});
  std::vector<std::string> outs, out_metas;
  for (const Value* v : graph.outputs()) {
    outs.push_back(value_ref(v));
    out_metas.push_back(meta_str(v));
  }
  rows.push_back(
      {"output", "output", "output", tuple({tuple(outs)}), "{}", fmt::format("{}", fmt::join(out_metas, ", "))});

  std::array<size_t, 6> width{};
  for (const Row& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const Row& r) {
    std::string s;
    for (size_t c = 0; c < r.size(); ++c)
      s += c + 1 == r.size() ? r[c] : fmt::format("{:<{}}  ", r[c], width[c]);
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + "\n";
  };
  std::string out = line(rows[0]);
  Row dashes;
  for (size_t c = 0; c < dashes.size(); ++c) dashes[c] = std::string(width[c], '-');
  out += line(dashes);
  for (size_t i = 1; i < rows.size(); ++i) out += line(rows[i]);
  return out;
}

std::string to_dot(const Graph& graph) {
  std::string out = "digraph kiln_graph {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
  for (const Value* v : graph.inputs())
    out += fmt::format("  v{} [shape=ellipse, label={}];\n", v->id(), dot_label({v->name(), "input", meta_str(v)}));
  for (const Value* v : graph.constants())
    out += fmt::format("  v{} [shape=note, label={}];\n", v->id(), dot_label({v->name(), "constant", meta_str(v)}));
  for (const Node* n : graph.nodes()) {
    const std::string title = n->name() == n->op().name ? n->name() : fmt::format("{} = {}", n->name(), n->op().name);
    out += fmt::format("  n{} [shape=box, label={}];\n", n->id(), dot_label({title, outputs_meta(*n)}));
  }
  out += "  output [shape=doubleoctagon, label=\"output\"];\n";
  for (const Node* n : graph.nodes()) {
    const auto slots = n->op().inputs;
    const bool labelled = n->inputs().size() > 1;
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->inputs()[i];
      if (v == nullptr) continue;
      std::string edge = fmt::format("  {} -> n{}", dot_source(v), n->id());
      if (labelled)
        edge += fmt::format(" [label={}]",
                            dot_quote(n->op().has(kOpVariadic) || i >= slots.size() ? std::to_string(i) : slots[i]));
      out += edge + ";\n";
    }
  }
  for (size_t i = 0; i < graph.outputs().size(); ++i)
    if (const Value* v = graph.outputs()[i])
      out += fmt::format("  {} -> output [label=\"{}\"];\n", dot_source(v), i);
  return out + "}\n";
}

}  // namespace kiln::graph
