# Saving and restoring a job's BCS state through the real engine on a one-node group.
gos_cc_test(NAME bcs_state_test SRCS bcs_state_test.cc DEPS gos::agent LABELS integration
  TIMEOUT 60)
