// function_ref: calls the callable it was built from (not a copy of it), passes arguments and
// results through, and drops a result where the signature returns void.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "pmrkit/function_ref.hpp"

namespace {

int call_twice(pmrkit::function_ref<int(int)> f, int x) { return f(f(x)); }

int add_three(int x) { return x + 3; }
int times_two(int x) { return x * 2; }

}  // namespace

TEST_CASE("function_ref passes arguments to the lambda and returns its result", "[function_ref]") {
  int calls = 0;
  auto count = [&calls](int x) {
    ++calls;
    return x * 3;
  };
  CHECK(call_twice(count, 2) == 18);
  CHECK(calls == 2);
}

TEST_CASE("function_ref refers to the callable, not a copy: it sees the state change",
          "[function_ref]") {
  struct accumulator {
    int total = 0;
    int operator()(int x) { return total += x; }
  } acc;
  pmrkit::function_ref<int(int)> f(acc);
  CHECK(f(5) == 5);
  acc.total = 100;
  CHECK(f(1) == 101);
  CHECK(acc.total == 101);
}

TEST_CASE("function_ref forwards move-only arguments and converts results", "[function_ref]") {
  auto take = [](std::unique_ptr<int> p) { return *p + 1; };
  pmrkit::function_ref<long(std::unique_ptr<int>)> f(take);
  CHECK(f(std::make_unique<int>(41)) == 42L);

  auto name = [](const std::string& s) { return s + "!"; };
  pmrkit::function_ref<std::string(const std::string&)> g(name);
  CHECK(g("hi") == "hi!");
}

TEST_CASE("function_ref is built from a function, as from a function pointer", "[function_ref]") {
  CHECK(call_twice(add_three, 1) == 7);
  int (*pointer)(int) = add_three;
  CHECK(call_twice(pointer, 2) == 8);
  static_assert(std::is_nothrow_constructible_v<pmrkit::function_ref<int(int)>, int (&)(int)>);
}

TEST_CASE("function_ref keeps a function pointer's value, not the pointer's address",
          "[function_ref]") {
  // `&f` is a temporary that dies with the full-expression: a function_ref that kept its
  // address would call through a dead stack slot. Changing the variable shows which was kept.
  int (*pointer)(int) = add_three;
  const pmrkit::function_ref<int(int)> f = pointer;
  pointer = times_two;
  CHECK(f(1) == 4);
  const pmrkit::function_ref<int(int)> g = &times_two;
  CHECK(g(5) == 10);
}

namespace {
struct counter {
  int value;
  int get() const { return value; }
};
}  // namespace

TEST_CASE("function_ref takes a named pointer to member, never a temporary one",
          "[function_ref]") {
  // `&counter::get` dies with the full-expression that would build the function_ref.
  using ref = pmrkit::function_ref<int(const counter&)>;
  static_assert(!std::is_constructible_v<ref, int (counter::*)() const>);
  static_assert(!std::is_constructible_v<ref, int counter::*>);
  int (counter::*named)() const = &counter::get;
  const ref f = named;
  CHECK(f(counter{7}) == 7);
}

TEST_CASE("function_ref<void(...)> accepts a callable that returns a value", "[function_ref]") {
  int seen = 0;
  auto returns = [&seen](int x) {
    seen = x;
    return x * 2;  // dropped
  };
  pmrkit::function_ref<void(int)> f(returns);
  f(7);
  CHECK(seen == 7);
}

TEST_CASE("a function_ref is copied by value and still refers to the same callable",
          "[function_ref]") {
  int calls = 0;
  auto bump = [&calls] { ++calls; };
  pmrkit::function_ref<void()> first(bump);
  pmrkit::function_ref<void()> second = first;
  first();
  second();
  CHECK(calls == 2);
}

static_assert(!std::is_constructible_v<pmrkit::function_ref<void(int)>, int>,
              "only callables convert");
static_assert(!std::is_constructible_v<pmrkit::function_ref<int(int)>, void (*)(std::string)>,
              "the signature must fit");
