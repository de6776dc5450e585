// Keeps the documentation true to the code:
//  1. every ```cpp block in README.md and docs/*.md is a snippet of a compiled example, marked
//     `<!-- snippet: examples/file.cpp#name -->`, and matches the lines between the two
//     `// [name]` markers in that file exactly;
//  2. docs/nodes.md has a row for every node name declared in include/dpipe
//     (`static constexpr std::string_view kName = "..."`), map nodes (include/dpipe/map) in the
//     "Map nodes" table and iter nodes before it, and no row for a node that does not exist; its
//     random and replicable columns say what the declaring class does (derives from
//     RandomDataPipe / ShufflingDataPipe; calls set_replicable(false)).
// Usage: check_docs <source-dir>. Prints each problem; exits 1 if there is any.

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

/// The lines between the two `// [name]` markers of `file`.
std::vector<std::string> region(const fs::path& file, const std::string& name, std::string& error) {
  const auto lines = read_lines(file);
  std::vector<std::string> body;
  int markers = 0;
  for (const auto& line : lines) {
    if (trim(line) == "// [" + name + "]") {
      if (++markers == 2) return body;
      continue;
    }
    if (markers == 1) body.push_back(line);
  }
  error = markers == 0 ? "no marker // [" + name + "]" : "only one marker // [" + name + "]";
  return {};
}

int check_snippets(const fs::path& root, std::vector<std::string>& problems) {
  std::vector<fs::path> documents{root / "README.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() == ".md") documents.push_back(entry.path());
  }
  const std::regex marker(R"(<!-- snippet: ([^#]+)#([A-Za-z0-9_]+) -->)");
  int checked = 0;
  for (const auto& document : documents) {
    const auto lines = read_lines(document);
    for (std::size_t i = 0; i < lines.size(); ++i) {
      if (lines[i] != "```cpp") continue;
      const auto where = document.filename().string() + ":" + std::to_string(i + 1);
      std::smatch match;
      if (i == 0 || !std::regex_match(lines[i - 1], match, marker)) {
        problems.push_back(where + ": a ```cpp block without a <!-- snippet: file#name --> line before it");
        continue;
      }
      std::vector<std::string> block;
      std::size_t end = i + 1;
      for (; end < lines.size() && lines[end] != "```"; ++end) block.push_back(lines[end]);
      std::string error;
      const auto expected = region(root / match[1].str(), match[2].str(), error);
      if (!error.empty()) {
        problems.push_back(where + ": " + match[1].str() + ": " + error);
      } else if (block != expected) {
        problems.push_back(where + ": the block differs from " + match[1].str() + "#" + match[2].str());
      }
      ++checked;
      i = end;
    }
  }
  return checked;
}

/// What the code says of a node: whether the loader seeds it (it derives from RandomDataPipe or
/// ShufflingDataPipe) and whether it is replicable (it does not call set_replicable(false)).
struct NodeTraits {
  bool random = false;
  bool replicable = true;
};

/// Nodes declared under `directory` (`static constexpr std::string_view kName = "..."`), with the
/// traits of the class that declares each.
std::map<std::string, NodeTraits> declared_nodes(const fs::path& directory) {
  std::map<std::string, NodeTraits> nodes;
  const std::regex declaration(R"re(static constexpr std::string_view k\w*Name = "([a-z_]+)")re");
  const std::regex class_head(R"re(\n(?:class|struct) \w+(?: final)?(?: : ([^{]*))?\{)re");
  for (const auto& entry : fs::recursive_directory_iterator(directory)) {
    if (entry.path().extension() != ".hpp") continue;
    std::ifstream in(entry.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::sregex_iterator it(text.begin(), text.end(), declaration), last; it != last; ++it) {
      const auto at = static_cast<std::size_t>(it->position());
      // The class around the declaration: the last class head before it, up to the next "\n};".
      std::string bases;
      std::size_t class_start = 0;
      for (std::sregex_iterator head(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), class_head), end;
           head != end; ++head) {
        bases = (*head)[1].str();
        class_start = static_cast<std::size_t>(head->position());
      }
      const auto class_end = text.find("\n};", at);
      const auto body =
          text.substr(class_start, class_end == std::string::npos ? std::string::npos : class_end - class_start);
      NodeTraits traits;
      traits.random =
          bases.find("RandomDataPipe") != std::string::npos || bases.find("ShufflingDataPipe") != std::string::npos;
      traits.replicable = body.find("set_replicable(false)") == std::string::npos;
      nodes[(*it)[1].str()] = traits;
    }
  }
  return nodes;
}

