"""Shared fixtures. Every feature test takes `mode`, so it runs in each mode that exists."""
import fnmatch
import os

import pytest

import tinyad as ti

# Both modes by default; TINYAD_TEST_MODES=interp (or =fast) runs one.
MODES = os.environ.get("TINYAD_TEST_MODES", "interp,fast").split(",")

# TINYAD_TEST_ARCH=cuda-ptx (CI's profile): every kernel fast mode compiles for the CPU is also
# lowered for a real GPU, to PTX for sm_90 and sm_80 through NVIDIA's NVVM (compile/ptx.py), no
# GPU needed; a kernel that does not lower fails its test. Set here, so the subprocesses that
# tests start inherit it. Needs the `cuda` extra.
if os.environ.get("TINYAD_TEST_ARCH") == "cuda-ptx":
    os.environ["TINYAD_CUDA_PTX"] = "9.0,8.0"

# The README's quicker profile compiles adjoints in the test's own process: with a pytest worker
# on every core, a helper process per worker compiling adjoints ahead (compile/ahead.py) only
# competes with them, and compiles some no test differentiates (3 min 34 s against 4 min 13 s).
# The full profile (CI) keeps it on, as users have it; its own tests run there.
if os.environ.get("TINYAD_TEST_PROFILE") != "full":
    os.environ.setdefault("TINYAD_COMPILE_AHEAD", "0")

