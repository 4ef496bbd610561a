# Compiler settings shared by every pmrkit target. Kept PRIVATE so that consumers of the
# installed package never inherit our warning flags or sanitizers.
function(pmrkit_target_defaults target)
  # -Wshadow: a member named like a parameter once hid a freed-twice bug in the engine.
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  if(PMRKIT_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# Sanitizers apply to the whole build (libraries, tests, benchmarks) so that instrumented
# and uninstrumented code never mix.
if(PMRKIT_SANITIZE)
  add_compile_options(-fsanitize=${PMRKIT_SANITIZE} -fno-omit-frame-pointer
                      -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${PMRKIT_SANITIZE})
endif()
