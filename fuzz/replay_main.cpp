// Runs a fuzz target as an ordinary test: every line (or whole file, with
// --whole) of the given sample files, then a fixed number of deterministic
// mutations of them (bytes flipped, inserted, deleted, lines cut short), so
// CI exercises the parsers of untrusted input without a fuzzing engine.

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

void run(const std::string& input) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

std::string mutate(std::string input, std::mt19937& random) {
    if (input.empty()) return input;
    auto position = [&] {
        return std::uniform_int_distribution<std::size_t>(0, input.size() - 1)(random);
    };
    static const char k_interesting[] = "{}[]\",:\\\x00\xff\x80 0-e.\"u";
    switch (random() % 5) {
    case 0:
        input[position()] = static_cast<char>(random());
        break;
    case 1:
        input.insert(position(), 1, k_interesting[random() % (sizeof k_interesting - 1)]);
        break;
    case 2:
        input.erase(position(), 1 + random() % 8);
        break;
    case 3:
        input.resize(position());
        break;
    default: {
        auto at = position();
        input.insert(at, input.substr(at, random() % 32));
    }
    }
    return input;
}

} // namespace

int main(int argc, char** argv) {
    bool whole = false;
    int mutations = 2000;
    std::vector<std::string> inputs;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "--whole") {
            whole = true;
            continue;
        }
        if (arg.rfind("--mutations=", 0) == 0) {
            mutations = std::stoi(arg.substr(12));
            continue;
        }
        std::ifstream file(arg, std::ios::binary);
        if (!file) {
            std::fprintf(stderr, "cannot read %s\n", argv[i]);
            return 2;
        }
        std::stringstream contents;
        contents << file.rdbuf();
        if (whole) {
            inputs.push_back(contents.str());
            continue;
        }
        std::string line;
        while (std::getline(contents, line))
            inputs.push_back(line);
    }
    std::mt19937 random(20261130);
    std::size_t runs = 0;
    for (const auto& input : inputs) {
        run(input);
        ++runs;
    }
    for (int i = 0; i < mutations && !inputs.empty(); ++i) {
        auto input = inputs[random() % inputs.size()];
        for (int k = 0; k < 1 + static_cast<int>(random() % 4); ++k)
            input = mutate(std::move(input), random);
        run(input);
        ++runs;
    }
    std::printf("%zu inputs ran without a crash\n", runs);
    return 0;
}
