// `tierzero report RUN... [--bench FILE...] -o report.html`: training metrics files and bench
// JSON files drawn as one self-contained HTML page (report/report.h).
#include <cstdio>
#include <fstream>

#include "report/report.h"
#include "tools/commands.h"

namespace tierzero::tools {

void add_report_command(CLI::App& app) {
  struct Flags {
    std::vector<std::string> runs;
    std::vector<std::string> benches;
    std::string out = "report.html";
    std::string title = "tierzero report";
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "Draw training runs (train --metrics files) and bench --json files as one HTML page with SVG charts");
  cmd->add_option("runs", flags->runs, "Metrics JSONL files written by `tierzero train --metrics FILE`");
  cmd->add_option("--bench", flags->benches, "A `tierzero bench io|adam|tiers --json` file; repeat for several");
  cmd->add_option("-o,--output", flags->out, "The HTML file to write (default report.html)");
  cmd->add_option("--title", flags->title, "The page's title (default \"tierzero report\")");
  cmd->callback([flags] {
    if (flags->runs.empty() && flags->benches.empty()) {
      throw Error(
          invalid_argument("nothing to draw: pass metrics files (tierzero train --metrics FILE) and/or "
                           "--bench FILE.json"));
    }
    report::ReportInput input;
    input.title = flags->title;
    for (const std::string& path : flags->runs) input.runs.push_back(value_or_throw(report::read_metrics_file(path)));
    for (const std::string& path : flags->benches)
      input.benches.push_back(value_or_throw(report::read_bench_file(path)));
    const std::string html = report::render_report_html(input);
    std::ofstream out(flags->out, std::ios::binary);
    out << html;
    out.close();
    if (!out) throw Error(io_error("cannot write " + flags->out + ": check the directory exists and is writable"));
    std::printf("tierzero report: %zu run(s), %zu bench file(s) -> %s (%zu KiB)\n", input.runs.size(),
                input.benches.size(), flags->out.c_str(), html.size() / 1024);
  });
}

}  // namespace tierzero::tools
