"""The row contract: every column of a trial row with its kind and meaning, the values of the
mode column, and `check_row`, which refuses a row that breaks the contract.

No pandas, no pyarrow: the measuring process checks its rows with this module. Column kinds
are Python-level ('str', 'float', 'int', 'bool', 'timestamp'); `results.store` maps them to
Arrow types. `python -m sweeper.results.schema` prints the schema table of docs/results-schema.md.
"""

from __future__ import annotations

import datetime
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sweeper import SweeperError

EAGER = "eager"
"""The mode of a trial that does not compile: the baseline of its context."""
UNPLACED = "unplaced"
"""The status of a trial that asked for a GPU type the cluster lacked, under `sweeper run --no-wait`: it
never ran, and `--resume` runs it."""
MODES: tuple[str, ...] = (EAGER, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""Every value of the mode column: eager, then the torch.compile modes."""
WITNESS_SLOW_FACTOR = 1.25
"""A host-speed witness reading over this many times the host's fast-state reading is a window (or a
trial) in the host's slow state: the measuring side classifies windows by it, the analysis trials."""
CONFIG_COLUMNS: tuple[str, ...] = ("task", "mode", "dynamic", "batch_size", "seq_len", "phase", "precision")
"""Columns a row copies unchanged from its trial's config; the trial id hashes them too."""
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")
"""Modes whose compiled graphs replay as CUDA graphs (their outputs live in a static pool)."""

Kind = Literal["str", "float", "int", "bool", "timestamp"]
STR: Kind = "str"
FLOAT: Kind = "float"
INT: Kind = "int"
BOOL: Kind = "bool"
TIMESTAMP: Kind = "timestamp"
"""A UTC instant: a `datetime`, or its ISO 8601 text (what the measuring process writes)."""

ARROW_TYPE_NAMES: dict[Kind, str] = {STR: "string", FLOAT: "double", INT: "int64", BOOL: "bool",
                                     TIMESTAMP: "timestamp[us, tz=UTC]"}
"""The Arrow type of each kind as Arrow writes it (the schema page's table; results.store builds them)."""


@dataclass(frozen=True)
class Column:
    name: str
    kind: Kind
    doc: str

    @property
    def arrow_type_name(self) -> str:
        return ARROW_TYPE_NAMES[self.kind]


