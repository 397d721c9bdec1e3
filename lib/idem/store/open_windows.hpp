#pragma once
// The open-window role: items a run leaves open for the next, each an
// opaque key and state under a name. merge -o FILE keeps its open windows
// here, committed with its checkpoint, so a resumed run merges exactly as
// the killed one would have; reconcile --store keeps the keys still within
// --grace, so that the next day's run matches them (T+1).

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::store {

// What changed since the last save: windows opened or grown, windows
// closed, and the run's own state beside them (a watermark, counters).
struct WindowChanges {
    std::vector<std::pair<std::string, std::string>> saved; // key, state
    std::vector<std::string> removed;
    std::string meta;
};

class WindowStore {
public:
    virtual ~WindowStore() = default;

    // Every window saved under `name` (a run's checkpoint name), and the meta.
    virtual std::vector<std::pair<std::string, std::string>> load_windows(std::string_view name,
                                                                          std::string& meta) = 0;
    // Saved within the transaction that commit() ends.
    virtual void save_windows(std::string_view name, const WindowChanges& changes) = 0;
    virtual void clear_windows(std::string_view name) = 0;
};

} // namespace idem::store
