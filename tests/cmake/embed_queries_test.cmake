# cmake/embed_queries.cmake writes a statement's constant from its block and
# refuses a malformed .sql file, naming its line and what is wrong (a build
# that embeds such a file fails with that message). Run by ctest:
#   cmake -DSCRIPT=<cmake/embed_queries.cmake> -DWORK=<scratch dir> -P this file
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# Embeds `text` as t.sql with PREFIX t_; sets `${out}_rc`, `${out}_error` and
# `${out}_header`.
function(embed out text)
  file(WRITE ${WORK}/t.sql "${text}")
  file(REMOVE ${WORK}/t.sql.h)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DSQL=${WORK}/t.sql -DSOURCE=x/t.sql -DOUT=${WORK}/t.sql.h
            -DNAMESPACE=pgfleet::x -DPREFIX=t_ -P ${SCRIPT}
    RESULT_VARIABLE rc ERROR_VARIABLE error OUTPUT_QUIET)
  set(header "")
  if(EXISTS ${WORK}/t.sql.h)
    file(READ ${WORK}/t.sql.h header)
  endif()
  string(REGEX REPLACE "[ \n]+" " " error "${error}")
  set(${out}_rc ${rc} PARENT_SCOPE)
  set(${out}_error "${error}" PARENT_SCOPE)
  set(${out}_header "${header}" PARENT_SCOPE)
endfunction()

function(expect_refused text message)
  embed(r "${text}")
  if(r_rc EQUAL 0)
    message(FATAL_ERROR "accepted, expected \"${message}\":\n${text}")
  endif()
  string(FIND "${r_error}" "${message}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "expected \"${message}\", got: ${r_error}")
  endif()
endfunction()

expect_refused("-- the file\nselect 1;\n" "x/t.sql:2: SQL before the first '-- name:")
expect_refused("-- name: t_a\nselect 1;\n\n-- name: t_a\nselect 2;\n"
               "x/t.sql:4: statement t_a is named twice")
expect_refused("-- name: t_a\n-- a contract and nothing else\n\n-- name: t_b\nselect 1;\n"
               "x/t.sql:1: statement t_a is empty")
expect_refused("-- name: t_a\nselect 1;\n-- name:\nselect 2;\n"
               "x/t.sql:3: '-- name:' needs a name")
expect_refused("-- name: other\nselect 1;\n" "x/t.sql:1: statement other must be named t_")
expect_refused("-- name: t_a\nselect 1; select 2;\n" "holds more than one statement")
expect_refused("-- only a comment\n" "no statement")

# A good file: the constant's name, the text PostgreSQL gets (no comment lines,
# no final semicolon, a quoted ';' kept) and the contract as its comment.
embed(ok "-- the file\n\n-- name: t_read_two_things\n-- Its contract.\nselect 'a;b' as x\n  -- why\n  from y where z = $1::text[];\n")
if(NOT ok_rc EQUAL 0)
  message(FATAL_ERROR "refused a good file: ${ok_error}")
endif()
string(FIND "${ok_header}" "// Its contract.
inline constexpr ::pgfleet::db::Statement kReadTwoThings{
    \"t_read_two_things\", R\"pgfleet_sql(select 'a;b' as x
  from y where z = $1::text[])pgfleet_sql\"};" at)
if(at EQUAL -1)
  message(FATAL_ERROR "unexpected header:\n${ok_header}")
endif()