# The table of columns: data, one entry a column, in file order.
COLUMNS: list[Column] = [
    # identity
    Column("sweep_id", STR, "Sweep this row belongs to (stable across --resume)."),
    Column("trial_id", STR, "Stable hash of the trial's config: same config, same id."),
    Column("sweep_name", STR, "The spec's `name`."),
    # config
    Column("model", STR, "Model name (zoo name or the spec's label for a factory model)."),
    Column("task", STR, "vision, nlp or custom: decides inputs and the item unit."),
    Column("mode", STR, "eager (no compile) or the torch.compile mode."),
    Column("backend", STR, "torch.compile backend (inductor unless the spec says otherwise)."),
    Column("dynamic", BOOL, "torch.compile(dynamic=...); null = automatic dynamic."),
    Column("batch_size", INT, "Items per batch."),
    Column("seq_len", INT, "Tokens per sequence for NLP models; null for vision."),
    Column("phase", STR, "infer (no_grad forward) or train (forward + backward + AdamW step)."),
    Column("precision", STR, "fp32, or bf16 through torch.autocast."),
    Column("scope", STR, "What torch.compile compiled: whole (the model) or regional (each repeated block in place, one compiled block serving every copy); null in rows older than the setting: whole."),
    Column("option_set", STR, "Name of the spec's inductor option set (axes.options) the trial applied; null: the spec names none (and for eager)."),
    Column("inductor_options_json", STR, "The exact inductor options applied, as JSON: the mode's own (torch._inductor.list_mode_options) with the option set over them; null when the set is empty (torch.compile got the mode alone) and for eager."),
    Column("path", STR, "jit (torch.compile at start-up) or aoti (torch.export + AOTInductor package, loaded in a fresh process); null in rows older than the setting: jit."),
    Column("accelerator_type", STR, "GPU type the trial asked Ray for (`axes.accelerator_type`, a node's `accelerator_type:<NAME>` resource); null: placed on any node."),
    Column("matmul_precision", STR, "torch.set_float32_matmul_precision in force."),
    Column("config_json", STR, "The trial's full config as JSON (model kwargs, measurement settings)."),
    # outcome
    Column("status", STR, "ok, oom, compile_error, export_error (path aoti: torch.export refused the model; the error names why), runtime_error, timeout, inaccurate, crashed; unplaced: never ran (no node of its accelerator_type, --no-wait)."),
    Column("error", STR, "Exception class and message (or exit signal) when status is not ok."),
    Column("attempts", INT, "Processes started for this trial (retries after a crash included)."),
    Column("lost_attempts", INT, "Attempts lost with their Ray node or worker (the trial was put back in the queue and ran again); 0 or null: none."),
    Column("lost_nodes", STR, "Ray node ids of the lost attempts, comma-separated, in order (empty where a lost attempt's node is unknown)."),
    # compile
    Column("compile_s", FLOAT, "Cold compile: first compiled call (synchronized) minus one steady iteration, fresh cache. Path aoti: the package's build, export plus package seconds."),
    Column("first_call_s", FLOAT, "Raw wall time of the first compiled call, cold cache. Path aoti: the first call after loading the package."),
    Column("warm_compile_s", FLOAT, "Same as compile_s in a new process whose cache holds this trial's artifacts (less the cold process's steady step)."),
    Column("warm_first_call_s", FLOAT, "Raw first call in that warm-cache process."),
    Column("warm_megacache_s", FLOAT, "Same as compile_s in a new process with an empty cache into which this trial's Mega-Cache artifact (torch.compiler.save_cache_artifacts) was loaded first: a deployment's warm start."),
    Column("warm_megacache_first_call_s", FLOAT, "Raw first call in that Mega-Cache process."),
    Column("megacache_load_s", FLOAT, "Seconds torch.compiler.load_cache_artifacts took in that process (not part of warm_megacache_s)."),
    Column("megacache_bytes", INT, "Size of the trial's Mega-Cache artifact, saved after its cold compile."),
    Column("megacache_file", STR, "The artifact kept on the driver, relative to the results directory (null: none, or over the size limit)."),
    Column("aoti_export_s", FLOAT, "Path aoti: seconds of torch.export.export of the model on its batch."),
    Column("aoti_package_s", FLOAT, "Path aoti: seconds of torch._inductor.aoti_compile_and_package (the build; compile_s is export plus package)."),
    Column("aoti_cxx", STR, "Path aoti: the C++ compiler inductor called to build the package (null where this torch does not say)."),
    Column("aoti_cxx_replaced", STR, "Path aoti: the compiler inductor would have called, when it was replaced because it links libstdc++ into shared libraries (a second C++ runtime beside torch's breaks the package's load); null when it was kept. A compiler named by CXX is replaced the same way: its packages could not load beside torch either."),
    Column("aoti_package_bytes", INT, "Path aoti: size of the .pt2 package (the weights inside)."),
    Column("aoti_load_s", FLOAT, "Path aoti: seconds of torch._inductor.aoti_load_package in the fresh measuring process, after inductor's CPU check (aoti_isa_check_s); first_call_s is the first call after it."),
    Column("aoti_isa_check_s", FLOAT, "Path aoti: seconds of inductor's check of the CPU's vector instructions, which aoti_load_package runs after loading; with an empty inductor cache (as the load process has) it compiles test programs, once per cache directory. Timed just before the load."),
    Column("aoti_package_file", STR, "Path aoti: the package kept on the driver, relative to the results directory (null: none, or over the size limit)."),
    Column("compiled_regions", INT, "Modules torch.compile was applied to: 1 for scope whole, the repeated block instances for regional."),
    Column("region_classes", STR, "Class names of the blocks a regional trial compiled in place, comma-separated (null for whole)."),
    Column("model_built_on", STR, "Where the model's weights were made: device (built under the trial's device as torch's default device: every zoo, timm and Hugging Face model, and a factory or callable that builds there), host (a CPU trial), or `host: failed under DEVICE (why)` for a factory or callable whose code could not run under the device: it was built on the host and moved. Null in rows older than the column."),
    Column("block_choice", STR, "How a regional trial's block was chosen: spec (the model's `block`), zoo (the zoo's own), `found: CLASS, N copies, P% of parameters` (the block finder), or `none: why` when no block qualifies (the trial then fails as compile_error). Null for whole and eager."),
    # steady state
    Column("throughput_items_s", FLOAT, "Items/s: median over timed windows (images or sequences)."),
    Column("throughput_tokens_s", FLOAT, "Real tokens/s for NLP models (median window); null for vision."),
    Column("latency_p50_ms", FLOAT, "Per-iteration latency, 50th percentile over all timed iterations."),
    Column("latency_p90_ms", FLOAT, "Per-iteration latency, 90th percentile."),
    Column("latency_p99_ms", FLOAT, "Per-iteration latency, 99th percentile."),
    Column("throughput_spread_pct", FLOAT, "(max - min) / median of window throughputs, in percent."),
    Column("eager_spread_pct", FLOAT, "The same for the trial's eager windows (the baseline of its speedup); an eager row's equals throughput_spread_pct."),
    Column("timed_windows", INT, "Timed windows per arm: measure.windows, and more (up to 3x) while too few pairs ran at the host's fast state."),
    Column("iters_per_window", INT, "Iterations per timed window."),
    # memory
    Column("peak_mem_gib", FLOAT, "Peak allocated memory from the warm-up through the timed windows (CUDA; CUDA-graph pools included), or process RSS high-water (CPU)."),
    Column("peak_mem_compile_gib", FLOAT, "Peak allocated memory over the whole compiled run, compile/autotune included."),
    Column("peak_reserved_gib", FLOAT, "Peak reserved (cached) CUDA memory over the whole compiled run; null on CPU."),
    Column("mem_need_reserved_gib", FLOAT, "What the caching allocator took over the whole trial (eager, compile, autotune, CUDA-graph pools, steady; the accuracy check's references and comparisons left out): the memory a setting needs, as torch.cuda.set_per_process_memory_fraction caps it. Null on CPU."),
    Column("compiled_need_reserved_gib", FLOAT, "The same in the warm-compile process, which runs the compiled setting alone (compile from the trial's cache, warm-up, a few windows; no eager model, no accuracy check): what a deployment of this setting needs, a cold compile's own extra (autotuning) aside. Null on CPU or without warm_compile."),
    Column("device_mem_used_gib", FLOAT, "Device memory in use (all of the GPU's, CUDA context and loaded kernels included) at its highest phase end: with one trial per GPU, what the trial's process occupied. Null on CPU and when trials share the GPU."),
    # eager baseline (same process, model, inputs)
    Column("eager_throughput_items_s", FLOAT, "Eager throughput of the same model/phase/precision/batch, same process, windows alternating with the compiled ones."),
    Column("eager_latency_p50_ms", FLOAT, "Eager per-iteration latency p50."),
    Column("eager_peak_mem_gib", FLOAT, "Eager steady peak memory."),
    Column("speedup_vs_eager", FLOAT, "throughput_items_s / eager_throughput_items_s."),
    Column("mem_ratio_vs_eager", FLOAT, "peak_mem_gib / eager_peak_mem_gib."),
    Column("break_even_iters", FLOAT, "compile_s / (eager iter time - compiled iter time); inf when compiling never pays."),
    Column("speedup_ci_low", FLOAT, "Lower end of the speedup's 95% bootstrap interval over the pairs of alternated eager and compiled windows."),
    Column("speedup_ci_high", FLOAT, "Upper end of that interval. Speedups whose intervals overlap are not told apart."),
    # host speed (the witness timed around every window: sweeper.measure.witness)
    Column("witness_ms", FLOAT, "Host-speed witness (ms of a fixed probe of tiny torch CPU ops, the slower of the readings just before and after each window): median over the windows of the headline figures, compiled arm (an eager trial: its own)."),
    Column("eager_witness_ms", FLOAT, "The same over the headline's eager windows."),
    Column("gpu_clock_mhz", FLOAT, "The GPU's SM clock (NVML) read as each window ended: median over the headline's windows, compiled arm (an eager trial: its own); null on CPU or without NVML."),
    Column("eager_gpu_clock_mhz", FLOAT, "The same over the headline's eager windows."),
    Column("launch_witness_ms", FLOAT, "Launch witness (ms of CPU to enqueue 200 tiny kernels on an idle GPU, read just before each window): median over the headline's windows, compiled arm (an eager trial: its own); null on CPU."),
    Column("eager_launch_witness_ms", FLOAT, "The same over the headline's eager windows."),
    Column("witness_ref_ms", FLOAT, "The host's fast state as its timed windows read the witness, which the trial judged its windows by (the median of its latest processes' own, or this one's if lower); a window reading over 1.25x that ran in the slow state."),
    Column("slow_windows_pct", FLOAT, "Timed windows (both arms) whose witness read the host's slow state, in percent."),
    Column("host_state", STR, "fast: the headline figures compare only pairs of alternated windows that both ran at the host's fast state (on a GPU shared with other trials, with none of them compiling); steady: the host's state moved no arm's step time, the headline uses every pair; slow: too few pairs ran fast and the state mattered, the headline uses every pair."),
    Column("median_se_pct", FLOAT, "Standard error of the headline's median step, in percent of it, over the windows the headline uses (1.2533 x 1.4826 x MAD / sqrt(windows)): how precisely the throughput is known (measure.target_se_pct times more windows while it is above the target)."),
    Column("eager_median_se_pct", FLOAT, "The same for the trial's eager windows; the self-check's drift limit widens to twice the combined error of the two baselines it compares."),
    Column("eager_alone_throughput_items_s", FLOAT, "A compiled trial's eager throughput timed before its compile (the alternated eager windows replace it as the baseline): one more measurement of the context's uncompiled eager step, by a process that had not compiled yet, for the self-check's consensus."),
    Column("eager_alone_witness_ms", FLOAT, "The host-speed witness of those windows (median)."),
    Column("eager_alone_median_se_pct", FLOAT, "The standard error of their median step, in percent."),
    Column("eager_alone_wait_s", FLOAT, "Seconds those windows waited for the host's fast state (at most sweeper.measure.pipeline.ALONE_WAIT_S)."),
    Column("matched_pairs", INT, "Pairs of alternated windows the headline figures (throughputs, speedup and its interval) were taken from."),
    Column("host_wait_s", FLOAT, "Seconds the timed windows waited for the host's CPUs to read their fast state before a round, and on a GPU shared with other trials for a neighbour's compile to end (measure.host_wait_s bounds it; 0: none needed or none allowed)."),
    Column("speedup_slow", FLOAT, "The speedup over the pairs whose windows both ran at the host's slow state; null: fewer than 3 such pairs."),
    Column("slow_reruns", INT, "Times this trial ran again, after the sweep's other trials, because its headline had run at the host's slow CPU state (resources.slow_reruns); null: never. The row is the last ok run's."),
    Column("slow_rerun_speedup", FLOAT, "The headline speedup of the run this row replaced, taken at the host's slow state."),
    Column("throughput_slow_items_s", FLOAT, "Items/s over the slow-state windows (median); null: fewer than 3 slow pairs."),
    Column("eager_throughput_slow_items_s", FLOAT, "The same for the eager arm."),
    Column("speedup_all_windows", FLOAT, "The speedup over every pair of windows, whatever the host's state (what a measurement without the witness reads)."),
    Column("windows_json", STR, "Every timed window as JSON: seconds per iteration of each arm and the witness reading around it, with the reference; on a GPU shared with other trials, `busy_pairs`: the pairs during which one of them compiled."),
    Column("host_busy_windows_pct", FLOAT, "Timed windows (either arm) during which another trial on the host was compiling, in percent: measured from that trial's compile marker."),
    Column("gpu_util_pct", FLOAT, "Mean SM utilization (NVML: share of time a kernel ran) over the timed windows, compiled arm (an eager trial: its own); null on CPU or without NVML."),
    Column("eager_gpu_util_pct", FLOAT, "The same over the alternated eager windows."),
    Column("gpu_mem_util_pct", FLOAT, "Mean memory-bus utilization (NVML: share of time device memory was read or written) over the timed windows."),
    Column("eager_gpu_mem_util_pct", FLOAT, "The same over the alternated eager windows."),
    Column("gpu_power_w", FLOAT, "Mean board power (NVML, instantaneous where the driver offers it) over the timed windows, in watts."),
    Column("eager_gpu_power_w", FLOAT, "The same over the alternated eager windows."),
    Column("epoch_items", INT, "Images or sequences in one epoch (measure.epoch_images / epoch_sequences, or the stream's items)."),
    Column("epoch_s", FLOAT, "Seconds per epoch of epoch_items at the steady throughput: compile excluded."),
    Column("epoch_s_with_compile", FLOAT, "epoch_s plus the compile it needed first (compile_s; a stream's stream_compile_s): one epoch, compile included."),
    Column("eager_epoch_s", FLOAT, "Seconds per epoch of epoch_items at the eager throughput (alternated windows)."),
    Column("cpu_affinity", STR, "CPUs the measuring process could run on, e.g. 0-15: the trial's own share when pinned."),
    Column("cpu_count", INT, "Number of those CPUs."),
    Column("torch_threads", INT, "torch's intra-op threads in the measuring process (torch.get_num_threads()): CPU kernels ran on, and inductor's CPU code was built for, this many."),
    Column("trials_per_gpu", INT, "Trials sharing the trial's GPU (resources.trials_per_gpu); above 1 each measuring process held the GPU's lock for all but its compiling call."),
    Column("gpu_lock_wait_s", FLOAT, "Seconds the trial's (cold) measuring process waited for its GPU's lock (a neighbour's GPU work); the warm processes' waits are inside their phases. Null when the GPU was its own."),
    Column("gpu_lock_held_s", FLOAT, "Seconds that process held the lock, shared or alone (everything but its compiling call, unless that autotuned). Null when the GPU was its own."),
    Column("gpu_lock_exclusive_s", FLOAT, "Seconds of those it held the GPU alone: its timed windows, which no neighbour's GPU work may overlap (its untimed GPU work shares the lock with theirs). Null when the GPU was its own, and in rows made before the lock had two kinds."),
    Column("cpus_pinned", BOOL, "The trial held its own slot of whole physical cores (its processes and compile workers ran there only)."),
    # compile health
    Column("graphs", INT, "Unique graphs dynamo captured."),
    Column("graph_breaks", INT, "Graph breaks."),
    Column("recompiles", INT, "Recompilations after the first compile of each frame."),
    Column("cudagraph_skips", INT, "Graphs whose CUDA-graph capture was skipped (reduce-overhead modes)."),
    Column("recompile_limit_hit", BOOL, "A frame hit torch._dynamo's recompile limit and fell back to eager."),
    Column("graph_break_reasons", STR, "JSON list of distinct graph-break reasons (first 20)."),
    Column("trace_bytes", INT, "Size of the cold compile's TORCH_TRACE log kept gzip-compressed in RESULTS/traces/<trial_id>.log.gz (measure.trace; `sweeper trace` renders it); null: not traced."),
    # accuracy
    Column("accuracy_ok", BOOL, "Compiled outputs (and, for train, gradients) pass: error vs float64 <= accuracy_tol (2x eager's own error, 3x in bf16, plus a floor), or, without a float64 reference, rel_err <= accuracy_tol."),
    Column("max_abs_err", FLOAT, "Max absolute difference, compiled vs eager output."),
    Column("rel_err", FLOAT, "||compiled - eager|| / ||eager|| of the output (max over output and gradients in train)."),
    Column("accuracy_tol", FLOAT, "The bound the check applied: allowed error vs float64, or the tolerance vs eager (see accuracy_reference)."),
    Column("eager_err_vs_fp64", FLOAT, "Eager's own relative error against a float64 run of the same model and batch (max over output and gradients)."),
    Column("compiled_err_vs_fp64", FLOAT, "The compiled result's relative error against the same float64 run."),
    Column("accuracy_reference", STR, "Where the float64 reference ran: fp64_device, fp64_cpu, or eager (none possible: compiled vs eager within the tolerance)."),
    Column("accuracy_note", STR, "Why the float64 reference is missing or ran on the host."),
    # input streams (trials with a workload; null for fixed-shape trials)
    Column("workload", STR, "Name of the spec's workload (input stream) this trial ran; null: one fixed-shape batch."),
    Column("length_source", STR, "Where the stream's lengths came from, with parameters, e.g. lognormal(mu=5.19, sigma=0.6)."),
    Column("bucketing", STR, "Padding policy of a token stream: none, multiple:N, pow2, list:A,B,..., quantile:K."),
    Column("mark_dynamic", BOOL, "Input dimensions that vary over the stream were marked with torch._dynamo.mark_dynamic."),
    Column("stream_batches", INT, "Batches in the stream."),
    Column("stream_shapes", INT, "Distinct input shapes in the stream (after bucketing)."),
    Column("pad_waste", FLOAT, "Padding tokens / all tokens computed over the stream (0 = no padding)."),
    Column("stream_s", FLOAT, "End-to-end seconds of the first pass over the stream, every compile and recompile included."),
    Column("eager_stream_s", FLOAT, "The same first pass, eager, same process and batches."),
    Column("stream_speedup_vs_eager", FLOAT, "eager_stream_s / stream_s: the end-to-end gain, compiles paid."),
    Column("real_tokens_per_s", FLOAT, "Real (non-padding) tokens/s over the steady passes after the first (median pass)."),
    Column("eager_real_tokens_per_s", FLOAT, "Eager real tokens/s over steady passes alternating with the compiled ones."),
    Column("stream_compile_s", FLOAT, "stream_s minus the steady time of the same batches: seconds spent compiling."),
    Column("compile_s_per_shape", FLOAT, "stream_compile_s / stream_shapes: compile cost per distinct shape."),
    Column("stream_break_even_batches", FLOAT, "Batches of this mix after which compiling has paid for itself vs eager; inf if never."),
    Column("fell_back_to_eager", BOOL, "Hit the recompile limit: later new shapes ran eager. Never a setting to recommend."),
    Column("accuracy_shapes", INT, "Distinct shapes whose first batch was checked against eager and float64 (real positions only)."),
    Column("notes", STR, "Warnings about a row that ran, e.g. FELL BACK TO EAGER."),
    # generation (phase generate; null for the other phases)
    Column("new_tokens", INT, "Phase generate: tokens decoded greedily after the prompt (seq_len is the prompt's length)."),
    Column("cache", STR, "Phase generate: the KV cache, static (preallocated) or dynamic (grows each step)."),
    Column("generate_compile_path", STR, "How a compiled generate trial was compiled: compile_config (transformers' own: generation_config.compile_config, the decode step compiled, the prefill eager; static cache) or forward (model.forward compiled by torch.compile; dynamic cache, modes without CUDA graphs)."),
    Column("eager_disable_compile", BOOL, "The eager generate arm ran with generation_config.disable_compile=True (transformers' own automatic compile of the decode step switched off)."),
    Column("eager_compiled_frames", INT, "Frames dynamo compiled while the eager generate arm ran (0: the baseline is verified uncompiled)."),
    Column("ttft_ms", FLOAT, "Time to first token: from the generate call to its first new token (the prefill), median over the headline's calls."),
    Column("eager_ttft_ms", FLOAT, "The same for the eager arm (windows alternating with the compiled ones)."),
    Column("decode_tokens_per_s", FLOAT, "Decode tokens/s: batch_size x (new_tokens - 1) over the time from the first new token to the last, median over the headline's calls."),
    Column("eager_decode_tokens_per_s", FLOAT, "The same for the eager arm."),
    Column("decode_token_p50_ms", FLOAT, "Per-token decode latency (one step of the whole batch after the first token), 50th percentile over every step of the headline's calls."),
    Column("decode_token_p90_ms", FLOAT, "The same, 90th percentile."),
    Column("decode_token_p99_ms", FLOAT, "The same, 99th percentile."),
    Column("eager_decode_token_p50_ms", FLOAT, "The eager arm's per-token decode latency, 50th percentile."),
    Column("generate_s", FLOAT, "Seconds per whole generate call (prefill and every decode step), median over the headline's calls."),
    Column("eager_generate_s", FLOAT, "The same for the eager arm."),
    Column("decode_speedup_vs_eager", FLOAT, "decode_tokens_per_s / eager_decode_tokens_per_s."),
    Column("decode_speedup_ci_low", FLOAT, "Lower end of the decode speedup's 95% bootstrap interval over the pairs of alternated windows."),
    Column("decode_speedup_ci_high", FLOAT, "Upper end of that interval."),
    Column("ttft_speedup_vs_eager", FLOAT, "eager_ttft_ms / ttft_ms."),
    Column("tokens_match_rate", FLOAT, "Share of the generated tokens (every sequence and position) that equal eager's greedy tokens for the same prompt batch."),
    # environment
    Column("sweeper_version", STR, "sweeper package version."),
    Column("git_commit", STR, "Commit of the sweeper checkout that launched the sweep, if any."),
    Column("torch_version", STR, "torch.__version__ in the trial process."),
    Column("cuda_version", STR, "torch.version.cuda (null for CPU builds)."),
    Column("driver_version", STR, "NVIDIA driver version (null on CPU)."),
    Column("device_type", STR, "cuda or cpu."),
    Column("device_name", STR, "GPU name, or the CPU model."),
    Column("gpu_uuid", STR, "UUID of the GPU the trial ran on (null on CPU)."),
    Column("hostname", STR, "Host that ran the trial."),
    Column("node_ip", STR, "Ray node IP that ran the trial."),
    Column("node_id", STR, "Ray node id that ran the trial (tells apart nodes that share a host and IP)."),
    Column("python_version", STR, "Python version of the trial process."),
    Column("triton_version", STR, "Triton installed for the trial process (triton or pytorch-triton); null if none."),
    Column("transformers_version", STR, "transformers installed for the trial process."),
    Column("ray_version", STR, "Ray installed on the trial's node (read from package metadata, not imported)."),
    Column("started_at", TIMESTAMP, "Trial start (UTC)."),
    Column("finished_at", TIMESTAMP, "Trial end (UTC)."),
    Column("trial_wall_s", FLOAT, "Wall time of the trial, process starts and both compiles included."),
    Column("setup_s", FLOAT, "Measuring process start to model, batch and eager reference ready (interpreter, imports, CUDA init, build)."),
    Column("phase_s_json", STR, "Seconds per phase of the trial as JSON: imports (process start to measuring code), env "
       "(the row's environment record; on CUDA this initializes the runtime), cuda_init (the CUDA context), build "
       "(model and batch on the device), reference (eager reference outputs), eager (baseline), compiled "
       "(compile, accuracy, steady windows), and the wall time of each measuring process (cold_process, "
       "warm_process, megacache_process: interpreter start to exit, teardown included); the warm-compile "
       "and Mega-Cache processes' own phases as warm.PHASE and megacache.PHASE, and warm.exit / megacache.exit: "
       "their process time beyond them (exit, teardown)."),
]

