# The mutant suite (issue 33): tests/mutants/run.py plants each bug of tests/mutants/mutants.py in a scratch
# copy of the tree (build/tests/mutants), builds what it needs, runs only the tests that must catch it, and
# prints caught / survived per mutant and the total. Labels mutants and mutants-subset, outside the default
# run (tests/run-all: -LE 'bench|mutants'): each mutant regenerates the trainers its tests use (1-11 min a
# mutant on the 2-core machine under load), the 30 together about 1.5 hours. Run them all before a release:
# ctest --test-dir build -L '^mutants$' --output-on-failure (README, Tests).
# 2026-12-02: 30 of 30 caught: the first 13 (run.py . /tmp/mutants, about 30 min on the 2-core machine under
# load 14-20), the 17 added after them run as two --only batches (about 75 min together under load 12-20;
# precision_and_microbatch's four 6-11 min each). Three of the 17 had no test that could catch them (read
# from the suite, not run before the tests were added), each a hole a new test fills: token_file_big_endian
# (no test trained from a token file: e2e_tokens_file_gpt2-mini), resume_seed_not_restored (every resume
# test repeated --seed: e2e_resume_seed_gpt2-mini, --first-only) and
# npy_last_dim_unchecked (no .npy of mlp's rank with a wrong dimension: e2e_npy_mlp's shape-cols case).
# 2026-12-02, 32-bit token files: token_file_big_endian (its search text moved) and the new
# token_file32_low_half caught (run.py --only, 90 s and 71 s under load 12).
# headgrad_deferred_unapplied_kept and torch_import_rope_tables_unchecked, added after: caught by head_grad_plan and
# torch_import_errors (run.py --only, 67 s and 74 s).
# window_attention_no_shift_mask (added with Swin's window_attention): caught by gradcheck (96 s, --only).
# remat_auto_half_ignored (added with --precision auto on whole-graph plans): caught by remat_auto_unet (128 s,
# --only).
# bpe_kind_always_gpt2, tokenizer_vocab_off_by_one and report_dims_micro_as_batch (the --text line's tokenizer
# kind, compile's tokenizer id check, the dims line under micro-batching): caught by bpe_llama3_vocab,
# error_tokenizer_vocab and report_dims_micro_batch(_set) (run.py --only, 83 s, 59 s and 7 s).
# The runner can fail: a mutant that edits only a comment printed "comment_only survived gradcheck passed",
# one whose search text is gone "gone stale: search text found 0 times", exit status 1.
add_test(NAME mutants COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/mutants/run.py ${MEMPLAN_SOURCE_DIR}
                              ${CMAKE_CURRENT_BINARY_DIR}/mutants)
set_tests_properties(mutants PROPERTIES LABELS mutants TIMEOUT 10800 RESOURCE_LOCK mutants)
# A bounded slice, another for each commit (run.py --subset commit/8: every 8th mutant from the one the commit
# hash picks, as tests/run-all picks its accuracy rerun): 10-11 of the 84 mutants, 10-40 minutes here (those naming
# precision_and_microbatch or opt_state_accuracy take about 11 minutes each under load)
add_test(NAME mutants_subset COMMAND ${MEMPLAN_PYTHON3} ${MEMPLAN_TEST_DIR}/mutants/run.py ${MEMPLAN_SOURCE_DIR}
                                     ${CMAKE_CURRENT_BINARY_DIR}/mutants --subset commit/8)
set_tests_properties(mutants_subset PROPERTIES LABELS mutants-subset TIMEOUT 3600 RESOURCE_LOCK mutants)
