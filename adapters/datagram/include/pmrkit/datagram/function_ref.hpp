// pmrkit/datagram/function_ref.hpp — a non-owning reference to a callable (handlers).
//
// Receivers call their handler once per message; std::function would allocate for a capturing
// lambda and cost a copy, so they take this instead: two pointers, built from any callable
// that outlives the call it is passed to (a lambda written at the call site does). Not
// thread-safe beyond what the referenced callable is.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace pmrkit::datagram {

template <class Signature>
class function_ref;

template <class Result, class... Args>
class function_ref<Result(Args...)> {
 public:
  template <class Callable>
    requires(!std::is_same_v<std::remove_cvref_t<Callable>, function_ref> &&
             std::is_invocable_r_v<Result, Callable&, Args...>)
  function_ref(Callable&& callable) noexcept  // NOLINT: implicit, like a function pointer
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(callable)))),
        call_([](void* object, Args... args) -> Result {
          return std::invoke(*static_cast<std::remove_reference_t<Callable>*>(object),
                             std::forward<Args>(args)...);
        }) {}

  Result operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  Result (*call_)(void*, Args...);
};

}  // namespace pmrkit::datagram