/// Compares the rows of one table of docs/nodes.md with the nodes of its kind: a row for each,
/// none for a node that does not exist, and the random and replicable columns as the code has them.
void compare_rows(const std::string& table, const std::map<std::string, NodeTraits>& nodes,
                  const std::map<std::string, std::vector<std::string>>& rows, std::vector<std::string>& problems) {
  for (const auto& [name, traits] : nodes) {
    const auto row = rows.find(name);
    if (row == rows.end()) {
      problems.push_back("docs/nodes.md: no " + table + " row for node `" + name + "`");
      continue;
    }
    // Columns: node, signature, semantics, random, replicable, checkpoint state.
    const auto& cells = row->second;
    if (cells.size() != 6) {
      problems.push_back("docs/nodes.md: the " + table + " row for `" + name + "` does not have 6 cells");
      continue;
    }
    if ((cells[3] == "yes") != traits.random) {
      problems.push_back("docs/nodes.md: the " + table + " row for `" + name + "` says random \"" + cells[3] +
                         "\"; the node " + (traits.random ? "is" : "is not") + " seeded by the loader");
    }
    const bool documented_replicable = cells[4].find("no") == std::string::npos;
    if (documented_replicable != traits.replicable) {
      problems.push_back("docs/nodes.md: the " + table + " row for `" + name + "` says replicable \"" + cells[4] +
                         "\"; the node " + (traits.replicable ? "is" : "is not") + " replicable");
    }
  }
  for (const auto& [name, cells] : rows) {
    if (!nodes.contains(name)) {
      problems.push_back("docs/nodes.md: " + table + " row for `" + name + "`, which no such node declares");
    }
  }
  if (nodes.empty()) problems.push_back("no " + table + " node names found under include/dpipe");
}

/// The trimmed cells of a table row "| a | b |".
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line.substr(1));
  while (std::getline(in, cell, '|')) cells.push_back(trim(cell));
  if (!cells.empty() && cells.back().empty()) cells.pop_back();
  return cells;
}

void check_node_table(const fs::path& root, std::vector<std::string>& problems) {
  // Map nodes live in include/dpipe/map and have their rows under "## Map nodes"; every other node
  // is an iter node, with its row in the tables before it.
  const auto map_nodes = declared_nodes(root / "include" / "dpipe" / "map");
  std::map<std::string, NodeTraits> iter_nodes;
  for (const auto& entry : fs::directory_iterator(root / "include" / "dpipe")) {
    if (!entry.is_directory() || entry.path().filename() == "map") continue;
    iter_nodes.merge(declared_nodes(entry.path()));
  }
  std::map<std::string, std::vector<std::string>> iter_rows;
  std::map<std::string, std::vector<std::string>> map_rows;
  bool in_map_section = false;
  const std::regex row(R"(^\| `([a-z_]+)` \|)");
  for (const auto& line : read_lines(root / "docs" / "nodes.md")) {
    if (line.starts_with("## ")) in_map_section = line.starts_with("## Map nodes");
    std::smatch match;
    if (std::regex_search(line, match, row)) (in_map_section ? map_rows : iter_rows)[match[1].str()] = cells_of(line);
  }
  compare_rows("iter", iter_nodes, iter_rows, problems);
  compare_rows("map", map_nodes, map_rows, problems);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: check_docs <source-dir>\n";
    return 2;
  }
  const fs::path root = argv[1];
  std::vector<std::string> problems;
  const int snippets = check_snippets(root, problems);
  check_node_table(root, problems);
  for (const auto& problem : problems) std::cout << problem << "\n";
  std::cout << "docs checked: " << snippets << " snippets, " << problems.size() << " problems\n";
  return problems.empty() ? 0 : 1;
}
