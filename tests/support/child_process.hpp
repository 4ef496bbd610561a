// Runs a function in a forked child and reports how it ended and what it wrote to stderr:
// how tests check that a violation aborts the process with a message naming it.
// Call only while the test process has one thread (fork copies just the caller).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <string>

namespace pmrkit::test {

struct child_outcome {
  bool aborted = false;  // ended by SIGABRT
  int exit_code = -1;    // when it exited normally
  std::string stderr_text;
};

template <class Function>
child_outcome run_in_child(Function function) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return {};
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    dup2(pipe_fds[1], STDERR_FILENO);
    std::signal(SIGABRT, SIG_DFL);  // not the test framework's handler, which would report it
    try {
      function();
    } catch (...) {
      _exit(3);
    }
    std::fflush(stderr);
    _exit(0);
  }
  close(pipe_fds[1]);
  child_outcome outcome;
  char chunk[4096];
  ssize_t got;
  while ((got = read(pipe_fds[0], chunk, sizeof chunk)) > 0)
    outcome.stderr_text.append(chunk, static_cast<std::size_t>(got));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  outcome.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  if (WIFEXITED(status)) outcome.exit_code = WEXITSTATUS(status);
  return outcome;
}

}  // namespace pmrkit::test
