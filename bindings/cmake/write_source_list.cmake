# Writes the files matching GLOB under DIRECTORY, one quoted path per line, to OUTPUT: a response
# file for javac or mcs (@OUTPUT). Run at build time (cmake -P), because the files are those SWIG
# generated and their names are known only once it has run.
#
#   cmake -DDIRECTORY=dir -DGLOB=*.java -DOUTPUT=sources.txt -P write_source_list.cmake
foreach(_required DIRECTORY GLOB OUTPUT)
  if(NOT DEFINED ${_required})
    message(FATAL_ERROR "write_source_list.cmake: -D${_required}=... is required")
  endif()
endforeach()

file(GLOB_RECURSE _files LIST_DIRECTORIES false "${DIRECTORY}/${GLOB}")
if(NOT _files)
  message(FATAL_ERROR "write_source_list.cmake: no ${GLOB} under ${DIRECTORY}")
endif()
list(SORT _files)
set(_content "")
foreach(_file IN LISTS _files)
  string(APPEND _content "\"${_file}\"\n")
endforeach()
file(WRITE "${OUTPUT}" "${_content}")
