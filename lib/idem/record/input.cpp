#include "idem/record/input.hpp"

#include "idem/record/har.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

namespace idem::record {

InputFormat parse_input_format(std::string_view name) {
    if (name == "ndjson" || name == "jsonl") return InputFormat::ndjson;
    if (name == "har") return InputFormat::har;
    throw UsageError(fmt::format("unknown input format {}: use ndjson or har", quote(name)));
}

namespace {

struct OpenInput {
    std::string name;
    int fd = -1;
    bool owns_fd = false;
};

} // namespace

struct InputStream::Impl {
    InputOptions options;
    io::OversizeHandler* oversize_handler = nullptr;
    std::vector<OpenInput> inputs;
    std::size_t current = 0;
    std::unique_ptr<io::LineReader> reader;
    std::uint64_t finished_bytes = 0;
    // HAR: the envelopes of the current file, each with padding reserved.
    std::vector<std::string> har_envelopes;
    std::size_t har_next = 0;
    bool har_loaded = false;

    ~Impl() {
        for (auto& input : inputs)
            if (input.owns_fd && input.fd >= 0) ::close(input.fd);
    }

    void load_har(const OpenInput& input);
    std::optional<InputRecord> next_from_current();
    void advance();
};

InputStream::InputStream(const InputOptions& options, io::OversizeHandler* oversize_handler)
    : m_impl(std::make_unique<Impl>()) {
    m_impl->options = options;
    m_impl->oversize_handler = oversize_handler;
    auto paths = options.paths.empty() ? std::vector<std::string>{"-"} : options.paths;
    for (const auto& path : paths) {
        if (path == "-") {
            m_impl->inputs.push_back({"<stdin>", STDIN_FILENO, false});
            continue;
        }
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            throw InputError({path, 0, 0, 0}, fmt::format("cannot open: {}", std::strerror(errno)));
        m_impl->inputs.push_back({path, fd, true});
    }
}

InputStream::~InputStream() = default;

void InputStream::Impl::load_har(const OpenInput& input) {
    std::string document;
    char chunk[1 << 16];
    while (true) {
        auto got = ::read(input.fd, chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            throw InputError({input.name, 0, 0, 0}, fmt::format("cannot read: {}", std::strerror(errno)));
        if (got == 0) break;
        document.append(chunk, static_cast<std::size_t>(got));
        if (document.size() > k_max_har_file_bytes)
            throw InputError({input.name, 0, 0, 0},
                             fmt::format("HAR file is larger than {}", format_bytes(k_max_har_file_bytes)));
    }
    finished_bytes += document.size();
    har_envelopes = har_to_envelopes(document, input.name);
    for (auto& envelope : har_envelopes) envelope.reserve(envelope.size() + io::k_padding_bytes);
    har_next = 0;
    har_loaded = true;
}

void InputStream::Impl::advance() {
    if (reader) finished_bytes += reader->bytes_read();
    reader.reset();
    har_envelopes.clear();
    har_loaded = false;
    ++current;
}

std::optional<InputRecord> InputStream::Impl::next_from_current() {
    const auto& input = inputs[current];
    if (options.format == InputFormat::har) {
        if (!har_loaded) load_har(input);
        if (har_next == har_envelopes.size()) return std::nullopt;
        InputRecord record;
        record.bytes = har_envelopes[har_next];
        record.source = &input.name;
        record.line = ++har_next;
        return record;
    }
    if (!reader)
        reader = std::make_unique<io::LineReader>(input.fd, input.name, options.max_record_bytes,
                                                  oversize_handler);
    auto line = reader->next();
    if (!line) return std::nullopt;
    InputRecord record;
    record.bytes = line->bytes;
    record.source = &input.name;
    record.line = line->number;
    record.byte_offset = line->byte_offset;
    record.oversized_bytes = line->oversized_bytes;
    return record;
}

std::optional<InputRecord> InputStream::next() {
    auto& impl = *m_impl;
    while (impl.current < impl.inputs.size()) {
        auto record = impl.next_from_current();
        if (record) return record;
        impl.advance();
    }
    return std::nullopt;
}

std::uint64_t InputStream::bytes_read() const {
    return m_impl->finished_bytes + (m_impl->reader ? m_impl->reader->bytes_read() : 0);
}

} // namespace idem::record
