// The arguments of a script that runs a caller's commands only while its lock is held
// (read_while_held.lua, write_while_held.lua): the lock's layout, the holder's token or owner
// field, then each command as its argument count followed by its arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "dlock/error.hpp"

namespace dlock::detail {

using command_list = std::vector<std::vector<std::string>>;

/// The most arguments one guarded command may have: the script passes them to redis.pcall with
/// unpack, whose stack Lua bounds (8,000 values), and an unpack that fails stops the script
/// after the commands before it ran, so the limit is checked before anything is sent.
inline constexpr std::size_t guarded_command_max_args = 4096;

/// Throws errc::invalid_argument, naming `what` ("read", "write"), for a command without a name
/// or with more than guarded_command_max_args arguments.
inline void check_guarded_commands(const command_list& commands, std::string_view what) {
  for (const auto& command : commands) {
    if (command.empty() || command.front().empty()) {
      throw error(errc::invalid_argument, "every " + std::string(what) + " must name a command");
    }
    if (command.size() > guarded_command_max_args) {
      throw error(errc::invalid_argument,
                  "a " + std::string(what) + " has " + std::to_string(command.size()) +
                      " arguments; at most " + std::to_string(guarded_command_max_args) +
                      " fit in one call under a lock");
    }
  }
}

/// The script's ARGV. Its views point into `commands` and into the counts kept here: build it
/// where it stays (it neither copies nor moves).
class guarded_call_args {
 public:
  guarded_call_args(std::string_view layout, std::string_view owner, const command_list& commands) {
    counts_.reserve(commands.size());
    args_ = {layout, owner};
    for (const auto& command : commands) {
      counts_.push_back(std::to_string(command.size()));
      args_.push_back(counts_.back());
      args_.insert(args_.end(), command.begin(), command.end());
    }
  }
  guarded_call_args(const guarded_call_args&) = delete;
  guarded_call_args& operator=(const guarded_call_args&) = delete;

  const std::vector<std::string_view>& views() const noexcept { return args_; }

 private:
  std::vector<std::string> counts_;
  std::vector<std::string_view> args_;
};

}  // namespace dlock::detail
