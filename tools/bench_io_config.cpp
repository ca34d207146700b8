#include "tools/bench_io_config.h"

#include <fstream>
#include <memory>
#include <span>

#include "fs/file_system.h"

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
  const std::string text = config.dump(2) + "\n";
  // Written beside it, made durable, then renamed over it: a crash leaves the old file or the new.
  fs::FileSystem& files = fs::default_file_system();
  const std::string temporary = path + ".tierzero-tmp";
  const std::string context = "--update-config " + path;
  Status status = [&]() -> Status {
    TZ_ASSIGN_OR_RETURN(std::unique_ptr<fs::WritableFile> out, files.create(temporary, fs::WriteOptions{}));
    TZ_RETURN_IF_ERROR(out->append(std::as_bytes(std::span(text.data(), text.size()))));
    TZ_RETURN_IF_ERROR(out->sync());
    TZ_RETURN_IF_ERROR(out->close());
    TZ_RETURN_IF_ERROR(files.rename(temporary, path));
    return files.sync_dir(fs::parent_dir(path));
  }();
  if (!status.ok()) {
    (void)files.remove_file(temporary);
    return status.with_context(context);
  }
  return {};
}

}  // namespace tierzero::tools
