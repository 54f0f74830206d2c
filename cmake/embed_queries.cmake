# A process's statements live in a .sql file beside its code; this file turns
# one into a C++ header of db::Statement constants (core/db/statements.h).
#
# include() it, then, for each file:
#
#   pgfleet_embed_queries(<target> <file.sql> <namespace> [PREFIX <prefix>])
#
# writes <build>/generated/<file.sql path in the tree>.h, rebuilt whenever the
# .sql file (or this script) changes, and lets <target>'s sources include it
# as "<path>/<file>.sql.h". The build runs this same file with -P to write it.
#
# The .sql file: one statement per block, each block headed by
#
#   -- name: <name>
#   -- optional comment lines right after the header: the statement's contract
#   select ...;
#
# <name> is what PostgreSQL sees (the prepared statement's name); it must
# start with <prefix> when one is given. The C++ constant is k followed by the
# rest of the name in CamelCase: schedulerd_read_pending with PREFIX
# schedulerd_ is kReadPending. The contract comment becomes the constant's
# comment. The statement's text is the block without its comment lines and
# without the trailing semicolon; comment lines before the first header
# describe the file. A block without a name, a name given twice, a block with
# no statement or with more than one fails the build, naming file and line.

if(NOT CMAKE_SCRIPT_MODE_FILE)
  set(PGFLEET_EMBED_QUERIES_SCRIPT ${CMAKE_CURRENT_LIST_FILE})

  function(pgfleet_embed_queries target sql_file namespace)
    cmake_parse_arguments(Q "" "PREFIX" "" ${ARGN})
    if(Q_UNPARSED_ARGUMENTS)
      message(FATAL_ERROR "pgfleet_embed_queries: unexpected arguments ${Q_UNPARSED_ARGUMENTS}")
    endif()
    get_filename_component(sql ${sql_file} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${sql})
    set(dir ${CMAKE_BINARY_DIR}/generated)
    set(out ${dir}/${rel}.h)
    add_custom_command(
      OUTPUT ${out}
      COMMAND ${CMAKE_COMMAND} -DSQL=${sql} -DSOURCE=${rel} -DOUT=${out}
              -DNAMESPACE=${namespace} -DPREFIX=${Q_PREFIX}
              -P ${PGFLEET_EMBED_QUERIES_SCRIPT}
      DEPENDS ${sql} ${PGFLEET_EMBED_QUERIES_SCRIPT}
      COMMENT "Embedding the statements of ${rel}"
      VERBATIM)
    target_sources(${target} PRIVATE ${out})
    target_include_directories(${target} PRIVATE ${dir})
  endfunction()
  return()
endif()

# --- script mode: SQL, SOURCE (its path in the tree), OUT, NAMESPACE, PREFIX ---

function(fail line why)
  message(FATAL_ERROR "${SOURCE}:${line}: ${why}")
endfunction()

# A list splits on ';' and treats '[', ']' and '\' specially: hide them while
# the text is a list of lines, and put them back in what is written.
string(ASCII 1 semicolon)
string(ASCII 2 open_bracket)
string(ASCII 3 close_bracket)
string(ASCII 4 backslash)
function(restore var)
  set(t "${${var}}")
  string(REPLACE "${semicolon}" ";" t "${t}")
  string(REPLACE "${open_bracket}" "[" t "${t}")
  string(REPLACE "${close_bracket}" "]" t "${t}")
  string(REPLACE "${backslash}" "\\" t "${t}")
  set(${var} "${t}" PARENT_SCOPE)
endfunction()

file(READ ${SQL} text)
string(REPLACE "\\" "${backslash}" text "${text}")
string(REPLACE ";" "${semicolon}" text "${text}")
string(REPLACE "[" "${open_bracket}" text "${text}")
string(REPLACE "]" "${close_bracket}" text "${text}")
string(REPLACE "\r" "" text "${text}")
string(REPLACE "\n" ";" lines "${text}")

set(names "")      # in file order
set(block_name "") # the block being read
set(body "")
set(contract "")
set(in_contract FALSE)
set(constants "")