# Fast mode compiles each kernel with numba, which costs about 1-2 ms per IR operation, and more
# for long kernels whose locals are reassigned in loops. The 3x3 SVD / polar adjoints take 10-20 s
# each to compile on 2 cores, and the full-size mpm benchmark 15 s: they run in the full profile
# (TINYAD_TEST_PROFILE=full, which CI sets), so the README's test command stays short. Interp mode
# runs the same gradients in both profiles, but for the two slowest linalg tests.
FULL_PROFILE_ONLY = [
    "tests/test_linalg.py::test_svd_polar_gradients[[]fast-*-3]",
    "tests/test_linalg.py::test_singular_value_sum_gradient_is_analytic[[]fast-3]",
    "tests/test_linalg.py::test_svd_in_func_and_branch[[]fast]",
    "tests/test_linalg.py::test_svd_and_polar_in_kernel[[]fast-3]",
    "tests/test_linalg.py::test_svd_in_f32_kernel[[]fast-3]",
    "tests/test_benchmarks.py::test_fast_mode_reproduces_the_numbers_of_benchmarks_md[[]mpm]",
    # the optimisation examples, a counter lesson and the two-mode fuzz compile many kernels;
    # their interp runs stay in both profiles
    "tests/test_examples_optimise.py::test_mpm[[]fast]",
    "tests/test_examples_optimise.py::test_mass_spring[[]fast]",
    "tests/test_examples_optimise.py::test_ewma_debugging[[]fast]",
    "tests/test_lessons_seeds.py::test_control_flow_on_a_counter[[]fast]",
    "tests/test_fuzz.py::test_fuzz_interp_and_fast_mode_agree",
    # the slowest left (5-11 s each on 2 cores, cold cache): they keep the README's command
    # under 5 minutes with pip's install
    "tests/test_benchmarks.py::test_interp_checker_accepts_the_workloads_and_fast_mode_agrees[[]mpm]",
    "tests/test_benchmarks.py::test_python_m_benchmarks_runs_from_any_directory",
    "tests/test_cuda.py::test_a_captured_program_replays_on_cuda",
    # two of the four planted programs run in both modes (fast mode compiles each: 5-10 s)
    "tests/test_fuzz.py::test_both_modes_report_a_planted_bug_alike[[]5-outside]",
    "tests/test_fuzz.py::test_both_modes_report_a_planted_bug_alike[[]7-python]",
    "tests/test_benchmarks.py::test_the_gpu_check_runs_and_compares_with_the_cpu",
    "tests/test_func_derivatives.py::test_grad_with_argnums_of_vector_and_matrix[[]fast]",
    "tests/test_linalg.py::test_gradients_at_degenerate_matrices_are_finite[[]interp-3]",
    "tests/test_linalg.py::test_svd_in_func_and_branch[[]interp]",
    # The corpus sweeps in fast mode (79 programs each, cold compiles): their interp halves, and
    # fast mode's own tests, stay in both profiles. With the slowest tests of the default run
    # on 2 cores (5-90 s each, cold cache), they keep the README's command under 5 minutes.
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]fast-*",
    "tests/test_corpus_fd.py::test_gradient_matches_finite_differences[[]fast-*",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-mat-local-carried-in-loop]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-nested-serial-loops-two-*",
    "tests/test_taichi_language.py::test_a_long_vector_indexed_at_run_time[[]fast]",
    "tests/test_benchmarks.py::test_checked_fast_mode_accepts_the_workloads_and_changes_no_number[[]mpm]",
    "tests/test_benchmarks.py::test_fast_mode_reproduces_the_numbers_of_benchmarks_md[[]wave]",
    "tests/test_benchmarks.py::test_interp_checker_accepts_the_workloads_and_fast_mode_agrees[[]*]",
    "tests/test_cli.py::test_every_example_takes_help",
    "tests/test_cli.py::test_check_in_fast_mode_reports_the_violations_and_says_which_mode_ran",
    "tests/test_cli.py::test_check_of_a_clean_time_stepped_program_reports_nothing",
    "tests/test_examples_optimise.py::test_mass_spring[[]interp]",
    "tests/test_no_wrong_value.py::test_tinyad_leaves_the_global_random_generators_alone[[]fast]",
    "tests/test_compile_cache.py::test_two_processes_compile_the_same_kernel_at_once",
    "tests/test_access_records.py::test_a_scatter_through_float_indices_in_a_branch[[]fast]",
    "tests/test_fast_backend.py::test_disk_cache_is_hit_by_a_second_process_and_survives_corruption",
    "tests/test_fast_backend.py::test_remembered_typing_compiles_the_same_machine_code",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-nonlinear-carry-150-*",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-mat-inverse-2x2-3x3]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-func-early-return]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-kernel-scalar-args]",
    "tests/test_linalg.py::test_svd_polar_gradients[[]interp-*-3]",
    "tests/test_linalg.py::test_svd_and_polar_in_kernel[[]interp-3]",
    "tests/test_linalg.py::test_singular_value_sum_gradient_is_analytic[[]interp-3]",
    "tests/test_linalg.py::test_svd_in_f32_kernel[[]interp-3]",
    "tests/test_linalg.py::test_gradient_through_polar_in_a_serial_loop[[]interp]",
    # every lesson runs in both profiles; how each screen renders in a pipe, in the full one
    "tests/test_lessons.py::test_screens_fit_a_pipe_without_breaking_code[[]*]",
    # the mistakes corpus in fast mode (its interp half stays): each program's first kernel
    # compiles cold
    "tests/test_mistakes.py::test_each_mistake_gets_a_clear_error_at_its_line[[]fast-*",
    # fast mode's halves of the language, linear-algebra and verification sweeps (their
    # kernels, the 2x2 SVD's above all, are long compiles; fast mode's own tests stay)
    "tests/test_linalg.py::*[[]fast*",
    "tests/test_verify.py::*[[]fast*",
    "tests/test_language.py::*[[]fast*",
    "tests/test_taichi_language.py::*[[]fast*",
    "tests/test_error_reporting.py::test_the_main_example_prints_the_same_energy_in_both_modes",
    "tests/test_fuzz.py::test_an_atomic_min_winner_keeps_its_gradient_beside_unrelated_code",
    "tests/test_fuzz.py::test_findings_of_the_planted_fuzzer_are_reported_alike[[]*]",
    "tests/test_access_records.py::test_a_recurrence_in_a_branch_reads_another_iterations_*",
    "tests/test_gather.py::test_vector_field_and_three_dimensional_stencil[[]fast]",
    "tests/test_difftaichi.py::test_diff_sph_style_layer_methods_and_a_running_min_max[[]fast]",
    "tests/test_fast_backend.py::test_stencil_scatter_runs_in_row_blocks_without_atomics",
    "tests/test_difftaichi.py::test_mass_spring_style_tape_over_steps[[]fast]",
    "tests/test_fast_backend.py::test_float32_kernels_have_no_float64_values",
    "tests/test_compile_cache.py::test_a_cache_directory_that_cannot_be_made",
    # 2026-11-28, the README's command had grown to 6 min 6 s: the fast-mode halves of these
    # (their interp halves stay), the CUDA simulator's subprocess runs, and slow sweeps' members
    "tests/test_lessons.py::test_out_of_bounds_and_nan[[]fast]",
    "tests/test_lessons.py::test_ewma_explicit_taping[[]fast]",
    "tests/test_lessons_seeds.py::test_forward_mode[[]fast]",
    "tests/test_lessons_seeds.py::test_function_derivatives[[]fast]",
    "tests/test_rules_sweeps.py::test_a_scan_reading_what_it_stored_itself_is_not_computed_*[[]fast]",
    "tests/test_fuzz.py::test_both_modes_report_each_planted_bug_alike[[]*]",
    "tests/test_fuzz.py::test_break_in_serial_loops_is_differentiated[[]fast]",
    "tests/test_fast_backend.py::test_exit_with_adjoints_still_queued_is_quiet",
    "tests/test_fast_backend.py::test_exit_does_not_wait_for_the_helpers_current_compile",
    "tests/test_fast_backend.py::test_an_atomic_min_winner_keeps_its_gradient_under_fast_math[[]fast]",
    "tests/test_fast_backend.py::test_ndrange_loops_are_nested_and_match_interp",
    "tests/test_fast_backend.py::test_parallel_code_matches_interp_on_the_corpus[[]*]",
    "tests/test_cuda.py::test_a_loss_is_summed_per_block_on_cuda",
    "tests/test_cuda.py::test_a_recorded_launch_runs_on_cuda",
    "tests/test_cuda.py::test_a_checkpoint_is_reported_on_cuda",
    "tests/test_device_mirror.py::test_a_steady_state_tape_of_cuda_kernels_copies_no_field[[]*]",
    "tests/test_bad_index.py::test_a_float_derived_base_plus_static_offsets[[]fast-20000]",
    "tests/test_access_records.py::test_a_trail_that_outgrows_its_room_runs_the_launch_again[[]fast]",
    "tests/test_access_records.py::test_store_read_store_in_one_iteration_through_float_*[[]fast]",
    "tests/test_cli.py::test_bench_passes_its_arguments_to_the_benchmarks_from_any_directory",
    "tests/test_benchmarks.py::test_fast_mode_reproduces_the_numbers_of_benchmarks_md[[]*]",
    "tests/test_benchmarks.py::test_checked_fast_mode_accepts_the_workloads_and_changes_no_number[[]*]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-kernel-scalar-args-manual-grad]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-atomic-min-max-into-intermediates]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-mat-matvec-matmat]",
    "tests/test_verify.py::test_verify_agrees_on_the_corpus[[]interp-nonlinear-carry-120-iterations]",
    "tests/test_difftaichi.py::test_first_launch_leaves_pythons_random_streams_alone[[]fast]",
    "tests/test_taichi_ad_loops.py::test_locals_carried_by_inner_loops_sum_product_and_atomic[[]fast]",
    "tests/test_taichi_ad_loops.py::test_nested_and_stacked_inner_loops_with_mutated_locals[[]fast]",
    "tests/test_second_order.py::test_fwdmode_around_a_tape_gives_the_hessian_vector_product[[]fast]",
    "tests/test_error_reporting.py::test_randn_is_a_standard_normal_draw_alike_in_both_modes",
    # 2026-11-29, the README's command at 5 min 10 s: the fast halves of the two checked-capture
    # sweeps over every kind of finding (the same programs' interp halves, and fast mode's
    # clean replays and its third-call NaN, stay)
    "tests/test_capture_checked.py::test_a_problem_that_appears_in_a_later_call_is_*[[]fast-*]",
    "tests/test_capture_checked.py::test_a_value_check_that_fails_in_a_later_call_is_*[[]fast-*]",
    # and still 5 min 5 s: more fast halves (and one of two subprocess runs that draw a plot)
    "tests/test_capture_checked.py::test_a_clean_program_replays_and_leaves_the_*[[]fast-_gravity]",
    "tests/test_capture_checked.py::test_a_clean_program_replays_and_leaves_*[[]fast-_forward_after_a_tape]",
    "tests/test_access_records.py::test_a_conflict_names_the_iteration_that_writes[[]fast]",
    "tests/test_undo.py::test_a_tape_whose_backward_pass_fails_changes_nothing[[]fast]",
    "tests/test_zeroing.py::test_clear_grid_and_its_near_misses[[]fast]",
    "tests/test_taichi_ad_branches.py::test_a_local_mutated_inside_a_branch[[]fast]",
    "tests/test_cli.py::test_the_main_example_draws_its_forces_with_plot",
    "tests/test_cli.py::test_options_before_the_path_are_tinyads_and_after_it_the_programs[[]argv2-*]",
    "tests/test_docs_snippets.py::test_snippet[[]docs/capture.md:8]",
    "tests/test_lessons_seeds.py::test_forward_first[[]fast]",
    "tests/test_bad_index.py::test_a_float_derived_base_plus_static_offsets[[]fast-8]",
    "tests/test_lost_gradients.py::test_state_copied_between_per_frame_tapes_is_reported[[]fast]",
    "tests/test_lessons.py::test_gradient_bugs[[]fast]",
    "tests/test_capture_checked.py::test_a_clean_program_replays_and_leaves_*[[]fast-_time_loop_in_one_tape]",
    "tests/test_rules.py::test_a_loop_breaking_a_rule_every_iteration_keeps_a_few_reports[[]fast]",
    "tests/test_manual_sweeps.py::test_a_step_kernel_reading_the_truncated_gradient_is_reported[[]fast]",
]
# These two take 40 s and 5 minutes to compile even so: TINYAD_SLOW_TESTS=1 runs them as well.
FAST_MODE_COMPILE_TOO_SLOW = [
    "tests/test_linalg.py::test_gradient_through_polar_in_a_serial_loop[[]fast]",
    "tests/test_linalg.py::test_gradients_at_degenerate_matrices_are_finite[[]fast-3]",
]


