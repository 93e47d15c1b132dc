# weir_warnings(target STRICT|NORMAL): the project's warning set.
# STRICT adds -Wconversion (library, codecs, tools); NORMAL is for tests and
# benchmarks, whose test-framework macros do not survive -Wconversion.
function(weir_warnings target level)
    set(flags -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
        -Wmissing-prototypes -Wformat=2 -Wvla -Wimplicit-fallthrough
        -Wundef -Wcast-align -Wpointer-arith -Wwrite-strings -Wold-style-definition)
    if(level STREQUAL "STRICT")
        list(APPEND flags -Wconversion -Wsign-conversion)
    endif()
    if(WEIR_WERROR)
        list(APPEND flags -Werror)
    endif()
    target_compile_options(${target} PRIVATE ${flags})
endfunction()
