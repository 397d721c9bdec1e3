#include "idem/store/owned_files.hpp"

#include <filesystem>
#include <fmt/format.h>

namespace idem::store {

std::string checkpoint_name(std::string_view command, std::string_view scope,
                            const std::string& output_path) {
    std::error_code ignored;
    auto absolute = std::filesystem::absolute(output_path, ignored).lexically_normal().string();
    return fmt::format("{} {} {}", command, scope, absolute);
}

Resumption find_resumption(Store& store, std::string_view command, std::string_view scope,
                           const std::string& output_path, io::Diagnostics& diagnostics) {
    Resumption found{checkpoint_name(command, scope, output_path), std::nullopt};
    found.checkpoint = store.load_checkpoint(found.checkpoint_name);
    if (found.checkpoint)
        diagnostics.warning({output_path, 0, 0, 0},
                            fmt::format("resuming a run that stopped after {} records: the "
                                        "outputs are cut back to what it had committed",
                                        found.checkpoint->records_done));
    return found;
}

std::unique_ptr<io::Sink> open_owned(const std::string& path,
                                     const std::optional<Checkpoint>& checkpoint,
                                     const std::string& role) {
    if (path.empty()) return nullptr;
    if (!checkpoint) return io::Sink::create_file(path);
    auto committed = checkpoint->file_bytes.find(role);
    return io::Sink::resume_file(path,
                                 committed == checkpoint->file_bytes.end() ? 0 : committed->second);
}

} // namespace idem::store