COLUMN_NAMES = [c.name for c in COLUMNS]
COLUMN_KINDS: dict[str, Kind] = {c.name: c.kind for c in COLUMNS}


class ResultsError(SweeperError):
    """Unreadable, corrupt or missing results: the message names the file."""


def _fits(value: Any, kind: Kind) -> bool:
    """Whether a non-null value is of a column kind. An int column also takes a whole float:
    pandas reads an int column with nulls back as floats, and a resumed sweep rewrites those rows."""
    if kind == STR:
        return isinstance(value, str)
    if kind == BOOL:
        return isinstance(value, bool)
    if isinstance(value, bool):  # bool is an int to Python; never to a numeric column
        return False
    if kind == INT:
        return isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer())
    if kind == FLOAT:
        return isinstance(value, numbers.Real)
    return isinstance(value, (str, datetime.datetime))


def check_row(row: Mapping[str, Any]) -> None:
    """Refuse a row that breaks the contract: ValueError naming the first unknown column, or
    the first column whose value is not of its kind. Null (None) is allowed in every column."""
    for name, value in row.items():
        kind = COLUMN_KINDS.get(name)
        if kind is None:
            raise ValueError(f"row column {name!r} is not in the results schema")
        if value is not None and not _fits(value, kind):
            raise ValueError(f"row column {name!r} should be {kind}, got {type(value).__name__} {value!r:.80}")


def normalize_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A checked row with every schema column, in schema order; missing ones are null."""
    check_row(row)
    return {name: row.get(name) for name in COLUMN_NAMES}


def schema_markdown() -> str:
    """The schema table of docs/results-schema.md, generated so that the docs cannot drift from the code."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{c.name}` | {c.arrow_type_name} | {c.doc.replace('|', '/')} |" for c in COLUMNS]
    return "\n".join(lines)


if __name__ == "__main__":
    print(schema_markdown())
