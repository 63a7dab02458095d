// The conv shape lists shared by the kernel tests (tests/jit) and kiln_kernel_bench: one text
// file per list in tests/shapes/ (the compile definition KILN_SHAPES_DIR of both points there),
// one conv problem per line in its ConvProblem::str() form, optionally followed by
// `name=<label>` and `count=<occurrences in the network>`; '#' starts a comment.
//
//   ic64ih56iw56_oc64oh56ow56kh3kw3sh1sw1ph1pw1 name=3x3_64@56 count=3
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "graph/error.h"
#include "jit/conv/conv_problem.h"

namespace kiln::shapes {

struct ShapeLine {
  ConvProblem p;
  std::string name;  // the line's name=, else the problem string
  int count = 1;     // the line's count=
};

// The path of list `list`: a file name without ".txt" in KILN_SHAPES_DIR, or any path that
// contains a '/' (used as given).
inline std::string shape_list_path(const std::string& list) {
  if (list.find('/') != std::string::npos) return list;
  return std::string(KILN_SHAPES_DIR) + "/" + list + ".txt";
}

// Every line of a list; fails (naming the file and line) on a malformed line, and on a list
// without any problem (a test over it would check nothing).
inline std::vector<ShapeLine> read_shape_list(const std::string& list) {
  const std::string path = shape_list_path(list);
  std::ifstream f(path);
  if (!f) fail(Code::io_error, "cannot read shape list " + path);
  std::vector<ShapeLine> v;
  std::string line;
  for (int no = 1; std::getline(f, line); ++no) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::string w;
    if (!(words >> w)) continue;
    const std::string where = path + ":" + std::to_string(no) + ": ";
    ShapeLine s;
    try {
      s.p = ConvProblem::parse(w);
    } catch (const Error& e) {
      fail(e.code(), where + e.what());
    }
    s.name = w;
    while (words >> w) {
      if (w.rfind("name=", 0) == 0 && w.size() > 5) {
        s.name = w.substr(5);
      } else if (w.rfind("count=", 0) == 0) {
        try {
          size_t used = 0;
          s.count = std::stoi(w.substr(6), &used);
          if (used != w.size() - 6 || s.count < 1) throw std::invalid_argument(w);
        } catch (const std::exception&) {
          fail(Code::invalid_argument, where + "count= takes a number >= 1: " + w);
        }
      } else {
        fail(Code::invalid_argument, where + "expected name=<label> or count=<n>, found " + w);
      }
    }
    v.push_back(std::move(s));
  }
  if (v.empty()) fail(Code::invalid_argument, "shape list " + path + " has no problem");
  return v;
}

// The problems of a list, in file order.
inline std::vector<ConvProblem> read_shapes(const std::string& list) {
  std::vector<ConvProblem> v;
  for (ShapeLine& s : read_shape_list(list)) v.push_back(std::move(s.p));
  return v;
}

}  // namespace kiln::shapes
