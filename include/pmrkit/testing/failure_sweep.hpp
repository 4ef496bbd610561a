// pmrkit/testing/failure_sweep.hpp — run an operation with its 1st, 2nd, 3rd ... allocation
// failing, and check that each failure is handled: the error surfaces as std::bad_alloc (or
// the operation's documented error), nothing leaks or is freed wrongly, and the object still
// works afterwards.
//
//   auto result = pmrkit::testing::failure_sweep(
//       [](std::pmr::memory_resource& memory) { return my_encoder(&memory); },  // the subject
//       [](my_encoder& e) { e.encode(message); },                              // the operation
//       [](my_encoder& e) { check(e.encode(message) == expected); });         // still usable
//
// Step k builds a fresh subject with `make` on a memory resource whose k-th allocation after
// construction fails (construction itself is not faulted: put it in `operation` to sweep it),
// runs `operation` once, then with failures disarmed calls `usable`, destroys the subject and
// checks that every byte came back. The sweep ends at the first step whose operation
// completes without reaching the injected failure. The memory passed to `make` is a
// fault_injecting_resource over a checked_resource, so a double free, a wrong-size free or an
// overrun on an error path is caught too: one found by a free is recorded (on_error=record),
// so that a free in a destructor, or one whose error a catch (...) swallows, fails its step
// instead of ending the program or going unseen. Anything wrong throws
// failure_sweep_error, whose message names the step and what went wrong; an uncaught
// exception fails a Catch2 test with that message. Single-threaded use per call; the helpers
// hold no global state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory_resource>
#include <new>
#include <stdexcept>
#include <string>

#include "pmrkit/checked_resource.hpp"
#include "pmrkit/testing/fault_injecting_resource.hpp"

namespace pmrkit::testing {

class failure_sweep_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

struct failure_sweep_options {
  // Give up (failure_sweep_error) if the operation still has not completed by then.
  std::size_t max_steps = 100000;
  // Keep failing every allocation after the first injected one (memory that stays exhausted),
  // rather than only that one (a transient failure, which an operation may absorb).
  bool sticky = false;
  // Accepts an exception other than std::bad_alloc as the operation's documented report of
  // an allocation failure (see errors_of_type). Empty: only std::bad_alloc is accepted.
  std::function<bool(std::exception_ptr)> also_expected;
};

struct failure_sweep_result {
  std::size_t steps = 0;        // steps run, the final (completing) one included
  std::size_t surfaced = 0;     // injected failures that surfaced as an accepted error
  std::size_t absorbed = 0;     // injected failures the operation recovered from
  std::uint64_t allocations = 0;  // allocations the operation made when nothing failed
};

// also_expected that accepts exceptions of the given types (and their subclasses).
template <class... Errors>
std::function<bool(std::exception_ptr)> errors_of_type() {
  return [](std::exception_ptr error) {
    bool matched = false;
    auto try_one = [&]<class E>() {
      if (matched) return;
      try {
        std::rethrow_exception(error);
      } catch (const E&) {
        matched = true;
      } catch (...) {
      }
    };
    (try_one.template operator()<Errors>(), ...);
    return matched;
  };
}

namespace detail {

inline std::string describe_exception(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return std::string("an exception saying \"") + e.what() + "\"";
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

inline checked_options sweep_checking() {
  checked_options o;
  o.on_error = checked_options::error_action::record;
  o.on_leak = checked_options::leak_action::ignore;  // the sweep reports leaks itself
  o.quarantine_blocks = 64;
  return o;
}

}  // namespace detail

template <class Make, class Operation, class Usable>
failure_sweep_result failure_sweep(Make&& make, Operation&& operation, Usable&& usable,
                                   const failure_sweep_options& options = {}) {
  failure_sweep_result result;
  for (std::size_t step = 1; step <= options.max_steps; ++step) {
    const std::string at = "failure sweep, step " + std::to_string(step) +
                           " (allocation " + std::to_string(step) + " of the operation fails" +
                           (options.sticky ? ", and every one after it" : "") + "): ";
    checked_resource checked(detail::sweep_checking(), std::pmr::new_delete_resource());
    fault_injecting_resource faulty(&checked);
    bool completed = false;
    bool fired = false;
    std::uint64_t allocations = 0;
    {
      auto subject = make(static_cast<std::pmr::memory_resource&>(faulty));
      const std::uint64_t before = faulty.attempts();
      faulty.fail_at(step, options.sticky);
      try {
        operation(subject);
        completed = true;
      } catch (const std::bad_alloc&) {
      } catch (...) {
        const std::exception_ptr error = std::current_exception();
        if (!(options.also_expected && options.also_expected(error)))
          throw failure_sweep_error(at + "the operation threw " +
                                    detail::describe_exception(error) +
                                    " instead of std::bad_alloc");
      }
      fired = faulty.fired();
      allocations = faulty.attempts() - before;
      faulty.disarm();
      if (!completed && !fired)
        throw failure_sweep_error(at + "the operation failed although no allocation had "
                                       "failed yet");
      if (fired) {
        ++(completed ? result.absorbed : result.surfaced);
        try {
          usable(subject);
        } catch (...) {
          throw failure_sweep_error(at + "after the failure the object is not usable: " +
                                    detail::describe_exception(std::current_exception()));
        }
      }
    }
    // Misuse first: a wrong free may also leave its block live.
    if (checked.stats().violations != 0)
      throw failure_sweep_error(at + "memory was misused: " + checked.violation_report());
    if (checked.stats().blocks_in_use != 0)
      throw failure_sweep_error(at + "memory leaked once the object was destroyed: " +
                                checked.leak_report());
    try {
      checked.verify();
    } catch (const allocation_error& e) {
      throw failure_sweep_error(at + e.what());
    }
    result.steps = step;
    if (completed && !fired) {
      result.allocations = allocations;
      return result;
    }
  }
  throw failure_sweep_error("failure sweep: the operation still failed after " +
                            std::to_string(options.max_steps) + " steps");
}

}  // namespace pmrkit::testing
