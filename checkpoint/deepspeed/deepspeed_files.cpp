#include "checkpoint/deepspeed/internal/deepspeed_files.h"
#include "checkpoint/deepspeed/internal/deepspeed_layout.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

namespace tierzero::checkpoint {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Compares two digit runs by value: leading zeros dropped, then length, then digits.
int compare_numbers(std::string_view a, std::string_view b) {
  a.remove_prefix(std::min(a.find_first_not_of('0'), a.size()));
  b.remove_prefix(std::min(b.find_first_not_of('0'), b.size()));
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  return a.compare(b);
}

}  // namespace

bool natural_less(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      size_t ie = i, je = j;
      while (ie < a.size() && is_digit(a[ie])) ++ie;
      while (je < b.size() && is_digit(b[je])) ++je;
      const int c = compare_numbers(a.substr(i, ie - i), b.substr(j, je - j));
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

Result<std::string> read_latest_tag(const std::string& dir, const std::string& file) {
  constexpr std::streamsize kMaxTag = 4096;
  const std::string path = dir + "/" + file;
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return not_found(path + " does not exist: pass the checkpoint tag explicitly or point at the folder above it");
  std::string text(kMaxTag + 1, '\0');
  in.read(text.data(), kMaxTag + 1);
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > static_cast<size_t>(kMaxTag)) return corrupt(path + " is over 4 KiB; it should hold one tag name");
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return corrupt(path + " is empty; it should hold the tag, e.g. global_step100");
  text = text.substr(first, text.find_last_not_of(" \t\r\n") - first + 1);
  if (text.find('/') != std::string::npos || text == "..") {
    return corrupt(path + " names '" + text + "', which is not a folder inside " + dir);
  }
  return text;
}

Result<std::vector<std::string>> find_files_with_suffix(const std::string& dir, std::string_view suffix) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) return not_found("cannot list " + dir + ": " + ec.message());
  std::vector<std::string> names;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return io_error("cannot list " + dir + ": " + ec.message());
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0 || !it->is_regular_file(ec)) {
      continue;
    }
    names.push_back(name);
  }
  if (names.empty()) return not_found("no *" + std::string(suffix) + " files in " + dir);
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return natural_less(a, b); });
  for (std::string& n : names) n = dir + "/" + n;
  return names;
}

std::string read_model_config(const std::string& dir, const std::string& tag_dir) {
  for (const std::string& path : {dir + "/config.json", tag_dir + "/config.json"}) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    std::ostringstream text;
    text << in.rdbuf();
    if (!text.str().empty()) return text.str();
  }
  return {};
}

Result<DeepSpeedFiles> open_deepspeed_files(const std::string& tag_dir) {
  TZ_ASSIGN_OR_RETURN(auto model_paths, find_files_with_suffix(tag_dir, "_model_states.pt"));
  TZ_ASSIGN_OR_RETURN(auto optim_paths, find_files_with_suffix(tag_dir, "_optim_states.pt"));
  DeepSpeedFiles files;
  for (const std::string& p : model_paths) {
    TZ_ASSIGN_OR_RETURN(TorchFile f, TorchFile::open(p));
    files.model.push_back(std::move(f));
  }
  for (const std::string& p : optim_paths) {
    TZ_ASSIGN_OR_RETURN(TorchFile f, TorchFile::open(p));
    files.optim.push_back(std::move(f));
  }
  return files;
}

}  // namespace tierzero::checkpoint
