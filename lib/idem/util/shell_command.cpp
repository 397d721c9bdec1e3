#include "idem/util/shell_command.hpp"

#include "idem/util/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

extern char** environ; // NOLINT(readability-redundant-declaration): POSIX's, for posix_spawn

namespace idem {

ShellCommandResult run_shell_command(const ShellCommand& shell) {
    UniqueFd read_end, write_end;
    if (shell.capture_output) {
        int pipe_ends[2];
        if (::pipe2(pipe_ends, O_CLOEXEC) != 0)
            throw std::system_error(errno, std::generic_category(), "pipe");
        read_end.reset(pipe_ends[0]);
        write_end.reset(pipe_ends[1]);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (shell.capture_output)
        posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
    else
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    if (shell.discard_errors)
        posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    std::vector<std::string> set; // "NAME=VALUE" of shell.environment
    for (const auto& [name, value] : shell.environment)
        set.push_back(fmt::format("{}={}", name, value));
    std::vector<std::string> environment;
    for (char** variable = environ; *variable; ++variable) {
        std::string_view entry(*variable);
        bool replaced = std::any_of(set.begin(), set.end(), [&](const std::string& assignment) {
            return entry.starts_with(assignment.substr(0, assignment.find('=') + 1));
        });
        if (!replaced) environment.emplace_back(entry);
    }
    environment.insert(environment.end(), set.begin(), set.end());
    std::vector<char*> envp;
    for (auto& entry : environment)
        envp.push_back(entry.data());
    envp.push_back(nullptr);
    std::string program = "/bin/sh", flag = "-c", command = shell.command;
    char* argv[] = {program.data(), flag.data(), command.data(), nullptr};
    pid_t child = 0;
    int spawned = posix_spawn(&child, "/bin/sh", &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    write_end.reset();
    if (spawned != 0) throw std::system_error(spawned, std::generic_category(), "/bin/sh");

    ShellCommandResult result;
    auto deadline = steady_now() + shell.timeout;
    auto left = [&] {
        return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_now());
    };
    while (read_end.valid()) {
        if (left().count() <= 0) {
            result.timed_out = true;
            break;
        }
        pollfd ready{read_end.get(), POLLIN, 0};
        if (::poll(&ready, 1, static_cast<int>(left().count())) <= 0) continue;
        char chunk[4096];
        auto got = ::read(read_end.get(), chunk, sizeof chunk);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        if (result.output.size() < shell.max_output)
            result.output.append(chunk, static_cast<std::size_t>(got));
    }
    // Without a pipe to read to its end, the shell's own exit is awaited.
    int status = 0;
    while (!result.timed_out) {
        auto waited = ::waitpid(child, &status, WNOHANG);
        if (waited == child) break;
        if (waited < 0 && errno != EINTR) break;
        if (left().count() <= 0) {
            result.timed_out = true;
            break;
        }
        ::usleep(20'000);
    }
    if (result.timed_out) {
        ::kill(child, SIGKILL);
        while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
        }
    }
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

} // namespace idem
