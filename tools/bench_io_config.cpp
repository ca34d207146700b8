#include "tools/bench_io_config.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace tierzero::tools {
namespace {

Result<nlohmann::ordered_json> read_config(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return not_found("--update-config " + path + ": cannot open the ds_config; give an existing ds_config JSON file");
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    return invalid_argument("--update-config " + path +
                            ": not a JSON object; give a ds_config file (its aio block is replaced)");
  return config;
}

}  // namespace

Status check_config_to_update(const std::string& path) { return read_config(path).status(); }

Status write_aio_block(const std::string& path, const nlohmann::json& aio) {
  TZ_ASSIGN_OR_RETURN(nlohmann::ordered_json config, read_config(path));
  config["aio"] = nlohmann::ordered_json::parse(aio.dump());
  const std::string temporary = path + ".tierzero-tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << config.dump(2) << "\n";
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return io_error("--update-config " + path + ": cannot write " + temporary +
                      "; check that the directory is writable and has space");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    return io_error("--update-config " + path + ": cannot replace the file (" + error.message() +
                    "); check that the directory is writable");
  }
  return {};
}

}  // namespace tierzero::tools
