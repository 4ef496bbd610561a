// pmrkit/function_ref.hpp — a non-owning reference to a callable, for callbacks on hot paths.
//
// Receivers call a handler once per message and codecs call back once per element; std::function
// would allocate for a capturing lambda and cost a copy, so they take this instead: two pointers,
// built from any callable that outlives the call it is passed to (a lambda written at the call
// site does; a function always does, and a function pointer is kept by value, so `&f` or a
// pointer variable that goes out of scope are fine too; a pointer to member must be a named one,
// `&S::f` itself is refused). A function_ref<void(...)> accepts a callable that
// returns a value and drops it, as std::function does. It owns nothing and is copied by value;
// it is as thread-safe as the referenced callable.
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
             std::is_invocable_r_v<Result, Callable&, Args...> &&
             // A pointer to member is referred to like any object, and `&S::f` is a temporary
             // that dies with the full-expression: refused rather than left dangling (pass a
             // lambda that calls it, or a named pointer that outlives the call).
             (!std::is_member_pointer_v<std::remove_cvref_t<Callable>> ||
              std::is_lvalue_reference_v<Callable>))
  function_ref(Callable&& callable) noexcept  // NOLINT: implicit, like a function pointer
      : target_(bind(callable)),
        call_([](target t, Args... args) -> Result {
          auto&& callee = resolve<std::remove_reference_t<Callable>>(t);
          if constexpr (std::is_void_v<Result>) {
            std::invoke(callee, std::forward<Args>(args)...);
          } else {
            return std::invoke(callee, std::forward<Args>(args)...);
          }
        }) {}

  Result operator()(Args... args) const { return call_(target_, std::forward<Args>(args)...); }

 private:
  // A function is not an object: its address does not convert to void*, so it is kept as a
  // function pointer of another type, which converts back exactly. A function pointer is kept
  // the same way, by its value: the pointer itself is often a temporary (`&f`) that dies at the
  // end of the full-expression that built the function_ref.
  union target {
    void* object;
    void (*function)();
  };

  template <class Callee>
  static constexpr bool is_function_pointer =
      std::is_pointer_v<std::remove_cv_t<Callee>> &&
      std::is_function_v<std::remove_pointer_t<std::remove_cv_t<Callee>>>;

  template <class Callee>
  static target bind(Callee& callee) noexcept {
    target t;
    if constexpr (std::is_function_v<Callee>) {
      t.function = reinterpret_cast<void (*)()>(&callee);
    } else if constexpr (is_function_pointer<Callee>) {
      t.function = reinterpret_cast<void (*)()>(callee);
    } else {
      t.object = const_cast<void*>(static_cast<const void*>(std::addressof(callee)));
    }
    return t;
  }

  template <class Callee>
  static decltype(auto) resolve(target t) noexcept {
    if constexpr (std::is_function_v<Callee>) {
      return *reinterpret_cast<Callee*>(t.function);
    } else if constexpr (is_function_pointer<Callee>) {
      return reinterpret_cast<std::remove_cv_t<Callee>>(t.function);
    } else {
      return *static_cast<Callee*>(t.object);
    }
  }

  target target_;
  Result (*call_)(target, Args...);
};

}  // namespace pmrkit
