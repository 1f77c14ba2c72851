# embed.cmake — turns files into a C table of byte arrays, so that a program
# serves them from its own binary (the console of `verdict serve`). Run as
#   cmake -DOUT=file.c -DBASE=dir -DFILES="a.html|vendor/b.js" -P embed.cmake
# Each entry: the file's name relative to BASE, its Content-Type (from the
# extension), its bytes and their count. The file is rewritten only when
# its text changes, so a rebuild without changes compiles nothing.
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" FILES "${FILES}") # '|' between names: a ';' would split the command
set(text "/* Made by cmake/embed.cmake from the files under ${BASE_NAME}: do not edit. */\n")
string(APPEND text "#include \"server/console.h\"\n\n")
set(table "")
set(i 0)
foreach(f ${FILES})
  file(READ "${BASE}/${f}" hex HEX)
  file(SIZE "${BASE}/${f}" size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  # lines of 16 bytes keep the generated file readable in a diff
  string(REGEX REPLACE "((0x..,){16})" "\\1\n  " bytes "${bytes}")
  string(APPEND text "static const unsigned char asset_${i}[] = {\n  ${bytes}0x00};\n")
  if(f MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(f MATCHES "\\.js$")
    set(type "text/javascript; charset=utf-8")
  elseif(f MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(f MATCHES "\\.svg$")
    set(type "image/svg+xml")
  elseif(f MATCHES "\\.png$")
    set(type "image/png")
  else()
    set(type "text/plain; charset=utf-8")
  endif()
  string(APPEND table "    {\"${f}\", \"${type}\", asset_${i}, ${size}},\n")
  math(EXPR i "${i} + 1")
endforeach()
string(APPEND text "\nconst console_asset console_assets[] = {\n${table}    {0, 0, 0, 0}};\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${text}")
