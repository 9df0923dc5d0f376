// Prometheus's text format as Prometheus's own Python client reads it (Debian's
// python3-prometheus-client, which scripts/setup installs): the tests check what dlock writes
// with a real parser, not with their own.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "embedded/process.hpp"

namespace dlock::testing {

/// `text` as Debian's python3-prometheus-client parses it: "name {labels as JSON} value" per
/// sample, keyed by the first two. Fails the test if the parser rejects it.
inline std::map<std::string, double> parsed_by_prometheus(const std::string& text) {
  char path[] = "/tmp/dlock-metrics-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << text;
  embedded::child_process python(
      {"/usr/bin/python3", "-c",
       "import json, sys\n"
       "from prometheus_client.parser import text_string_to_metric_families as families\n"
       "for f in families(open(sys.argv[1]).read()):\n"
       "    for s in f.samples:\n"
       "        print(s.name, json.dumps(s.labels, sort_keys=True, ensure_ascii=False), s.value)\n"
       "print('END')\n",
       path},
      {.capture_stdout = true, .merge_stderr = true});
  std::map<std::string, double> samples;
  std::string errors;
  while (auto line = python.read_line()) {
    if (*line == "END") break;
    const auto value_at = line->rfind(' ');
    try {
      samples[line->substr(0, value_at)] = std::stod(line->substr(value_at + 1));
    } catch (const std::exception&) {
      errors += *line + "\n";
    }
  }
  errors += python.drain();
  EXPECT_EQ(python.wait(), 0) << errors;
  std::remove(path);
  return samples;
}

}  // namespace dlock::testing
