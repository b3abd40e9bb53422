/**
 * The run's list of temporary directories: the global setup makes a private file and names
 * it in this env entry, each test file appends every directory it makes, and the global
 * teardown removes them all, also those of a file whose tests were all skipped (vitest runs
 * no hook of such a file) or whose worker was killed.
 */
export const TEMP_DIR_LIST_ENV = "VEYYON_TEST_TEMP_DIR_LIST"