# Under TINYAD_TEST_ARCH=cuda-ptx, the tests whose kernels are not lowered for CUDA: the 3x3 SVD
# and polar adjoints, 10,000-line modules that take numba-cuda minutes each (their 2x2 versions,
# in other tests, are lowered).
NOT_LOWERED = [p for p in FULL_PROFILE_ONLY + FAST_MODE_COMPILE_TOO_SLOW
               if p.startswith("tests/test_linalg.py")]


@pytest.fixture(autouse=True)
def _no_slow_program_note(monkeypatch):
    """Interp mode's note that a program is slow (interp/progress.py) depends on the machine's
    load, not on the program: a test comparing what two runs print would see it on one side
    only when the machine is busy. tests/test_interp_progress.py sets the thresholds itself."""
    from tinyad.interp import progress
    monkeypatch.setattr(progress, "LONG_LAUNCH_S", float("inf"))
    monkeypatch.setattr(progress, "LONG_RUN_S", float("inf"))


@pytest.fixture(autouse=True)
def _lowered_for_cuda_unless_too_long(request, monkeypatch):
    if os.environ.get("TINYAD_CUDA_PTX") and any(
            fnmatch.fnmatchcase(request.node.nodeid, p) for p in NOT_LOWERED):
        monkeypatch.delenv("TINYAD_CUDA_PTX")


