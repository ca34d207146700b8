#include "fs/testing/durable_image.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "fs/file_system.h"

namespace tierzero::fs::testing {
namespace {

std::string base_name(const std::string& path) {
  const std::string p = strip_trailing_slashes(path);
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    ::closedir(d);
  }
  return names;
}

std::string content_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

DurableImage::DurableImage(std::string root) : root_(strip_trailing_slashes(root)) {
  struct stat st {};
  ::lstat(root_.c_str(), &st);
  root_id_ = fresh(true, st.st_ino);
  scan(root_, root_id_);
}

uint64_t DurableImage::fresh(bool is_dir, ino_t ino) {
  const uint64_t id = next_id_++;
  nodes_[id].is_dir = is_dir;
  ids_[ino] = id;
  return id;
}

void DurableImage::scan(const std::string& dir, uint64_t id) {
  for (const std::string& name : names_in(dir)) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    const uint64_t child = fresh(S_ISDIR(st.st_mode), st.st_ino);
    nodes_[id].entries[name] = child;
    if (S_ISDIR(st.st_mode)) {
      scan(path, child);
    } else {
      nodes_[child].data = content_of(path);
    }
  }
}

std::optional<uint64_t> DurableImage::id_of(const std::string& path) {
  const std::string p = strip_trailing_slashes(path);
  if (p != root_ && !p.starts_with(root_ + "/")) return std::nullopt;
  struct stat st {};
  if (::lstat(p.c_str(), &st) != 0) return std::nullopt;
  const auto it = ids_.find(st.st_ino);
  return it != ids_.end() ? it->second : fresh(S_ISDIR(st.st_mode), st.st_ino);
}

void DurableImage::pending_edit(Change& change, const std::string& path, std::optional<uint64_t> child) {
  const std::optional<uint64_t> parent = id_of(parent_dir(path));
  if (parent) change.push_back({*parent, base_name(path), child});
}

uint64_t DurableImage::created(const std::string& path, bool existed) {
  if (existed) return id_of(path).value_or(0);
  struct stat st {};
  const std::string p = strip_trailing_slashes(path);
  if ((p != root_ && !p.starts_with(root_ + "/")) || ::lstat(p.c_str(), &st) != 0) return 0;
  const uint64_t id = fresh(false, st.st_ino);
  Change change;
  pending_edit(change, path, id);
  if (!change.empty()) pending_.push_back(std::move(change));
  return id;
}

void DurableImage::made_dir(const std::string& path) {
  struct stat st {};
  const std::string p = strip_trailing_slashes(path);
  if ((p != root_ && !p.starts_with(root_ + "/")) || ::lstat(p.c_str(), &st) != 0) return;
  Change change;
  pending_edit(change, path, fresh(true, st.st_ino));
  if (!change.empty()) pending_.push_back(std::move(change));
}

void DurableImage::file_synced(uint64_t id, std::string content) {
  if (id != 0) nodes_[id].data = std::move(content);
}

void DurableImage::dir_synced(const std::string& dir) {
  const std::optional<uint64_t> id = id_of(dir);
  if (!id) return;
  std::map<std::string, uint64_t> entries;
  for (const std::string& name : names_in(dir)) {
    if (const std::optional<uint64_t> child = id_of(dir + "/" + name)) entries[name] = *child;
  }
  nodes_[*id].entries = std::move(entries);
  for (Change& change : pending_) std::erase_if(change, [&](const Edit& e) { return e.dir == *id; });
  std::erase_if(pending_, [](const Change& c) { return c.empty(); });
}

void DurableImage::renaming(const std::string& from, const std::string& to) {
  const std::optional<uint64_t> moved = id_of(from);
  if (!moved) return;
  struct stat st {};
  if (::lstat(to.c_str(), &st) == 0) ids_.erase(st.st_ino);  // replaced: its inode goes away
  Change change;
  pending_edit(change, from, std::nullopt);
  pending_edit(change, to, *moved);
  if (!change.empty()) pending_.push_back(std::move(change));
}

void DurableImage::removing(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    for (const std::string& name : names_in(path)) removing(path + "/" + name);
  }
  Change change;
  pending_edit(change, path, std::nullopt);
  if (!change.empty()) pending_.push_back(std::move(change));
  ids_.erase(st.st_ino);
}

Status DurableImage::write_node(const std::string& path, uint64_t id, const Change* extra, int depth) const {
  if (depth > 64) return internal_error(fmt::format("durable image: {} nests too deep (a cycle?)", path));
  const Node& node = nodes_.at(id);
  if (!node.is_dir) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(node.data.data(), static_cast<std::streamsize>(node.data.size()));
    return out ? Status() : io_error(fmt::format("durable image: cannot write {}", path));
  }
  if (path != root_ && ::mkdir(path.c_str(), 0755) != 0) {
    return errno_status(errno, fmt::format("durable image: cannot create {}", path));
  }
  std::map<std::string, uint64_t> entries = node.entries;
  if (extra != nullptr) {
    for (const Edit& e : *extra) {
      if (e.dir != id) continue;
      if (e.child)
        entries[e.name] = *e.child;
      else
        entries.erase(e.name);
    }
  }
  for (const auto& [name, child] : entries) TZ_RETURN_IF_ERROR(write_node(path + "/" + name, child, extra, depth + 1));
  return {};
}

Status DurableImage::restore(size_t i) const {
  if (i >= image_count()) return invalid_argument(fmt::format("image {} of {}", i, image_count()));
  for (const std::string& name : names_in(root_)) {
    const std::string path = root_ + "/" + name;
    const int rc = ::nftw(
        path.c_str(), [](const char* p, const struct stat*, int, FTW*) { return std::remove(p) == 0 ? 0 : -1; }, 16,
        FTW_DEPTH | FTW_PHYS);
    if (rc != 0) return errno_status(errno, fmt::format("durable image: cannot clear {}", path));
  }
  return write_node(root_, root_id_, i == 0 ? nullptr : &pending_[i - 1], 0);
}

}  // namespace tierzero::fs::testing
