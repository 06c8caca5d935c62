# Included by ctest (TEST_INCLUDE_FILES, sim/CMakeLists.txt) with WK_SIM set to the
# wasmkeep-sim binary: adds one test per line of `wasmkeep-sim --list-mutants`
# ("<scenario> <mutant> <first seed> <seeds>"), sim.<scenario>.mutant.<mutant>, which passes
# when the mutant is caught within its seeds.
if(NOT EXISTS "${WK_SIM}")
  # Not built yet: one failing row says so, rather than silently no mutant rows.
  add_test(sim.mutants.not_built "${WK_SIM}" --list-mutants)
  set_tests_properties(sim.mutants.not_built PROPERTIES LABELS "sim")
  return()
endif()
execute_process(COMMAND "${WK_SIM}" --list-mutants OUTPUT_VARIABLE wk_mutants RESULT_VARIABLE wk_rc)
if(NOT wk_rc EQUAL 0)
  add_test(sim.mutants.list_failed "${WK_SIM}" --list-mutants)
  set_tests_properties(sim.mutants.list_failed PROPERTIES LABELS "sim")
  return()
endif()
string(REPLACE "\n" ";" wk_mutants "${wk_mutants}")
foreach(wk_line IN LISTS wk_mutants)
  if(wk_line STREQUAL "")
    continue()
  endif()
  string(REPLACE " " ";" wk_fields "${wk_line}")
  list(GET wk_fields 0 wk_scenario)
  list(GET wk_fields 1 wk_mutant)
  list(GET wk_fields 2 wk_first)
  list(GET wk_fields 3 wk_seeds)
  set(wk_name "sim.${wk_scenario}.mutant.${wk_mutant}")
  add_test("${wk_name}" "${WK_SIM}" --scenario "${wk_scenario}" --first-seed "${wk_first}" --seeds "${wk_seeds}"
           --mutant "${wk_mutant}" --expect-failure --quiet)
  set_tests_properties("${wk_name}" PROPERTIES LABELS "sim" TIMEOUT 1200)
endforeach()
