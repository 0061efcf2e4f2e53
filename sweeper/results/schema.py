"""The columns of a trial row: names, Arrow types and meanings, and the values of the mode
column. `python -m sweeper.results.schema` prints the README's schema table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

EAGER = "eager"
"""The mode of a trial that does not compile: the baseline of its context."""


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    doc: str


def _c(name: str, type_: pa.DataType, doc: str) -> Column:
    return Column(name, type_, doc)


S, F, I, B = pa.string(), pa.float64(), pa.int64(), pa.bool_()
TS = pa.timestamp("us", tz="UTC")

COLUMNS: list[Column] = [
    # identity
    _c("sweep_id", S, "Sweep this row belongs to (stable across --resume)."),
    _c("trial_id", S, "Stable hash of the trial's config: same config, same id."),
    _c("sweep_name", S, "The spec's `name`."),
    # config
    _c("model", S, "Model name (zoo name or the spec's label for a factory model)."),
    _c("task", S, "vision, nlp or custom: decides inputs and the item unit."),
    _c("mode", S, "eager (no compile) or the torch.compile mode."),
    _c("backend", S, "torch.compile backend (inductor unless the spec says otherwise)."),
    _c("dynamic", B, "torch.compile(dynamic=...); null = automatic dynamic."),
    _c("batch_size", I, "Items per batch."),
    _c("seq_len", I, "Tokens per sequence for NLP models; null for vision."),
    _c("phase", S, "infer (no_grad forward) or train (forward + backward + AdamW step)."),
    _c("precision", S, "fp32, or bf16 through torch.autocast."),
    _c("matmul_precision", S, "torch.set_float32_matmul_precision in force."),
    _c("config_json", S, "The trial's full config as JSON (model kwargs, measurement settings)."),
    # outcome
    _c("status", S, "ok, oom, compile_error, runtime_error, timeout, inaccurate, crashed."),
    _c("error", S, "Exception class and message (or exit signal) when status is not ok."),
    _c("attempts", I, "Processes started for this trial (retries after a crash included)."),
    # compile
    _c("compile_s", F, "Cold compile: first compiled call (synchronized) minus one steady iteration, fresh cache."),
    _c("first_call_s", F, "Raw wall time of the first compiled call, cold cache."),
    _c("warm_compile_s", F, "Same as compile_s in a new process whose cache holds this trial's artifacts."),
    _c("warm_first_call_s", F, "Raw first call in that warm-cache process."),
    # steady state
    _c("throughput_items_s", F, "Items/s: median over timed windows (images or sequences)."),
    _c("throughput_tokens_s", F, "Real tokens/s for NLP models (median window); null for vision."),
    _c("latency_p50_ms", F, "Per-iteration latency, 50th percentile over all timed iterations."),
    _c("latency_p90_ms", F, "Per-iteration latency, 90th percentile."),
    _c("latency_p99_ms", F, "Per-iteration latency, 99th percentile."),
    _c("throughput_spread_pct", F, "(max - min) / median of window throughputs, in percent."),
    _c("timed_windows", I, "Number of timed windows."),
    _c("iters_per_window", I, "Iterations per timed window."),
    # memory
    _c("peak_mem_gib", F, "Peak allocated memory from the warm-up through the timed windows (CUDA; CUDA-graph pools included), or process RSS high-water (CPU)."),
    _c("peak_mem_compile_gib", F, "Peak allocated memory over the whole compiled run, compile/autotune included."),
    _c("peak_reserved_gib", F, "Peak reserved (cached) CUDA memory over the whole compiled run; null on CPU."),
    _c("mem_need_reserved_gib", F, "What the caching allocator took over the whole trial (eager, compile, autotune, CUDA-graph pools, steady): the memory a setting needs, as torch.cuda.set_per_process_memory_fraction caps it. Null on CPU."),
    _c("device_mem_used_gib", F, "Device memory in use (all of the GPU's, CUDA context and loaded kernels included) at its highest phase end: with one trial per GPU, what the trial's process occupied. Null on CPU."),
    # eager baseline (same process, model, inputs)
    _c("eager_throughput_items_s", F, "Eager throughput of the same model/phase/precision/batch, same process, windows alternating with the compiled ones."),
    _c("eager_latency_p50_ms", F, "Eager per-iteration latency p50."),
    _c("eager_peak_mem_gib", F, "Eager steady peak memory."),
    _c("speedup_vs_eager", F, "throughput_items_s / eager_throughput_items_s."),
    _c("mem_ratio_vs_eager", F, "peak_mem_gib / eager_peak_mem_gib."),
    _c("break_even_iters", F, "compile_s / (eager iter time - compiled iter time); inf when compiling never pays."),
    _c("speedup_ci_low", F, "Lower end of the speedup's 95% bootstrap interval over the pairs of alternated eager and compiled windows."),
    _c("speedup_ci_high", F, "Upper end of that interval. Speedups whose intervals overlap are not told apart."),
    _c("host_busy_windows_pct", F, "Timed windows (either arm) during which another trial on the host was compiling, in percent: measured from that trial's compile marker."),
    _c("cpu_affinity", S, "CPUs the measuring process could run on, e.g. 0-15: the trial's own share when pinned."),
    _c("cpu_count", I, "Number of those CPUs."),
    _c("cpus_pinned", B, "The trial held its own slot of whole physical cores (its processes and compile workers ran there only)."),
    # compile health
    _c("graphs", I, "Unique graphs dynamo captured."),
    _c("graph_breaks", I, "Graph breaks."),
    _c("recompiles", I, "Recompilations after the first compile of each frame."),
    _c("cudagraph_skips", I, "Graphs whose CUDA-graph capture was skipped (reduce-overhead modes)."),
    _c("recompile_limit_hit", B, "A frame hit torch._dynamo's recompile limit and fell back to eager."),
    _c("graph_break_reasons", S, "JSON list of distinct graph-break reasons (first 20)."),
    # accuracy
    _c("accuracy_ok", B, "Compiled outputs (and, for train, gradients) pass: error vs float64 <= accuracy_tol (2x eager's own error, 3x in bf16, plus a floor), or, without a float64 reference, rel_err <= accuracy_tol."),
    _c("max_abs_err", F, "Max absolute difference, compiled vs eager output."),
    _c("rel_err", F, "||compiled - eager|| / ||eager|| of the output (max over output and gradients in train)."),
    _c("accuracy_tol", F, "The bound the check applied: allowed error vs float64, or the tolerance vs eager (see accuracy_reference)."),
    _c("eager_err_vs_fp64", F, "Eager's own relative error against a float64 run of the same model and batch (max over output and gradients)."),
    _c("compiled_err_vs_fp64", F, "The compiled result's relative error against the same float64 run."),
    _c("accuracy_reference", S, "Where the float64 reference ran: fp64_device, fp64_cpu, or eager (none possible: compiled vs eager within the tolerance)."),
    _c("accuracy_note", S, "Why the float64 reference is missing or ran on the host."),
    # input streams (trials with a workload; null for fixed-shape trials)
    _c("workload", S, "Name of the spec's workload (input stream) this trial ran; null: one fixed-shape batch."),
    _c("length_source", S, "Where the stream's lengths came from, with parameters, e.g. lognormal(mu=5.19, sigma=0.6)."),
    _c("bucketing", S, "Padding policy of a token stream: none, multiple:N, pow2, list:A,B,..., quantile:K."),
    _c("mark_dynamic", B, "Input dimensions that vary over the stream were marked with torch._dynamo.mark_dynamic."),
    _c("stream_batches", I, "Batches in the stream."),
    _c("stream_shapes", I, "Distinct input shapes in the stream (after bucketing)."),
    _c("pad_waste", F, "Padding tokens / all tokens computed over the stream (0 = no padding)."),
    _c("stream_s", F, "End-to-end seconds of the first pass over the stream, every compile and recompile included."),
    _c("eager_stream_s", F, "The same first pass, eager, same process and batches."),
    _c("stream_speedup_vs_eager", F, "eager_stream_s / stream_s: the end-to-end gain, compiles paid."),
    _c("real_tokens_per_s", F, "Real (non-padding) tokens/s over the steady passes after the first (median pass)."),
    _c("eager_real_tokens_per_s", F, "Eager real tokens/s over steady passes alternating with the compiled ones."),
    _c("stream_compile_s", F, "stream_s minus the steady time of the same batches: seconds spent compiling."),
    _c("compile_s_per_shape", F, "stream_compile_s / stream_shapes: compile cost per distinct shape."),
    _c("stream_break_even_batches", F, "Batches of this mix after which compiling has paid for itself vs eager; inf if never."),
    _c("fell_back_to_eager", B, "Hit the recompile limit: later new shapes ran eager. Never a setting to recommend."),
    _c("accuracy_shapes", I, "Distinct shapes whose first batch was checked against eager and float64 (real positions only)."),
    _c("notes", S, "Warnings about a row that ran, e.g. FELL BACK TO EAGER."),
    # environment
    _c("sweeper_version", S, "sweeper package version."),
    _c("git_commit", S, "Commit of the sweeper checkout that launched the sweep, if any."),
    _c("torch_version", S, "torch.__version__ in the trial process."),
    _c("cuda_version", S, "torch.version.cuda (null for CPU builds)."),
    _c("driver_version", S, "NVIDIA driver version (null on CPU)."),
    _c("device_type", S, "cuda or cpu."),
    _c("device_name", S, "GPU name, or the CPU model."),
    _c("gpu_uuid", S, "UUID of the GPU the trial ran on (null on CPU)."),
    _c("hostname", S, "Host that ran the trial."),
    _c("node_ip", S, "Ray node IP that ran the trial."),
    _c("node_id", S, "Ray node id that ran the trial (tells apart nodes that share a host and IP)."),
    _c("python_version", S, "Python version of the trial process."),
    _c("triton_version", S, "Triton installed for the trial process (triton or pytorch-triton); null if none."),
    _c("transformers_version", S, "transformers installed for the trial process."),
    _c("ray_version", S, "Ray installed on the trial's node (read from package metadata, not imported)."),
    _c("started_at", TS, "Trial start (UTC)."),
    _c("finished_at", TS, "Trial end (UTC)."),
    _c("trial_wall_s", F, "Wall time of the trial, process starts and both compiles included."),
    _c("setup_s", F, "Measuring process start to model, batch and eager reference ready (interpreter, imports, CUDA init, build)."),
    _c("phase_s_json", S, "Seconds per phase of the trial as JSON: imports (process start to measuring code), env "
       "(the row's environment record; on CUDA this initializes the runtime), cuda_init (the CUDA context), build "
       "(model and batch on the device), reference (eager reference outputs), eager (baseline), compiled "
       "(compile, accuracy, steady windows), and the wall time of each measuring process (cold_process, "
       "warm_process: interpreter start to exit, teardown included)."),
]

SCHEMA = pa.schema([pa.field(c.name, c.type) for c in COLUMNS])
COLUMN_NAMES = [c.name for c in COLUMNS]


class ResultsError(ValueError):
    """Unreadable, corrupt or missing results: the message names the file."""


def normalize_row(row: dict[str, Any]) -> dict[str, Any]:
    """Keep schema columns only, fill the missing ones with null."""
    unknown = set(row) - set(COLUMN_NAMES)
    if unknown:
        raise AssertionError(f"row has columns outside the schema: {sorted(unknown)}")
    return {name: row.get(name) for name in COLUMN_NAMES}


def schema_markdown() -> str:
    """The README's schema table, generated so that the docs cannot drift from the code."""
    lines = ["| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{c.name}` | {c.type} | {c.doc.replace('|', '/')} |" for c in COLUMNS]
    return "\n".join(lines)


if __name__ == "__main__":
    print(schema_markdown())
