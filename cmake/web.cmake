# The files of web/ built into weir_daemon (daemon/admin/static.h): every
# file under web/ becomes a row {path, content type, bytes} of
# gen/web_files.c. web/NAME.html is served at /NAME; any other file F at
# /STEM/F, STEM being F's name up to its first '.'; a file in a folder,
# web/D/F, at /D/F. Each row has an ETag, the first 20 hex digits of the
# file's SHA-256. Adding or editing a file re-runs CMake.
file(GLOB_RECURSE WEIR_WEB_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/web/*)
list(SORT WEIR_WEB_FILES)
set(WEIR_WEB_C "/* generated from web/ by cmake/web.cmake */
#include \"admin/static.h\"
")
set(WEIR_WEB_ROWS "")
set(WEIR_WEB_COUNT 0)
foreach(file ${WEIR_WEB_FILES})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/web ${file})
    get_filename_component(name ${rel} NAME)
    string(REGEX MATCH "[^.]*$" ext ${name})
    string(REGEX MATCH "^[^.]*" stem ${name})
    if(rel MATCHES "/")
        set(url "/${rel}")
    elseif(ext STREQUAL "html")
        set(url "/${stem}")
    else()
        set(url "/${stem}/${rel}")
    endif()
    set(type "application/octet-stream")
    if(ext STREQUAL "html")
        set(type "text/html; charset=utf-8")
    elseif(ext STREQUAL "js")
        set(type "text/javascript; charset=utf-8")
    elseif(ext STREQUAL "css")
        set(type "text/css; charset=utf-8")
    elseif(ext STREQUAL "svg")
        set(type "image/svg+xml")
    elseif(ext STREQUAL "png")
        set(type "image/png")
    elseif(ext STREQUAL "json")
        set(type "application/json")
    endif()
    weir_embed(${file} bytes len)
    # a strong validator for If-None-Match: the content's digest
    file(SHA256 ${file} digest)
    string(SUBSTRING ${digest} 0 20 etag)
    string(APPEND WEIR_WEB_C "static const unsigned char web_${WEIR_WEB_COUNT}[] = {\n    ${bytes}0x00};\n")
    string(APPEND WEIR_WEB_ROWS "    {\"${url}\", \"${type}\", \"\\\"${etag}\\\"\", web_${WEIR_WEB_COUNT}, ${len}},\n")
    math(EXPR WEIR_WEB_COUNT "${WEIR_WEB_COUNT} + 1")
endforeach()
if(WEIR_WEB_COUNT EQUAL 0)
    set(WEIR_WEB_ROWS "    {0},\n")
endif()
string(APPEND WEIR_WEB_C "const admin_static_file weir__web_files[] = {\n${WEIR_WEB_ROWS}};\n"
       "const size_t weir__web_files_count = ${WEIR_WEB_COUNT};\n")
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/gen/web_files.c @ONLY CONTENT "${WEIR_WEB_C}")
target_sources(weir_daemon PRIVATE ${CMAKE_BINARY_DIR}/gen/web_files.c)