# Appends the block just read to `constants`, or fails on an empty statement.
macro(finish_block)
  if(NOT block_name STREQUAL "")
    string(STRIP "${body}" body)
    string(REGEX REPLACE "${semicolon}$" "" body "${body}")
    string(STRIP "${body}" body)
    if(body STREQUAL "")
      fail(${block_line} "statement ${block_name} is empty")
    endif()
    string(REGEX REPLACE "'[^']*'" "''" unquoted "${body}")
    if(unquoted MATCHES "${semicolon}")
      fail(${block_line} "statement ${block_name} holds more than one statement (one per block)")
    endif()
    restore(body)
    if(body MATCHES "\\)pgfleet_sql\"")
      fail(${block_line} "statement ${block_name} contains )pgfleet_sql\", which ends its C++ string")
    endif()
    string(LENGTH "${PREFIX}" prefix_length)
    string(SUBSTRING "${block_name}" ${prefix_length} -1 short)
    string(REPLACE "_" ";" words "${short}")
    set(constant "k")
    foreach(w IN LISTS words)
      string(SUBSTRING "${w}" 0 1 first)
      string(SUBSTRING "${w}" 1 -1 rest)
      string(TOUPPER "${first}" first)
      string(APPEND constant "${first}${rest}")
    endforeach()
    restore(contract)
    string(APPEND constants "\n${contract}inline constexpr ::pgfleet::db::Statement ${constant}{\n"
           "    \"${block_name}\", R\"pgfleet_sql(${body})pgfleet_sql\"};\n")
    string(APPEND addresses "    &${constant},\n")
  endif()
endmacro()

set(n 0)
foreach(line IN LISTS lines)
  math(EXPR n "${n} + 1")
  if(line MATCHES "^--[ \t]*name:(.*)$")
    set(header "${CMAKE_MATCH_1}")
    finish_block()
    string(STRIP "${header}" block_name)
    set(block_line ${n})
    if(NOT block_name MATCHES "^[a-z][a-z0-9_]*$")
      fail(${n} "'-- name:' needs a name of lower-case letters, digits and _ (got \"${block_name}\")")
    endif()
    string(LENGTH "${PREFIX}" prefix_length)
    string(LENGTH "${block_name}" name_length)
    if(PREFIX AND (name_length LESS_EQUAL prefix_length OR NOT block_name MATCHES "^${PREFIX}"))
      fail(${n} "statement ${block_name} must be named ${PREFIX}<something> in this file")
    endif()
    list(FIND names ${block_name} seen)
    if(NOT seen EQUAL -1)
      fail(${n} "statement ${block_name} is named twice")
    endif()
    list(APPEND names ${block_name})
    set(body "")
    set(contract "")
    set(in_contract TRUE)
  elseif(line MATCHES "^[ \t]*--(.*)$")
    # A comment line: the contract right after a header, else only for readers.
    if(in_contract)
      string(REGEX REPLACE "^ " "" comment "${CMAKE_MATCH_1}")
      if(comment MATCHES "${backslash}$")
        fail(${n} "a contract comment may not end with \\ (it would continue the C++ comment)")
      endif()
      string(APPEND contract "//" " ${comment}\n")
      string(REGEX REPLACE "// \n$" "//\n" contract "${contract}")
    endif()
  elseif(line MATCHES "^[ \t]*$")
    set(in_contract FALSE)
  else()
    if(block_name STREQUAL "")
      fail(${n} "SQL before the first '-- name: <statement name>' header: every statement needs one")
    endif()
    set(in_contract FALSE)
    string(APPEND body "${line}\n")
  endif()
endforeach()
finish_block()

if(NOT names)
  fail(1 "no statement: a block starts with '-- name: <statement name>'")
endif()

# The list of the file's statements: k<File>Statements, from its name
# (store_maintenance.sql: kStoreMaintenanceSqlStatements).
get_filename_component(file_name "${SOURCE}" NAME)
string(REGEX REPLACE "[^A-Za-z0-9]" "_" file_words "${file_name}")
string(REPLACE "_" ";" file_words "${file_words}")
set(list_name "k")
foreach(w IN LISTS file_words)
  if(NOT w STREQUAL "")
    string(SUBSTRING "${w}" 0 1 first)
    string(SUBSTRING "${w}" 1 -1 rest)
    string(TOUPPER "${first}" first)
    string(APPEND list_name "${first}${rest}")
  endif()
endforeach()
string(APPEND list_name "Statements")

file(WRITE ${OUT}.tmp
"// Generated by cmake/embed_queries.cmake from ${SOURCE}. Do not edit: change
// ${SOURCE}, the build writes this again.
#pragma once

#include \"core/db/statements.h\"

namespace ${NAMESPACE} {
${constants}
// Every statement of ${SOURCE}, in file order (a test prepares them all).
inline constexpr const ::pgfleet::db::Statement* ${list_name}[] = {
${addresses}};

}  // namespace ${NAMESPACE}
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
