# Real RocksDB in a temp dir per test; one test re-executes this binary as a writer process
# and SIGKILLs it.
gos_cc_test(NAME storage_tables_test SRCS tables_test.cc DEPS gos::storage)

# Checkpoint chunks and store: real RocksDB in a temp dir per test; real CRIU dumps of a real
# process for the pages cut (integration: needs root and criu).
gos_cc_test(NAME storage_chunks_test SRCS chunks_test.cc DEPS gos::chunks)
gos_cc_binary(NAME storage_test_memproc SRCS memproc.cc OUTPUT_DIR ${PROJECT_BINARY_DIR}/tests)
gos_cc_test(NAME storage_chunks_criu_test SRCS chunks_criu_test.cc DEPS gos::chunks
  LABELS integration TIMEOUT 120)
add_dependencies(storage_chunks_criu_test storage_test_memproc)
gos_cc_test(NAME storage_checkpoints_test SRCS checkpoints_test.cc DEPS gos::storage)
