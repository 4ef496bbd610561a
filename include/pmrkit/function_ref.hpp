// pmrkit/function_ref.hpp — a non-owning reference to a callable, for callbacks on hot paths.
//
// Receivers call a handler once per message and codecs call back once per element; std::function
// would allocate for a capturing lambda and cost a copy, so they take this instead: two pointers,
// built from any callable that outlives the call it is passed to (a lambda written at the call
// site does). A function_ref<void(...)> accepts a callable that returns a value and drops it, as
// std::function does. It owns nothing and is copied by value; it is as thread-safe as the
// referenced callable.
#pragma once

#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace pmrkit {

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
          auto& target = *static_cast<std::remove_reference_t<Callable>*>(object);
          if constexpr (std::is_void_v<Result>) {
            std::invoke(target, std::forward<Args>(args)...);
          } else {
            return std::invoke(target, std::forward<Args>(args)...);
          }
        }) {}

  Result operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  Result (*call_)(void*, Args...);
};

}  // namespace pmrkit
