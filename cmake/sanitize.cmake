# WEIR_SANITIZE=address,undefined | thread: applied to every target, with
# errors fatal so a finding fails its test.
if(WEIR_SANITIZE)
    set(_san -fsanitize=${WEIR_SANITIZE} -fno-omit-frame-pointer)
    if(WEIR_SANITIZE MATCHES "undefined")
        list(APPEND _san -fno-sanitize-recover=all)
    endif()
    add_compile_options(${_san})
    add_link_options(${_san})
endif()

# WEIR_FUZZ=ON (clang): instrument everything for coverage-guided fuzzing;
# the fuzz_* executables add libFuzzer's main (tests/CMakeLists.txt).
if(WEIR_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address,undefined)
endif()