def pytest_addoption(parser):
    parser.addoption("--arch", default=None, choices=("cpu", "cuda"),
                     help="the device of fast mode for every ti.init that names none (cuda: "
                          "run the fast-mode tests on a GPU; without one they fall back to the "
                          "CPU with a notice)")


def pytest_configure(config):
    arch = config.getoption("--arch")
    if arch:     # TINYAD_ARCH: ti.init's default arch, here and in the tests' subprocesses
        os.environ["TINYAD_ARCH"] = arch


def _skipped(nodeid: str) -> str | None:
    """Why a test is left out of this run, or None."""
    if not os.environ.get("TINYAD_SLOW_TESTS") and any(
            fnmatch.fnmatchcase(nodeid, p) for p in FAST_MODE_COMPILE_TOO_SLOW):
        return "fast mode: numba compiles this test's kernels in minutes (TINYAD_SLOW_TESTS=1)"
    if os.environ.get("TINYAD_TEST_PROFILE") != "full" and any(
            fnmatch.fnmatchcase(nodeid, p) for p in FULL_PROFILE_ONLY):
        return "long compile: runs in the full profile (TINYAD_TEST_PROFILE=full, as in CI)"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        reason = _skipped(item.nodeid)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(params=MODES)
def mode(request):
    """Initialise tinyad in one execution mode (f64 by default for gradient checks)."""
    ti.init(mode=request.param, default_fp=ti.f64)
    return request.param


@pytest.fixture
def f32_mode(mode):
    """Like `mode`, but with Taichi's default f32 precision."""
    ti.init(mode=mode, default_fp=ti.f32)
    return mode
